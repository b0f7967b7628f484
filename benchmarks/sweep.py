"""Wall time of a preset's training with --cores 1 and --cores 2, and every training job of a preset against
its arithmetic floor.

    python benchmarks/sweep.py sweep  [--configfile config/config.yaml] [--cores 1 2] [--target training_aggregate]
    python benchmarks/sweep.py paper  [--configfile config/paper.yaml] [--steps 60] [--task recall] [--model llama]
                                      [--heads 2 4] [--cores 2] [--device cpu|cuda] [--floor-rounds 3]
                                      [--floor-only | --from-build | --rerun]

sweep: for each N in --cores, a fresh temporary copy of the working tree runs `snakemake --cores N
  <target>` (default: training_aggregate, i.e. every training job of the preset and the aggregation).
  Reported per N: wall seconds; the sums over jobs of Snakemake's benchmark columns `s` (job wall) and
  `cpu_time`; the load average before and after (on a shared machine other people's work inflates wall
  times, not CPU times). Then the speed-up t(first)/t(N).

paper: in this process, every job of the preset (a task, model and head count: all its optimizers, rebalancing
  modes and seeds, batched exactly as its job trains them) for its first `--steps` steps (rounded up to a
  multiple of the cadences: measured steps, evaluations, rebalances and gauge-invariant overlaps come at the
  preset's rate), one thread: CPU seconds per step, extrapolated to the preset's steps (the loop is linear in
  steps); the whole-model overlap (real architectures, every `gauge_every` steps) is timed apart and counted
  as often as the job takes it. Printed as an extrapolation; the jobs run in parallel, so the wall time on N
  idle cores is about the CPU time / N.

  The arithmetic floor, next to it: every matrix product of one run's training step (forward and backward of
  the loss as the batched trainer computes it, the teacher's targets, the held-out forward passes) is recorded
  with its shape (a TorchDispatchMode on one run), counted in FLOPs (2 b n k m), and replayed as torch.bmm
  batched over the job's runs, as vmap batches them, in the preset's dtype (and the other one) on one thread:
  the CPU seconds of the products alone at this machine's rate at those very shapes (best of 3 timings of a
  shape, and the lowest of `--floor-rounds` passes over all the jobs: this machine's rate moves by up to a
  quarter from one minute to the next). No exact implementation
  of the same steps can be faster than its matrix products, so this is a lower bound on the job's time here
  (the rest, elementwise work, metrics and Python, is on top). `ratio` = measured / floor in the preset's
  dtype, per job and for the preset. `--floor-only` prints the floor without timing the training.
  `--from-build` times nothing either: it reads each job's wall and CPU seconds from a finished build of the
  preset (Snakemake's benchmark files, <results_dir>/benchmarks/training/<task>/<model>/h<H>.tsv: start-up,
  set-up and writing included, two jobs sharing the 2 cores) and prints their ratios to the floor. Next to them,
  each job's start-up (`startup_cpu_s`: its process before its first step, the interpreter, torch, a real
  architecture's `transformers` class and the job's set-up; its own code in a fresh process, stopped there) and
  `trainer_ratio`, the job's CPU seconds less its start-up against the floor: what the trainer's steps cost, apart
  from a fixed cost of seconds that no trainer's speed changes.
  `--rerun` runs each selected job whole instead, alone, in its own process as its Snakemake job runs it (the job
  script's imports, its runs trained and its outputs written, to a temporary folder; one thread), timing its CPU
  seconds, its start-up (its CPU seconds at its first step) and its wall time, with its floor's passes just before
  and after it: the job and its floor measured within a minute of each other, where --from-build divides a build's
  seconds, measured hours earlier and two jobs sharing the cores, by a floor measured now.
"""

from __future__ import annotations

import argparse
import contextlib
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


