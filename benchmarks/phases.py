"""Where a training job's time goes above its matrix-product floor: the CPU time of each part of its steps.

    python benchmarks/phases.py [--configfile config/paper.yaml] [--job text llama 16] [--job markov gpt2 2]
                                [--steps 20]

Each job (task, model, head count: all its runs, batched as its Snakemake job batches them) trains its first
--steps steps (rounded up to a multiple of its cadences, so evaluations, measured steps, rebalances and
gauge-invariant overlaps come at the job's rate) in this process, one thread, freed buffers kept in the heap, as
`attnid.training.batched.train_batched` runs it. Every part of a step is timed with `time.process_time`, each
part's own time (a part called inside another is taken out of the outer one):

    gradient             the loss's forward and backward pass of every run (BatchedRuns._gradients)
    optimizer            every run's update from its gradient (attnid.training.optim.Optimizer.update)
    projector set-up     the per-layer projector onto the unidentified subspace (attnid.training.overlap.stacked_projector)
    layer overlaps       P_T u and the overlaps of every layer (BatchedRuns._attention_update, set-up apart)
    gauge overlap        the gauge-invariant overlap (attnid.training.overlap.gauge_overlap)
    whole-model overlap  the whole model's orbit (BatchedRuns._measure_model): per call, counted as often as the
                         whole job makes it, over its steps
    rebalance, conserved, evaluation, window    the balance runs' rebalance, the conserved quantities, the held-out
                         evaluation, the measurements' bookkeeping
    rest                 everything else of a step (the update's application, Python)

Printed per job: a step's CPU ms against the job's floor per step (benchmarks/sweep.py's floor, one pass: the
job's matrix products replayed as batched `bmm` on warm inputs, evaluations and the teacher's targets included),
then each part's CPU ms a step and share. Last, the gradient's matrix products as they run inside the step (a
dispatch mode timing every mm/bmm/addmm/baddbmm call over --steps more gradients, outside the parts' timing)
against the same products replayed warm: their ratio is what cold caches and strided operands cost the products
in place, and the gradient's time above them is its elementwise work (and dispatch).
"""

from __future__ import annotations

import argparse
import functools
import math
import time
from collections import Counter

import torch
from sweep import (
    MATMULS, chosen_jobs, corpus_folder, floor, job_options, machine_line, matmul_seconds, preset_config, step_matmuls,
)

from attnid.training import batched, optim
from attnid.training.batched import BatchedRuns
from attnid.training.determinism import deterministic
from attnid.training.heap import keep_buffers_on_heap
from attnid.training.metrics import Measurements
from attnid.training.runs import job_params, run_config, runs

DEFAULT_JOBS = [["text", "llama", "2"], ["markov", "gpt2", "2"], ["teacher_student", "own", "1"]]
PARTS = [  # (owner, attribute, label): each wrapped for the timing
    (BatchedRuns, "step", "rest"),
    (BatchedRuns, "_gradients", "gradient"),
    (optim.Optimizer, "update", "optimizer"),
    (batched, "stacked_projector", "projector set-up"),
    (BatchedRuns, "_attention_update", "layer overlaps"),
    (batched, "gauge_overlap", "gauge overlap"),
    (BatchedRuns, "_measure_model", "whole-model overlap"),
    (BatchedRuns, "_rebalance", "rebalance"),
    (BatchedRuns, "_measure_conserved", "conserved"),
    (BatchedRuns, "evaluate", "evaluation"),
    (Measurements, "close_window", "window"),
]


class PartTimer:
    """Own CPU seconds and calls of each wrapped part (a part's time without the parts it calls)."""

    def __init__(self):
        self.own, self.calls, self._stack = Counter(), Counter(), []
        self._saved = []

    def wrap(self, owner, attribute: str, label: str) -> None:
        original = getattr(owner, attribute)
        self._saved.append((owner, attribute, original))

        @functools.wraps(original)
        def timed(*args, **kwargs):
            self._stack.append(0.0)  # the time of the parts it calls
            start = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                total = time.process_time() - start
                inner = self._stack.pop()
                self.own[label] += total - inner
                self.calls[label] += 1
                if self._stack:
                    self._stack[-1] += total

        setattr(owner, attribute, timed)

    def restore(self) -> None:
        for owner, attribute, original in reversed(self._saved):
            setattr(owner, attribute, original)
        self._saved = []


