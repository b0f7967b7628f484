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
  cores is about the CPU time / N. The held-out evaluations (every eval_every steps, eval_batch
  sequences) are timed apart (one more run that evaluates more often) and added per evaluation.
  `--device cuda` measures the same groups on a GPU.

  The arithmetic floor, printed next to it: every matrix product of one training step (forward and
  backward of the loss as the batched trainer computes it, the teacher's targets, the held-out
  forward passes) is recorded with its shape (a TorchDispatchMode on one run), counted in FLOPs
  (2 b n k m), and replayed as torch.bmm batched over the group's runs, as vmap batches them, in
  float64 and float32 on one thread: the CPU seconds of the products alone at this machine's rate at
  those very shapes. No exact implementation of the same steps can be faster than its matrix products,
  so this is a lower bound on the preset's training time here (the rest, elementwise work, metrics
  and Python, is on top). `--floor-only` prints the floor without timing the training.
"""

from __future__ import annotations

import argparse
import math
import os
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


MATMULS = ("mm", "addmm", "bmm", "baddbmm")


def matmul_recorder():
    """A TorchDispatchMode that records (b, n, k, m) of every matrix product (b = batch, (n, k) @ (k, m))."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.shapes = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if name in MATMULS:
                a, b = args[1:3] if name.startswith(("add", "badd")) else args[:2]
                self.shapes.append((a.shape[0] if a.dim() == 3 else 1, a.shape[-2], a.shape[-1], b.shape[-1]))
            return func(*args, **(kwargs or {}))

    return Recorder()


def flops(shapes: list) -> float:
    return float(sum(2 * b * n * k * m for b, n, k, m in shapes))


def matmul_seconds(shapes: list, runs: int, dtype, cache: dict) -> float:
    """CPU seconds of the products `shapes` batched over `runs` (torch.bmm, one thread): best of 3 timings each."""
    import torch

    total = 0.0
    for (b, n, k, m), count in Counter(shapes).items():
        key = (runs * b, n, k, m, dtype)
        if key not in cache:
            x, y = torch.randn(runs * b, n, k, dtype=dtype), torch.randn(runs * b, k, m, dtype=dtype)
            out = torch.empty(runs * b, n, m, dtype=dtype)
            start = time.process_time()
            torch.bmm(x, y, out=out)
            repeat = max(1, int(0.02 / max(time.process_time() - start, 1e-6)))  # about 20 ms a timing
            best = math.inf
            for _ in range(3):
                start = time.process_time()
                for _ in range(repeat):
                    torch.bmm(x, y, out=out)
                best = min(best, (time.process_time() - start) / repeat)
            cache[key] = best
        total += cache[key] * count
    return total


def step_matmuls(cfg) -> dict:
    """The matrix products of one run's training step: {'step': forward and backward of the loss (the
    recall loss at the last position, as attnid.training.batched), 'data': the teacher's targets (one
    per seed and step), 'eval': one held-out forward pass of `batch` sequences}."""
    import torch

    from attnid.training.loop import build

    task, model = build(cfg)
    last = {"last_only": True} if cfg.task == "recall" else {}
    shapes = {}
    with matmul_recorder() as rec:
        batch = task.train_batch(cfg.batch)
    shapes["data"] = rec.shapes if cfg.task == "teacher_student" else []
    with matmul_recorder() as rec:
        task.loss(model(batch.inputs, **last), batch).backward()
    shapes["step"] = rec.shapes
    with torch.no_grad(), matmul_recorder() as rec:
        model(batch.inputs, **last)
    shapes["eval"] = rec.shapes
    return shapes


def floor(cfgs: list, section: dict, training: dict, cache: dict) -> dict:
    """FLOPs and matmul-only CPU seconds (float64, float32) of one batched group's whole training."""
    import torch

    cfg, M = cfgs[0], len(cfgs)
    seeds = len({c.seed for c in cfgs})
    shapes = step_matmuls(cfg)
    evals = evaluations(section["steps"], training["eval_every"])
    chunks = math.ceil(training["eval_batch"] / cfg.batch)
    out = {
        "gflop_per_run_step": flops(shapes["step"]) / 1e9,
        "group_pflop": (
            section["steps"] * (M * flops(shapes["step"]) + seeds * flops(shapes["data"]))
            + evals * chunks * M * flops(shapes["eval"])
        )
        / 1e15,
    }
    for name, dtype in (("float64", torch.float64), ("float32", torch.float32)):
        per_step = matmul_seconds(shapes["step"], M, dtype, cache) + matmul_seconds(shapes["data"], seeds, dtype, cache)
        per_eval = chunks * matmul_seconds(shapes["eval"], M, dtype, cache)
        out[f"floor_{name}_s"] = section["steps"] * per_step + evals * per_eval
        out[f"gflops_{name}"] = M * flops(shapes["step"]) / matmul_seconds(shapes["step"], M, dtype, cache) / 1e9
    return out