def preset_config(configfile: str) -> dict:
    """config/config.yaml updated key by key by `configfile`, as Snakemake's --configfile does."""
    from snakemake.utils import update_config

    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    update_config(config, yaml.safe_load((ROOT / configfile).read_text()) or {})
    return config


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

    from attnid.training.nets import build

    task, net, theta = build(cfg)
    shapes = {}
    with matmul_recorder() as rec:
        batch = task.train_batch(cfg.batch)
    shapes["data"] = rec.shapes if cfg.task == "teacher_student" else []
    theta = theta.clone().requires_grad_(True)
    with matmul_recorder() as rec:
        loss = task.per_sample_loss(net(theta, batch.inputs), batch.targets).mean()
        torch.autograd.grad(loss, theta)
    shapes["step"] = rec.shapes
    with torch.no_grad(), matmul_recorder() as rec:
        net(theta, batch.inputs)
    shapes["eval"] = rec.shapes
    return shapes


def floor(cfgs: list, cache: dict, shapes: dict | None = None) -> dict:
    """FLOPs and matmul-only CPU seconds (float64, float32) of one job's whole training (`shapes`: its
    step_matmuls, recorded here when not given)."""
    import torch

    cfg, M = cfgs[0], len(cfgs)
    seeds = len({c.seed for c in cfgs})
    shapes = shapes or step_matmuls(cfg)
    evals = evaluations(cfg.steps, cfg.eval_every)
    chunks = math.ceil(cfg.eval_batch / cfg.batch)
    out = {
        "gflop_per_run_step": flops(shapes["step"]) / 1e9,
        "job_pflop": (
            cfg.steps * (M * flops(shapes["step"]) + seeds * flops(shapes["data"]))
            + evals * chunks * M * flops(shapes["eval"])
        )
        / 1e15,
    }
    for name, dtype in (("float64", torch.float64), ("float32", torch.float32)):
        per_step = matmul_seconds(shapes["step"], M, dtype, cache) + matmul_seconds(shapes["data"], seeds, dtype, cache)
        per_eval = chunks * matmul_seconds(shapes["eval"], M, dtype, cache)
        out[f"floor_{name}_s"] = cfg.steps * per_step + evals * per_eval
        out[f"gflops_{name}"] = M * flops(shapes["step"]) / max(matmul_seconds(shapes["step"], M, dtype, cache), 1e-12) / 1e9
    return out


def job_options(parser: argparse.ArgumentParser, default: list[list[str]], steps: int) -> None:
    """--job TASK MODEL HEADS (repeatable; `default` without one) and --steps N, as the per-job benchmarks take them."""
    names = ", ".join(" ".join(j) for j in default)
    parser.add_argument("--job", nargs=3, action="append", metavar=("TASK", "MODEL", "HEADS"),
                        help=f"a job of the preset (default: {names})")  # fmt: skip
    parser.add_argument("--steps", type=int, default=steps)


def chosen_jobs(parser: argparse.ArgumentParser, args, default: list[list[str]]) -> list[list[str]]:
    """The --job list (or `default`), each HEADS a head count, and --steps at least 1; else a usage error."""
    if args.steps < 1:
        parser.error(f"--steps must be at least 1, got {args.steps}")
    jobs = args.job or default
    for task, model, heads in jobs:
        if not heads.isdigit():
            parser.error(f"--job TASK MODEL HEADS: HEADS must be a head count, got {heads!r} (in --job {task} {model} {heads})")
    return jobs


@contextlib.contextmanager
def corpus_folder(training: dict, built: Path | None = None):
    """The folder of the text corpus a preset's text jobs read: `built` where a build made it, otherwise built
    here into a temporary folder (seconds); "" when the preset has no text task."""
    from attnid.training import corpus

    if not any(t["task"] == "text" for t in training["tasks"]):
        yield ""
    elif built is not None and (built / corpus.OUTPUTS["manifest"]).is_file():
        yield str(built)
    else:
        with tempfile.TemporaryDirectory(prefix="attnid-corpus-") as folder:
            corpus.write(corpus.build(training["corpus"]), {k: str(Path(folder) / f) for k, f in corpus.OUTPUTS.items()})
            yield folder


def evaluations(steps: int, every: int) -> int:
    """Held-out evaluations of a run: at steps t with t % every == 0 or t = steps - 1, and one after the last."""
    return len({t for t in range(steps) if t % every == 0} | {steps - 1}) + 1


