"""Runs per second: many runs batched in one process against one run per job, measured in the same run.

    python benchmarks/training.py [--configfile config/config.yaml] [--task teacher_student] [--optimizer adam]
                                  [--heads 4] [--per-job 3] [--threads 1]

The runs: one cell of the preset (task, optimizer, head count) with every seed and rebalancing mode
of the preset, at the preset's sizes and steps (attnid.training.runs). Two ways to train them, each
in fresh Python processes as a workflow job would be (imports and start-up included):

  one run per job   a process per run trains it alone (the trainer's single-run case,
                    attnid.training.batched); timed on `--per-job` of the runs, extrapolated to all of them
  batched           one process trains all the runs as one batched model (attnid.training.batched)

Times are the CPU seconds of the child processes (resource.getrusage), which a busy shared machine
inflates far less than wall time; wall seconds are printed too. Also printed: the same two in
process (no start-up), so the two sources of the speed-up (start-up per job, batching) are apart.
Both measure the same per step; `--no-gauge` drops the gauge-invariant overlap (the costliest
measurement) from both.

    python benchmarks/training.py --precision [--steps 200] [--configfile ...] [--task ...] [--optimizer ...] [--heads ...]

trains the same cell (every seed and rebalancing mode, batched, in this process, one thread) in float64
and in float32, paired (a float32 run starts from the float64 run's parameters and data, rounded:
attnid.training.nets.build), and prints for every reported summary quantity and rebalancing mode the
float64 mean with its 95% t-interval over seeds, the float32 mean, whether it lies inside the interval,
and the largest paired difference over seeds; quantities at rounding are printed against float32's
unit roundoff u = 2^-24. `--out` writes the table as CSV.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from itertools import product
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time, torch
torch.set_num_threads({threads})
from attnid.training.runs import job_params, run_config, runs
training = json.loads(sys.argv[1]); keys = json.loads(sys.argv[2]); mode = sys.argv[3]
cfgs = [run_config(job_params(training, k["task"], k["optimizer"]), "cpu", **k) for k in keys]
start = time.process_time()
from attnid.training.batched import train_batched
gauge = not mode.endswith("no_gauge")
if mode.startswith("alone"):
    for cfg in cfgs:
        train_batched([cfg], progress=False, gauge=gauge)
else:
    train_batched(cfgs, progress=False, gauge=gauge)
print(json.dumps({{"train_cpu": time.process_time() - start}}))
"""


