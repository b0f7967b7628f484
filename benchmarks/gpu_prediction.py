"""Every training job of a preset as FLOPs, and its time predicted on a GPU from them (nothing trains here).

    python benchmarks/gpu_prediction.py [--configfile config/gpu.yaml] [--tflops 67] [--efficiency 0.3 0.6]
    python benchmarks/gpu_prediction.py --measure --steps 20     # on a machine with CUDA: time the first steps too

Per job, the matrix products of one run's training step (forward and backward of the loss, the teacher's targets,
one held-out forward pass) are recorded with their shapes (benchmarks/sweep.py's recorder, on this machine's CPU:
about a minute at GPT-2-small's shape), counted as 2 b n k m FLOPs and multiplied out to the job's runs, steps and
evaluations. The prediction divides them by the device's dense float64 rate (`--tflops`; default 67 TFLOP/s, the
H200's FP64 Tensor Core peak in NVIDIA's H200 datasheet) at the `--efficiency` range (the fraction of the peak
the job's batched products reach: vmapped bmm over runs at these shapes, plus the elementwise work the FLOP count
leaves out). `--measure` (CUDA only) times the job's first `--steps` steps on the device and prints the measured
time per step next to the predicted one. A text job's corpus is built into a temporary folder first (seconds).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import corpus_folder, evaluations, flops, preset_config, step_matmuls

H200_FP64_TFLOPS = 67.0  # NVIDIA H200 datasheet: FP64 Tensor Core, dense


def job_flops(cfgs: list) -> dict:
    """FLOPs of one job: per run and step, and the whole job (every run, step and held-out pass)."""
    cfg, M = cfgs[0], len(cfgs)
    shapes = step_matmuls(cfg)
    seeds = len({c.seed for c in cfgs})
    chunks = math.ceil(cfg.eval_batch / cfg.batch)
    step = flops(shapes["step"])
    held_out = evaluations(cfg.steps, cfg.eval_every) * chunks * M * flops(shapes["eval"])
    total = cfg.steps * (M * step + seeds * flops(shapes["data"])) + held_out
    return {"tflop_per_run_step": step / 1e12, "job_pflop": total / 1e15}


def measured_step_s(cfgs: list, steps: int) -> float:
    """Seconds per step of the job's first `steps` steps on CUDA (set-up apart; synchronised)."""
    import torch

    from attnid.training.batched import BatchedRuns
    from attnid.training.determinism import deterministic

    with deterministic(cfgs[0].device):
        state = BatchedRuns(cfgs)
        state.step(0)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for t in range(1, steps + 1):
            state.step(t)
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", default="config/gpu.yaml")
    parser.add_argument("--tflops", type=float, default=H200_FP64_TFLOPS, help="the device's float64 rate")
    parser.add_argument("--efficiency", type=float, nargs=2, default=(0.3, 0.6), help="fraction of --tflops reached")
    parser.add_argument("--measure", action="store_true", help="time the first --steps steps on CUDA")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)

    import torch

    from attnid.training.runs import job_params, jobs, run_config, runs

    torch.set_num_threads(2)
    training = preset_config(args.configfile)["training"]
    device = "cuda" if args.measure else "cpu"
    low, high = args.efficiency
    with corpus_folder(training) as folder:
        total = 0.0
        for job in jobs(training):
            params = job_params(training, job["task"], job["model"], job["heads"])
            cfgs = [run_config(params, "cpu", **k, corpus=folder) for k in runs(params)]
            row = job_flops(cfgs)
            total += row["job_pflop"]
            seconds = row["job_pflop"] * 1e3 / args.tflops  # at the peak
            line = (f"{job['task']}/{job['model']} H={job['heads']}: {len(cfgs)} runs x {cfgs[0].steps} steps, "
                    f"{row['tflop_per_run_step']:.3g} TFLOP a run-step, {row['job_pflop']:.3g} PFLOP; predicted "
                    f"{seconds / high:.0f}-{seconds / low:.0f} s at {low:.0%}-{high:.0%} of {args.tflops:g} TFLOP/s")  # fmt: skip
            if args.measure:
                on_device = [c.with_(device=device) for c in cfgs]
                per_step = measured_step_s(on_device, args.steps)
                line += f"; measured {per_step:.3f} s a step ({per_step * cfgs[0].steps:.0f} s for the job's steps)"
            print(line, flush=True)
    print(f"# {args.configfile}: {total:.3g} PFLOP of matrix products in all; predicted {total * 1e3 / args.tflops / high:.0f}"
          f"-{total * 1e3 / args.tflops / low:.0f} s of training on one device at {args.tflops:g} TFLOP/s float64")  # fmt: skip


if __name__ == "__main__":
    main()