def measured_cpu(cfgs: list, steps: int) -> dict:
    """CPU seconds of the job's first `steps` steps (set-up apart), extrapolated to all its steps; the whole-model
    overlap's calls timed apart and counted as often as the job makes them (`BatchedRuns.gauged`)."""
    from attnid.training.batched import BatchedRuns
    from attnid.training.determinism import deterministic
    from attnid.training.heap import keep_buffers_on_heap

    cfg = cfgs[0]
    keep_buffers_on_heap()  # as train_batched does
    with deterministic(cfg.device):
        start = time.process_time()
        state = BatchedRuns(cfgs)
        setup = time.process_time() - start
        model, measure_model = [], state._measure_model  # the whole-model overlap's calls, timed apart

        def timed(*args):
            begin = time.process_time()
            measure_model(*args)
            model.append(time.process_time() - begin)

        state._measure_model = timed
        start = time.process_time()
        for t in range(steps):
            state.step(t)
        per_step = (time.process_time() - start - sum(model)) / steps
        per_model = sum(model) / len(model) if model else 0.0
        start = time.process_time()
        state.evaluate(state.theta)
        per_eval = time.process_time() - start
    job = setup + per_step * cfg.steps + per_model * len(state.gauged) + per_eval
    return {"setup_s": setup, "ms_per_step": 1e3 * per_step, "model_gauge_s": per_model, "job_cpu_s": job}


def built_job(training_dir: Path, job: dict) -> dict:
    """Wall and CPU seconds of one training job as a finished build measured it: the wall time from Snakemake's
    benchmark file, the CPU time from the job's log (attnid.training.job.JOB_CPU_LINE), else Snakemake's sampled
    cpu_time, up to 30 s short (`cpu_from` says which)."""
    from attnid.training.job import logged_job_cpu

    name = Path(job["task"]) / job["model"] / f"h{job['heads']}"
    path = training_dir / name.with_suffix(".tsv")
    if not path.is_file():
        raise SystemExit(f"--from-build: no benchmark file {path.relative_to(ROOT)} (build the preset's training first)")
    row = pd.read_csv(path, sep="\t").iloc[-1]
    log = training_dir.parents[1] / "logs" / "training" / name.with_suffix(".log")
    cpu = logged_job_cpu(log.read_text()) if log.is_file() else None
    return {"job_wall_s": float(row["s"]), "job_cpu_s": float(row["cpu_time"]) if cpu is None else cpu,
            "cpu_from": "snakemake" if cpu is None else "log"}  # fmt: skip


# A job's process as Snakemake runs it (the script's preamble and imports, workflow/scripts/train_job.py, then
# attnid.training.job.train_job and its outputs written): it prints its CPU seconds at its first step (its start-up)
# and stops there, or (`whole`) goes on and prints them again after writing its outputs
JOB_CHILD = """
import json, os, resource, sys, tempfile
import snakemake.script  # Snakemake's preamble to a job's script
import torch
from attnid.io import atomic_write_parquet, log_to  # the job script's imports
from attnid.training import batched
from attnid.training.job import train_job


class FirstStep(Exception):
    pass


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


step, startup = batched.BatchedRuns.step, []


def first_step(self, t):
    if not startup:
        startup.append(cpu())
        if not job["whole"]:
            raise FirstStep
    step(self, t)


batched.BatchedRuns.step = first_step
job = json.load(sys.stdin)
torch.set_num_threads(1)
try:
    metrics, summary = train_job(job["training"], "cpu", job["task"], job["model"], job["heads"], progress=False,
                                 corpus=job["corpus"])
    with tempfile.TemporaryDirectory() as out:
        atomic_write_parquet(os.path.join(out, "metrics.parquet"), metrics)
        atomic_write_parquet(os.path.join(out, "summary.parquet"), summary.drop(columns="config"))
except FirstStep:
    pass
print(startup[0], cpu())
"""