def evaluations(steps: int, every: int) -> int:
    """Held-out evaluations of a run: at steps t with t % every == 0 or t = steps - 1, and one after the last."""
    return len({t for t in range(steps) if t % every == 0} | {steps - 1}) + 1


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
    rows, cache = [], {}
    for section in training["tasks"]:
        if args.task and section["task"] != args.task:
            continue
        task, optimizer = section["task"], args.optimizer
        n_optimizers = len(section["optimizers"])
        steps = [max(3, round(section["steps"] * args.fraction)), max(6, round(2 * section["steps"] * args.fraction))]
        often = max(1, min(steps[0] // 4, steps[0] - 2))  # the evaluation run: at least one more evaluation
        for heads in [h for h in section["heads"] if not args.heads or h in args.heads]:
            keys = [k for k in runs(training, task, optimizer) if k["heads"] == heads]
            cfgs = [run_config(job_params(training, task, optimizer), args.device, **k) for k in keys]
            evals = evaluations(section["steps"], training["eval_every"])  # held-out evaluations of the full run
            row = {"task": task, "heads": heads, "runs": len(cfgs), "optimizers": n_optimizers, "evaluations": evals,
                   **floor(cfgs, section, training, cache)}  # fmt: skip
            if not args.floor_only:
                train_batched([c.with_(steps=1, eval_every=1) for c in cfgs[:2]], progress=False)  # warm-up, not timed
                cpu = []
                for n, every in ((steps[0], steps[0]), (steps[1], steps[1]), (steps[0], often)):
                    start = time.process_time()
                    train_batched([c.with_(steps=n, eval_every=every) for c in cfgs], progress=False)
                    cpu.append(time.process_time() - start)
                per_step = (cpu[1] - cpu[0]) / (steps[1] - steps[0])
                extra = evaluations(steps[0], often) - evaluations(steps[0], steps[0])
                per_eval = max(cpu[2] - cpu[0], 0.0) / extra
                fixed = max(cpu[0] - per_step * steps[0] - per_eval * evaluations(steps[0], steps[0]), 0.0)
                row.update(measured_steps=steps, ms_per_step=1e3 * per_step, s_per_eval=per_eval, fixed_s=fixed,
                           group_cpu_s=fixed + per_step * section["steps"] + per_eval * evals)  # fmt: skip
                print(f"{task} H={heads}: {len(cfgs)} runs, {1e3 * per_step:.0f} ms/step (batched), "
                      f"{per_eval:.2f} s/evaluation, ~{row['group_cpu_s'] / 60:.1f} CPU-min per optimizer",
                      file=sys.stderr)  # fmt: skip
            rows.append(row)
    df = pd.DataFrame(rows)
    print(f"# {args.configfile}: optimizer {args.optimizer} measured for every (task, H), one thread, device "
          f"{args.device}, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    n_runs, groups = len(runs(training)), len(df) and df["optimizers"].sum()
    pflop = (df["group_pflop"] * df["optimizers"]).sum()
    for name in ("float64", "float32"):
        hours = (df[f"floor_{name}_s"] * df["optimizers"]).sum() / 3600
        print(f"# FLOOR ({name}): {n_runs} runs, {pflop:.3f} PFLOP of matrix products (forward, backward, targets, "
              f"held-out); at this machine's {name} bmm rate at those shapes {hours:.2f} CPU-hours, "
              f"{60 * hours / args.cores:.0f} min on {args.cores} cores")  # fmt: skip
    if not args.floor_only:
        total = (df["group_cpu_s"] * df["optimizers"]).sum()
        print(f"# EXTRAPOLATED from {args.fraction:g} and {2 * args.fraction:g} of the steps: {n_runs} runs in {groups} "
              f"batched groups: {total / 3600:.2f} CPU-hours; about {total / args.cores / 60:.0f} min wall with "
              f"{args.cores} jobs in parallel")  # fmt: skip


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
    p.add_argument("--floor-only", action="store_true", help="only the arithmetic floor (no training timed)")
    args = parser.parse_args(argv)
    sweep(args) if args.mode == "sweep" else paper(args)


if __name__ == "__main__":
    main()
