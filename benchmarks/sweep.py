"""Wall time of a preset's training with --cores 1 and --cores 2, and a preset's training time on this
machine extrapolated from measured subsets.

    python benchmarks/sweep.py sweep  [--configfile config/config.yaml] [--cores 1 2] [--target training_aggregate]
    python benchmarks/sweep.py paper  [--configfile config/paper.yaml] [--fraction 0.01] [--optimizer adam]
                                      [--task recall] [--heads 2 4] [--cores 2] [--device cpu|cuda]

sweep: for each N in --cores, a fresh temporary copy of the working tree runs `snakemake --cores N
  <target>` (default: training_aggregate, i.e. every training job of the preset and the aggregation).
  Reported per N: wall seconds; the sums over jobs of Snakemake's benchmark columns `s` (job wall) and
  `cpu_time`; the load average before and after (on a shared machine other people's work inflates wall
  times, not CPU times). Then the speed-up t(first)/t(N).

paper: in this process, every (task, H) group of the preset with one optimizer (all its seeds and
  rebalancing modes, batched exactly as its job trains them) at `--fraction` and twice that of the
  steps; the CPU seconds are fitted as fixed + per_step x steps (the loop is linear in steps: metrics
  every step, evaluation and rebalancing at fixed intervals) and extrapolated to the preset's steps and
  to every optimizer of the task (the optimizers cost the same per step up to the update rule). This
  is an extrapolation, and is printed as one; the jobs run in parallel, so the wall time on N idle
  cores is about the CPU time / N. `--device cuda` measures the same groups on a GPU.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from worktree import copy_tree


def snakemake(work: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=work, capture_output=True, text=True, check=False
    )
    if check and out.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed:\n{out.stderr[-4000:]}")
    return out


def job_benchmarks(work: Path) -> pd.DataFrame:
    """Every job's Snakemake benchmark row (results/benchmarks/**.tsv), with the file as `job`."""
    rows = [
        pd.read_csv(p, sep="\t").assign(job=str(p.relative_to(work)))
        for p in (work / "results/benchmarks").rglob("*.tsv")
    ]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["s", "cpu_time", "job"])


def timed_build(work: Path, cores: int, targets: list[str], extra: list[str]) -> dict:
    load0 = os.getloadavg()[0]
    start = time.perf_counter()
    snakemake(work, *targets, "--cores", str(cores), *extra)
    wall = time.perf_counter() - start
    bench = job_benchmarks(work)
    return {
        "cores": cores,
        "wall_s": wall,
        "jobs": len(bench),
        "sum_job_s": bench["s"].sum(),
        "sum_cpu_s": bench["cpu_time"].sum(),
        "load_before": load0,
        "load_after": os.getloadavg()[0],
    }


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


def paper(args) -> None:
    """Train, in this process, every (task, H) group of one optimizer of the preset (all seeds and
    rebalancing modes, batched, as its job does) at two step counts; fit CPU seconds = fixed + per_step *
    steps; extrapolate to the preset's steps and to all its optimizers, plus the learning-rate study."""
    import torch

    from attnid.device import resolve_device
    from attnid.training.batched import train_batched
    from attnid.training.runs import job_params, run_config, runs

    resolve_device(args.device)  # DeviceError with the reason when CUDA is asked for and absent
    torch.set_num_threads(1)
    training = yaml.safe_load((ROOT / args.configfile).read_text())["training"]
    rows = []
    for section in training["tasks"]:
        if args.task and section["task"] != args.task:
            continue
        task, optimizer = section["task"], args.optimizer
        n_optimizers = len(section["optimizers"])
        steps = [max(2, round(section["steps"] * args.fraction)), max(4, round(2 * section["steps"] * args.fraction))]
        for heads in [h for h in section["heads"] if not args.heads or h in args.heads]:
            keys = [k for k in runs(training, task, optimizer) if k["heads"] == heads]
            cfgs = [run_config(job_params(training, task, optimizer), args.device, **k) for k in keys]
            cpu = []
            train_batched([c.with_(steps=1, eval_every=1) for c in cfgs[:2]], progress=False)  # warm-up, not timed
            for n in steps:
                start = time.process_time()
                train_batched([c.with_(steps=n, eval_every=n) for c in cfgs], progress=False)
                cpu.append(time.process_time() - start)
            per_step = (cpu[1] - cpu[0]) / (steps[1] - steps[0])
            fixed = max(cpu[0] - per_step * steps[0], 0.0)
            evals = section["steps"] // training["eval_every"] + 1  # held-out evaluations of the full run
            rows.append({"task": task, "heads": heads, "runs": len(cfgs), "measured_steps": steps, "cpu_s": cpu,
                         "ms_per_step": 1e3 * per_step, "fixed_s": fixed, "evaluations": evals,
                         "group_cpu_s": fixed + per_step * section["steps"], "optimizers": n_optimizers})  # fmt: skip
            print(f"{task} H={heads}: {len(cfgs)} runs, {1e3 * per_step:.0f} ms/step (batched), "
                  f"~{rows[-1]['group_cpu_s'] / 60:.1f} CPU-min per optimizer", file=sys.stderr)  # fmt: skip
    df = pd.DataFrame(rows)
    total = (df["group_cpu_s"] * df["optimizers"]).sum()
    print(f"# {args.configfile}: training extrapolated from {args.fraction:g} and {2 * args.fraction:g} of the steps, "
          f"optimizer {args.optimizer} measured for every (task, H), one thread, device {args.device}, "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(df.drop(columns=["cpu_s"]).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    print(f"# EXTRAPOLATED: {len(runs(training))} runs in {len(df) and df['optimizers'].sum()} batched groups: "
          f"{total / 3600:.2f} CPU-hours; about {total / args.cores / 60:.0f} min wall with {args.cores} jobs in parallel "
          "(the held-out evaluations are inside the fixed cost only once: add them if eval_batch is large)")  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("sweep", help="--cores 1 vs --cores 2 on a preset's sweep")
    s.add_argument("--configfile", default="config/config.yaml")
    s.add_argument("--cores", type=int, nargs="+", default=[1, 2])
    s.add_argument("--target", nargs="+", default=["training_aggregate"])
    p = sub.add_parser("paper", help="a preset's training extrapolated from batched groups at a fraction of the steps")
    p.add_argument("--configfile", default="config/paper.yaml")
    p.add_argument("--fraction", type=float, default=0.01, help="fraction of each task's steps to run (and twice that)")
    p.add_argument("--optimizer", default="adam", help="the optimizer measured (its cost stands for every optimizer)")
    p.add_argument("--task", default=None, help="measure only this task")
    p.add_argument("--heads", type=int, nargs="*", default=None, help="measure only these head counts")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args(argv)
    sweep(args) if args.mode == "sweep" else paper(args)


if __name__ == "__main__":
    main()