def job_process(params: dict, job: dict, corpus: str, whole: bool) -> dict:
    """A job's own code (JOB_CHILD) in a fresh process, one thread, alone (in a build two jobs share the 2
    cores): {startup_cpu_s: its CPU seconds before its first step (the interpreter, the job's imports: torch, and
    the `transformers` class of a real architecture; its set-up: the runs' configs, models, data, the whole-model
    gauge), and with `whole` the job run to its end and its outputs written: job_cpu_s, job_wall_s}."""
    import json

    payload = json.dumps({"training": params, **job, "corpus": corpus, "whole": whole})
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", JOB_CHILD], input=payload, capture_output=True, text=True, cwd=ROOT,
                         check=False)  # fmt: skip
    wall = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"job {job} failed in its own process:\n{out.stderr[-3000:]}")
    startup, total = (float(v) for v in out.stdout.split()[-2:])
    return {"startup_cpu_s": startup} | ({"job_cpu_s": total, "job_wall_s": wall, "cpu_from": "rerun"} if whole else {})


def startup_cpu(params: dict, job: dict, corpus: str, rounds: int = 2) -> float:
    """CPU seconds of a job's process before its first step (job_process, stopped there): a fixed cost of a job,
    whatever its steps; the rest of the job's CPU seconds is the trainer's. The lowest of `rounds` processes (one
    read 7.6 CPU-s where the others read 3.6-4.4), so the trainer is charged at least what its steps cost."""
    return min(job_process(params, job, corpus, whole=False)["startup_cpu_s"] for _ in range(rounds))


def paper(args) -> None:
    """Every job of the preset (or those selected) for its first steps, against its matmul floor."""
    import torch

    from attnid.device import resolve_device

    resolve_device(args.device)  # DeviceError with the reason when CUDA is asked for and absent
    torch.set_num_threads(1)
    config = preset_config(args.configfile)
    training = config["training"]
    results_dir = ROOT / config["results_dir"]
    training_dir = results_dir / "benchmarks" / "training"
    with corpus_folder(training, results_dir / "corpus") as folder:
        rows = job_rows(args, training, training_dir, folder)
    report(args, training, training_dir, pd.DataFrame(rows))


def job_rows(args, training: dict, training_dir: Path, corpus: str) -> list[dict]:
    """One row a selected job: its floor, and its time (its first steps timed here, the job rerun whole here, or
    read from the build)."""
    from attnid.training.runs import job_params, jobs, run_config, runs

    dtype = training["dtype"]
    selected = []
    for job in jobs(training):
        if (args.task and job["task"] != args.task) or (args.model and job["model"] != args.model):
            continue
        if args.heads and job["heads"] not in args.heads:
            continue
        params = job_params(training, job["task"], job["model"], job["heads"])
        cfgs = [run_config(params, args.device, **k, corpus=corpus) for k in runs(params)]
        selected.append((job, cfgs, step_matmuls(cfgs[0])))
    floors = [None] * len(selected) if args.rerun else lowest_floors(selected, args.floor_rounds)
    rows = []
    for i, (job, cfgs, _) in enumerate(selected):
        row = {**job, "runs": len(cfgs), "steps": cfgs[0].steps}
        if args.rerun:  # the job whole in its own process, its floor's passes just before and after it
            before = lowest_floors([selected[i]], 1)
            row.update(job_process(job_params(training, **job), job, corpus, whole=True))
            floors[i] = lowest_floors([selected[i]], max(1, args.floor_rounds - 1), before)[0]
        elif args.from_build:
            row.update(built_job(training_dir, job))
            row["startup_cpu_s"] = startup_cpu(job_params(training, **job), job, corpus)
        row.update(floors[i])
        if args.rerun or args.from_build:
            row["wall_ratio"] = row["job_wall_s"] / row[f"floor_{dtype}_s"]
            row["trainer_ratio"] = (row["job_cpu_s"] - row["startup_cpu_s"]) / row[f"floor_{dtype}_s"]
            print(f"{job['task']}/{job['model']} H={job['heads']}: {row['job_cpu_s']:.1f} CPU-s "
                  f"(start-up {row['startup_cpu_s']:.1f}), floor {row[f'floor_{dtype}_s']:.2f} s", file=sys.stderr,
                  flush=True)  # fmt: skip
        elif not args.floor_only:
            c = cfgs[0]
            every = math.lcm(c.metrics_every, c.eval_every, c.rebalance_interval, c.gauge_overlap_every)
            n = min(cfgs[0].steps, every * math.ceil(args.steps / every))
            row.update(measured_cpu(cfgs, n))
        if "job_cpu_s" in row:
            row["ratio"] = row["job_cpu_s"] / row[f"floor_{dtype}_s"]
        if "ms_per_step" in row:
            print(f"{job['task']}/{job['model']} H={job['heads']}: {len(cfgs)} runs, {row['ms_per_step']:.0f} ms/step, "
                  f"~{row['job_cpu_s']:.0f} CPU-s, floor {row[f'floor_{dtype}_s']:.1f} s, ratio {row['ratio']:.1f}",
                  file=sys.stderr, flush=True)  # fmt: skip
        rows.append(row)
    return rows


