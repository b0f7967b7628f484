"""Wall time of the training sweep with --cores 1 and --cores 2 (the speed-up), and the paper preset's
time on this machine, extrapolated from a measured subset.

    python benchmarks/sweep.py sweep  [--configfile config/config.yaml] [--cores 1 2] [--target ...]
    python benchmarks/sweep.py paper  [--fraction 0.1] [--rebalance none] [--cores 2] [--device cpu|cuda]

sweep: for each N in --cores, a fresh temporary copy of the working tree runs
  `snakemake --cores N <target>` (default: results/training/summary.parquet, i.e. every training run
  of the preset and the aggregation). Reported per N: wall seconds; the sums over jobs of Snakemake's
  benchmark columns `s` (job wall) and `cpu_time`; the load average before and after (on a shared
  machine other people's work inflates wall times, not CPU times). Then the speed-up t(first)/t(N).

paper: one run per (task, heads) of config/paper.yaml (first optimizer, seed 0, --rebalance), with
  every task's `steps` scaled by --fraction, in a temporary copy. Per measured run: fixed cost
  (job wall - training-loop seconds from summary.json: start-up, model build, writing) and loop cost;
  a full-size run is estimated as fixed + loop / fraction (the loop is linear in steps: metrics every
  step, evaluation and rebalancing at fixed intervals), and the preset as the sum over its grid of the
  estimate of the run's (task, heads), divided by --cores (the runs are independent jobs). This is an
  extrapolation, and is printed as one; a second figure scales each job by its cpu_time / wall, which
  is what the same jobs would take on an idle machine (one torch thread per job).

GPU: `paper --device cuda` runs the same subset with `--config device=cuda --resources gpu=1`, so the
  loop seconds per step on the GPU can be set against a `--device cpu` measurement of the same runs.
  It stops with a message when torch sees no GPU (attnid.device.resolve_device).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from worktree import copy_tree  # noqa: E402

RUN = re.compile(r"results/training/runs/(?P<task>[^/]+)/(?P<optimizer>[^/]+)/(?P<rebalance>[^/]+)/h(?P<heads>\d+)/s(?P<seed>\d+)/metrics\.parquet")


def snakemake(work: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=work, capture_output=True, text=True)
    if check and out.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed:\n{out.stderr[-4000:]}")
    return out


def job_benchmarks(work: Path) -> pd.DataFrame:
    """Every job's Snakemake benchmark row (results/benchmarks/**.tsv), with the file as `job`."""
    rows = [pd.read_csv(p, sep="\t").assign(job=str(p.relative_to(work))) for p in (work / "results/benchmarks").rglob("*.tsv")]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["s", "cpu_time", "job"])


def timed_build(work: Path, cores: int, targets: list[str], extra: list[str]) -> dict:
    load0 = os.getloadavg()[0]
    start = time.perf_counter()
    snakemake(work, *targets, "--cores", str(cores), *extra)
    wall = time.perf_counter() - start
    bench = job_benchmarks(work)
    return {"cores": cores, "wall_s": wall, "jobs": len(bench), "sum_job_s": bench["s"].sum(),
            "sum_cpu_s": bench["cpu_time"].sum(), "load_before": load0, "load_after": os.getloadavg()[0]}


def sweep(args) -> None:
    rows = []
    for cores in args.cores:
        with tempfile.TemporaryDirectory(prefix="attnid-sweep-") as tmp:
            work = copy_tree(Path(tmp))
            rows.append(timed_build(work, cores, args.target, ["--configfile", args.configfile]))
            print(f"--cores {cores}: {rows[-1]['wall_s']:.1f} s wall", file=sys.stderr)
    df = pd.DataFrame(rows)
    df["speedup"] = df["wall_s"].iloc[0] / df["wall_s"]
    print(f"# {' '.join(args.target)} with {args.configfile}")
    print(df.to_string(index=False, float_format=lambda v: f"{v:.2f}"))


def paper_config(fraction: float) -> dict:
    config = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    for task in config["training"]["tasks"]:
        task["steps"] = max(1, round(task["steps"] * fraction))
    return config