def matmul_recorder_timed():
    """A TorchDispatchMode that adds up the seconds spent inside the matrix-product kernels."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Timed(TorchDispatchMode):
        seconds = 0.0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ not in MATMULS:
                return func(*args, **(kwargs or {}))
            start = time.perf_counter()
            out = func(*args, **(kwargs or {}))
            self.seconds += time.perf_counter() - start
            return out

    return Timed()


def job_phases(training: dict, corpus: str, job: list[str], steps: int) -> dict:
    """{label: own CPU ms a step}, the steps timed, the in-place matmul ms and the floor ms of one gradient step."""
    task, model, heads = job[0], job[1], int(job[2])
    params = job_params(training, task, model, heads)
    cfgs = [run_config(params, "cpu", **k, corpus=corpus) for k in runs(params)]
    c = cfgs[0]
    every = math.lcm(c.metrics_every, c.eval_every, c.rebalance_interval, c.gauge_overlap_every)
    n = min(c.steps, every * math.ceil(steps / every))
    timer = PartTimer()
    with deterministic("cpu"):
        state = BatchedRuns(cfgs)
        for owner, attribute, label in PARTS:
            timer.wrap(owner, attribute, label)
        try:
            for t in range(n):
                state.step(t)
        finally:
            timer.restore()
        mode = matmul_recorder_timed()
        with mode:
            for t in range(n, n + steps):
                state._gradients(t)
    per_step = {label: 1e3 * s / n for label, s in timer.own.items() if label != "whole-model overlap"}
    model_calls = timer.calls["whole-model overlap"]
    if model_calls:  # per call, as often as the whole job takes it
        per_call = timer.own["whole-model overlap"] / model_calls
        per_step["whole-model overlap"] = 1e3 * per_call * len(state.gauged) / c.steps
    shapes, cache, dtype = step_matmuls(c), {}, getattr(torch, c.dtype)
    return {
        "parts": per_step,
        "steps": n,
        "runs": len(cfgs),
        "matmul_in_place_ms": 1e3 * mode.seconds / steps,
        "gradient_floor_ms": 1e3 * matmul_seconds(shapes["step"], len(cfgs), dtype, cache),
        "floor_ms": 1e3 * floor(cfgs, cache, shapes)[f"floor_{c.dtype}_s"] / c.steps,
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configfile", default="config/paper.yaml")
    job_options(p, DEFAULT_JOBS, steps=20)
    args = p.parse_args(argv)
    jobs = chosen_jobs(p, args, DEFAULT_JOBS)
    torch.set_num_threads(1)
    keep_buffers_on_heap()
    training = preset_config(args.configfile)["training"]
    print(machine_line(training["dtype"]))
    with corpus_folder(training) as corpus:
        for job in jobs:
            r = job_phases(training, corpus, job, args.steps)
            step = sum(r["parts"].values())
            print(f"# {' '.join(job)}: {r['runs']} runs, {r['steps']} steps timed; a step {step:.1f} CPU ms, its floor "
                  f"{r['floor_ms']:.1f} ms (RATIO {step / r['floor_ms']:.1f}x)")  # fmt: skip
            for label, ms in sorted(r["parts"].items(), key=lambda kv: -kv[1]):
                print(f"{label:>22} {ms:9.1f} ms {100 * ms / step:5.1f}%")
            grad = r["parts"].get("gradient", 0.0)
            print(f"{'its matrix products':>22} {r['matmul_in_place_ms']:9.1f} ms in place, {r['gradient_floor_ms']:.1f} ms "
                  f"replayed warm (the floor's); the gradient's rest (elementwise, dispatch) "
                  f"{grad - r['matmul_in_place_ms']:.1f} ms", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