def lowest_floors(selected: list, rounds: int, best: list | None = None) -> list[dict]:
    """Each selected (job, cfgs, shapes)'s floor, the lowest of `rounds` passes over all of them (a fresh timing
    of every shape each pass, so the passes are tens of seconds apart) and of `best` (earlier passes' floors):
    the products' time here moves by up to a quarter from one minute to the next (text Llama H = 16: 220-279 s in
    four runs of --floor-only on 2026-12-07), and a floor is the fastest they run."""
    best = list(best) if best is not None else [None] * len(selected)
    for _ in range(rounds):
        cache = {}
        for i, (_, cfgs, shapes) in enumerate(selected):
            new = floor(cfgs, cache, shapes)
            if best[i] is None:
                best[i] = new
                continue
            for key, value in new.items():
                if key.startswith("floor_"):
                    best[i][key] = min(best[i][key], value)
                elif key.startswith("gflops_"):
                    best[i][key] = max(best[i][key], value)
    return best


REFERENCE_BMM = (60, 128, 128, 256)  # runs, n, k, m: the shape whose rate the README quotes for each machine


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or the platform's processor string where there is none."""
    import platform

    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def machine_line(dtype: str = "float64") -> str:
    """What the floor depends on: the CPU, torch's BLAS and its one-thread `bmm` rate at a reference shape, timed
    as the floor times its products (`matmul_seconds`).

    The floor is this machine's rate at the jobs' shapes, and the products' rate moves between CPUs more than the
    elementwise work's, so a ratio is a fact about a machine (README, Training, gives the same trainer's tables on
    two CPUs). A table quotes this line with its numbers."""
    import torch

    runs, n, k, m = REFERENCE_BMM
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        seconds = matmul_seconds([(1, n, k, m)], runs, getattr(torch, dtype), {})
    finally:
        torch.set_num_threads(threads)
    blas = "MKL" if torch.backends.mkl.is_available() else "no MKL"
    return (f"# MACHINE: {cpu_model()}, {os.cpu_count()} CPUs, torch {torch.__version__} ({blas}); one-thread {dtype} "
            f"bmm {REFERENCE_BMM} {2 * runs * n * k * m / seconds / 1e9:.1f} GFLOP/s")  # fmt: skip