def child(training: dict, keys: list[dict], mode: str, threads: int) -> dict:
    """Run CHILD in a fresh interpreter; its CPU seconds (all of it, start-up included) and wall seconds."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(threads=threads), json.dumps(training), json.dumps(keys), mode],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu, "wall": time.perf_counter() - start, **json.loads(out.stdout.strip().splitlines()[-1])}


QUANTITIES = (
    "final_loss", "final_eval_loss", "final_eval_accuracy", "mean_overlap_all", "mean_overlap_query_key",
    "mean_overlap_value_output", "mean_overlap_gauge", "max_overlap_all", "mean_update_norm",
    "final_drift_query_key", "final_drift_value_output", "max_rebalance_function_change",
    "mean_rebalance_norm_removed",
)  # fmt: skip
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24}


def precision(training: dict, keys: list[dict], steps: int | None, out: str | None):
    """float64 against float32 on the same runs (paired); see the module docstring."""
    import pandas as pd
    import torch

    from attnid.training.analysis import t_interval
    from attnid.training.batched import train_batched
    from attnid.training.runs import job_params, run_config

    torch.set_num_threads(1)
    cfgs = [run_config(job_params(training, k["task"], k["optimizer"]), "cpu", **k) for k in keys]
    cfgs = [c.with_(steps=steps) for c in cfgs] if steps else cfgs
    rows, cpu = [], {}
    for dtype in ("float64", "float32"):
        start = time.process_time()
        results = train_batched([c.with_(dtype=dtype) for c in cfgs], progress=False)
        cpu[dtype] = time.process_time() - start
        rows += [{**k, "dtype": dtype, **{q: s[q] for q in QUANTITIES}} for k, (_, s) in zip(keys, results)]
    df = pd.DataFrame(rows)
    table = []
    for mode, quantity in product(df["rebalance"].unique(), QUANTITIES):
        runs64 = df[(df["dtype"] == "float64") & (df["rebalance"] == mode)].set_index("seed")[quantity]
        runs32 = df[(df["dtype"] == "float32") & (df["rebalance"] == mode)].set_index("seed")[quantity]
        if runs64.isna().all() and runs32.isna().all():
            continue
        low, high = t_interval(runs64)
        paired = (runs32 - runs64).abs().max()
        table.append({"rebalance": mode, "quantity": quantity, "float64_mean": runs64.mean(), "low": low,
                      "high": high, "float32_mean": runs32.mean(),
                      "inside": bool(low <= runs32.mean() <= high) if math.isfinite(low) else math.nan,
                      "max_paired_diff": paired, "float32_max": runs32.max(),
                      "float32_max_over_u": runs32.max() / UNIT_ROUNDOFF["float32"]})  # fmt: skip
    table = pd.DataFrame(table)
    cfg, label = cfgs[0], keys[0]["optimizer"]
    print(f"{cfg.task}/{label} H={cfg.heads}: {len(cfgs)} runs x {cfg.steps} steps; CPU s float64 "
          f"{cpu['float64']:.1f}, float32 {cpu['float32']:.1f} ({cpu['float64'] / cpu['float32']:.2f}x)")  # fmt: skip
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if out:
        table.assign(task=cfg.task, optimizer=label, heads=cfg.heads, steps=cfg.steps,
                     cpu_float64=cpu["float64"], cpu_float32=cpu["float32"]).to_csv(out, index=False)  # fmt: skip
    return table


def main(argv=None) -> dict:
    from attnid.training.runs import runs

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", default="config/config.yaml")
    parser.add_argument("--task", default="teacher_student")
    parser.add_argument("--optimizer", default="adam")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--per-job", type=int, default=3, help="runs timed one per process (then extrapolated)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-gauge", action="store_true", help="both without the gauge-invariant overlap")
    parser.add_argument("--precision", action="store_true", help="float64 against float32 on the cell, paired")
    parser.add_argument("--steps", type=int, default=None, help="--precision: steps per run (default: the preset's)")
    parser.add_argument("--out", default=None, help="--precision: write the table to this CSV")
    args = parser.parse_args(argv)
    training = yaml.safe_load((ROOT / args.configfile).read_text())["training"]
    keys = [k for k in runs(training, args.task, args.optimizer) if k["heads"] == args.heads]
    if not keys:
        sys.exit(f"{args.configfile}: no runs of {args.task}/{args.optimizer} at heads {args.heads}")
    if args.precision:
        return precision(training, keys, args.steps, args.out)
    n = len(keys)
    suffix = "_no_gauge" if args.no_gauge else ""
    per_job = [child(training, [k], "alone" + suffix, args.threads) for k in keys[: args.per_job]]
    batched = child(training, keys, "batched" + suffix, args.threads)
    job_cpu = sum(r["cpu"] for r in per_job) / len(per_job)
    job_wall = sum(r["wall"] for r in per_job) / len(per_job)
    job_train = sum(r["train_cpu"] for r in per_job) / len(per_job)
    result = {
        "runs": n,
        "one_run_per_job": {"runs_per_cpu_s": 1 / job_cpu, "runs_per_wall_s": 1 / job_wall, "in_process_runs_per_cpu_s": 1 / job_train},
        "batched": {"runs_per_cpu_s": n / batched["cpu"], "runs_per_wall_s": n / batched["wall"], "in_process_runs_per_cpu_s": n / batched["train_cpu"]},
    }  # fmt: skip
    result["speedup"] = job_cpu * n / batched["cpu"]
    result["speedup_in_process"] = job_train * n / batched["train_cpu"]
    print(
        f"{args.configfile}: {args.task}/{args.optimizer}, H = {args.heads}: {n} runs (seeds x rebalancing modes), {args.threads} thread(s)"
    )
    print(f"{'':22s} {'runs/CPU-s':>11s} {'runs/wall-s':>12s} {'in process':>11s}")
    for name in ("one_run_per_job", "batched"):
        r = result[name]
        print(
            f"{name:22s} {r['runs_per_cpu_s']:11.3f} {r['runs_per_wall_s']:12.3f} {r['in_process_runs_per_cpu_s']:11.3f}"
        )
    print(
        f"speed-up (CPU time, start-up included): {result['speedup']:.1f}x; in process: {result['speedup_in_process']:.1f}x"
    )
    print(
        f"(one run per job measured on {len(per_job)} of the {n} runs; start-up per job {job_cpu - job_train:.1f} CPU-s)"
    )
    return result


if __name__ == "__main__":
    main()