def paper(args) -> None:
    if args.device == "cuda":
        from attnid.device import resolve_device

        resolve_device("cuda")  # DeviceError with the reason when there is no GPU
    with tempfile.TemporaryDirectory(prefix="attnid-paper-") as tmp:
        work = copy_tree(Path(tmp))
        full = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
        (work / "config/bench_paper.yaml").write_text(yaml.safe_dump(paper_config(args.fraction)))
        config = ["--configfile", "config/bench_paper.yaml", "--config", f"device={args.device}"]
        listing = snakemake(work, "results/training/summary.parquet", "--summary", "--cores", "1", *config).stdout
        runs = [m.groupdict() for m in RUN.finditer(listing)]
        grid = Counter((r["task"], int(r["heads"])) for r in runs)  # runs per (task, heads) in the preset
        first_opt = {t["task"]: t["optimizers"][0]["name"] for t in full["training"]["tasks"]}
        chosen = {(r["task"], int(r["heads"])): r for r in runs
                  if r["optimizer"] == first_opt[r["task"]] and r["rebalance"] == args.rebalance and r["seed"] == "0"}
        targets = [f"results/training/runs/{r['task']}/{r['optimizer']}/{r['rebalance']}/h{r['heads']}/s0/metrics.parquet"
                   for r in chosen.values()]
        extra = ["--resources", "gpu=1"] if args.device == "cuda" else []
        start = time.perf_counter()
        snakemake(work, *targets, "--cores", str(args.cores), *config, *extra)
        wall = time.perf_counter() - start
        rows = []
        for (task, heads), r in sorted(chosen.items()):
            run = f"training/{task}/{r['optimizer']}/{r['rebalance']}/h{heads}/s0"
            bench = pd.read_csv(work / f"results/benchmarks/{run}.tsv", sep="\t").iloc[0]
            job_s, cpu_s = bench["s"], bench["cpu_time"]
            summary = json.loads((work / f"results/{run.replace('training/', 'training/runs/', 1)}/summary.json").read_text())
            loop_s, steps = summary["seconds"], summary["steps"]
            rows.append({"task": task, "heads": heads, "steps": steps, "job_s": job_s, "cpu_s": cpu_s, "loop_s": loop_s,
                         "ms_per_step": 1e3 * loop_s / steps, "fixed_s": job_s - loop_s,
                         "full_run_s": (job_s - loop_s) + loop_s / args.fraction, "runs_in_preset": grid[(task, heads)]})
    df = pd.DataFrame(rows)
    total = (df["full_run_s"] * df["runs_in_preset"]).sum()
    # one-thread jobs: on an idle machine wall ~ CPU time; a shared machine's wall is longer
    idle = (df["full_run_s"] * (df["cpu_s"] / df["job_s"]).clip(upper=1) * df["runs_in_preset"]).sum()
    print(f"# paper preset, measured subset: {len(df)} runs at {args.fraction:g} of the steps, device {args.device}, "
          f"--cores {args.cores}, {wall:.0f} s wall (load average {os.getloadavg()[0]:.1f})")
    print(df.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"# EXTRAPOLATED: {sum(grid.values())} training runs, {total / 3600:.2f} h of job time; "
          f"about {total / args.cores / 3600:.2f} h wall with {args.cores} parallel jobs (runs only; aggregation, "
          "counting, Jacobian, figures and paper come on top and take minutes)")
    print(f"# EXTRAPOLATED, idle machine (each job's wall scaled by its cpu_time/wall): {idle / 3600:.2f} h of job "
          f"time, about {idle / args.cores / 3600:.2f} h wall with {args.cores} parallel jobs")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("sweep", help="--cores 1 vs --cores 2 on a preset's sweep")
    s.add_argument("--configfile", default="config/config.yaml")
    s.add_argument("--cores", type=int, nargs="+", default=[1, 2])
    s.add_argument("--target", nargs="+", default=["results/training/summary.parquet"])
    p = sub.add_parser("paper", help="paper preset extrapolated from one run per (task, heads)")
    p.add_argument("--fraction", type=float, default=0.1, help="fraction of each task's steps to run")
    p.add_argument("--rebalance", default="none", help="rebalance mode of the measured runs")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args(argv)
    sweep(args) if args.mode == "sweep" else paper(args)


if __name__ == "__main__":
    main()