def report(args, training: dict, training_dir: Path, df: pd.DataFrame) -> None:
    """The per-job table and the selected jobs' totals against the floor."""
    dtype = training["dtype"]
    print(f"# {args.configfile}: {len(df)} jobs, one thread, device {args.device}, dtype {dtype}, load average "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    print(machine_line(dtype))
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    n_runs = int(df["runs"].sum()) if len(df) else 0  # the selected jobs' runs
    pflop = df["job_pflop"].sum()
    for name in ("float64", "float32"):
        hours = df[f"floor_{name}_s"].sum() / 3600
        print(f"# FLOOR ({name}): {n_runs} runs, {pflop:.3g} PFLOP of matrix products (forward, backward, targets, "
              f"held-out); at this machine's {name} bmm rate at those shapes {hours:.3f} CPU-hours, "
              f"{60 * hours / args.cores:.1f} min on {args.cores} cores")  # fmt: skip
    if (args.from_build or args.rerun) and len(df):
        floor_s = df[f"floor_{dtype}_s"].sum()
        source = ("RERUN HERE (each job alone in its own process, one thread, between its floor's passes)" if args.rerun
                  else f"FROM THE BUILD ({training_dir.relative_to(ROOT)})")  # fmt: skip
        print(f"# {source}: {len(df)} jobs, {df['job_wall_s'].sum():.0f} s of job "
              f"wall time and {df['job_cpu_s'].sum():.0f} CPU-s; RATIO to the {dtype} floor: CPU {df['job_cpu_s'].sum() / floor_s:.2f}, "
              f"wall {df['job_wall_s'].sum() / floor_s:.2f} (worst job: CPU {df['ratio'].max():.2f}); above 4x: "
              f"{int((df['ratio'] > 4).sum())} of {len(df)} jobs in CPU, {int((df['wall_ratio'] > 4).sum())} in wall time")  # fmt: skip
        trainer = df["job_cpu_s"] - df["startup_cpu_s"]
        print(f"# THE TRAINER (each job's CPU-s less its start-up, {df['startup_cpu_s'].min():.1f}-"
              f"{df['startup_cpu_s'].max():.1f} CPU-s a job, its process up to its first step: interpreter, imports, set-up): "
              f"{trainer.sum():.0f} CPU-s, RATIO {trainer.sum() / floor_s:.2f} (worst job {df['trainer_ratio'].max():.2f}); "
              f"above 4x: {int((df['trainer_ratio'] > 4).sum())} of {len(df)} jobs")  # fmt: skip
        sampled = int((df["cpu_from"] == "snakemake").sum())
        if sampled:
            print(f"# {sampled} of {len(df)} jobs' CPU-s are Snakemake's samples (their logs predate the job's own count): "
                  f"each up to 30 s short, a job under 45 s counted to about 15 s; their wall-s are exact")  # fmt: skip
    elif not args.floor_only and len(df):
        total = df["job_cpu_s"].sum()
        print(f"# EXTRAPOLATED from the first {args.steps}+ steps of each job: {n_runs} runs in {len(df)} jobs: "
              f"{total / 3600:.3f} CPU-hours ({total:.0f} CPU-s), about {total / args.cores / 60:.1f} min with "
              f"{args.cores} jobs in parallel; RATIO to the {dtype} floor {total / df[f'floor_{dtype}_s'].sum():.2f} "
              f"(worst job {df['ratio'].max():.2f})")  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("sweep", help="--cores 1 vs --cores 2 on a preset's sweep")
    s.add_argument("--configfile", default="config/config.yaml")
    s.add_argument("--cores", type=int, nargs="+", default=[1, 2])
    s.add_argument("--target", nargs="+", default=["training_aggregate"])
    p = sub.add_parser("paper", help="every training job of a preset against its matmul floor (extrapolated)")
    p.add_argument("--configfile", default="config/paper.yaml")
    p.add_argument("--steps", type=int, default=60, help="steps timed per job (rounded up to the measurement cadence)")
    p.add_argument("--task", default=None, help="measure only this task")
    p.add_argument("--model", default=None, help="measure only this model")
    p.add_argument("--heads", type=int, nargs="*", default=None, help="measure only these head counts")
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--floor-rounds", type=int, default=3, help="passes over the jobs' products; a floor is the lowest")
    times = p.add_mutually_exclusive_group()
    times.add_argument("--floor-only", action="store_true", help="only the arithmetic floor (no training timed)")
    times.add_argument("--from-build", action="store_true", help="the jobs' times read from a finished build, not timed")
    times.add_argument("--rerun", action="store_true",
                       help="each job run whole in its own process here, between its floor's passes")  # fmt: skip
    args = parser.parse_args(argv)
    if args.mode == "paper" and args.floor_rounds < 1:
        p.error(f"--floor-rounds must be at least 1, got {args.floor_rounds}")
    sweep(args) if args.mode == "sweep" else paper(args)


if __name__ == "__main__":
    main()
