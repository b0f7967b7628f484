"""What the optimizer's column chunks (attnid.training.optim._column_chunks) save: one job's optimizer update of
all its runs, stepping whole rows and chunk by chunk, in the same process, on the same gradients.

    python benchmarks/optimizer.py [--configfile config/paper.yaml] [--job text llama 16] [--job recall_fixed_head own 16]
                                   [--steps 5]

Each job (task, model, head count: all its runs, their algorithms, hyperparameters and adam_shared's symmetry
blocks, as its Snakemake job builds them) takes --steps updates of its (M, P) parameters on random gradients, one
thread, freed buffers kept in the heap (as the trainer does), the two settings alternating step by step. Printed
per job: CPU ms an update each way and the ratio whole / chunked; every update is checked to be bitwise the same
both ways.
"""

from __future__ import annotations

import argparse
import time

import torch
from sweep import chosen_jobs, corpus_folder, job_options, preset_config

from attnid.training import optim
from attnid.training.batched import BatchedRuns
from attnid.training.determinism import deterministic
from attnid.training.heap import keep_buffers_on_heap
from attnid.training.runs import run_config, runs

WHOLE_ROWS = 1 << 62  # CHUNK_BYTES that makes every range one chunk: the whole-row passes
DEFAULT_JOBS = [["text", "llama", "16"], ["recall_fixed_head", "own", "16"], ["text", "gpt2", "4"]]


def job_optimizers(training: dict, corpus, task: str, model: str, heads: int) -> tuple[BatchedRuns, list]:
    """The job's batched state and two fresh copies of its optimizer."""
    cfgs = [run_config(training, "cpu", **k, corpus=corpus) for k in runs(training, task, model, heads)]
    state = BatchedRuns(cfgs, gauge=False)
    shared = state.optimizer.shared
    algorithms = [c.algorithm for c in cfgs]
    return state, [optim.Optimizer(algorithms, state.hyper, shared) for _ in range(2)]


def time_job(training: dict, corpus, job: list[str], steps: int) -> dict:
    task, model, heads = job
    with deterministic("cpu"):
        state, (whole, chunked) = job_optimizers(training, corpus, task, model, int(heads))
        p = state.theta.clone()
        gen = torch.Generator().manual_seed(0)
        seconds = {"whole": 0.0, "chunked": 0.0}
        default = optim.CHUNK_BYTES
        for step in range(steps + 1):  # the first update allocates the state: not timed
            g = torch.randn(p.shape, dtype=p.dtype, generator=gen)
            out = {}
            for name, opt, chunk in (("whole", whole, WHOLE_ROWS), ("chunked", chunked, default)):
                optim.CHUNK_BYTES = chunk
                start = time.process_time()
                out[name] = opt.update(p, g)
                if step:
                    seconds[name] += time.process_time() - start
            optim.CHUNK_BYTES = default
            if not torch.equal(out["whole"], out["chunked"]):
                raise AssertionError(f"{' '.join(job)}: the chunked update differs from the whole-row one at step {step}")
            p = p + out["chunked"]
    return {"shape": tuple(p.shape), **{k: 1000 * v / steps for k, v in seconds.items()}}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configfile", default="config/paper.yaml")
    job_options(p, DEFAULT_JOBS, steps=5)
    args = p.parse_args(argv)
    jobs = chosen_jobs(p, args, DEFAULT_JOBS)
    torch.set_num_threads(1)
    keep_buffers_on_heap()
    training = preset_config(args.configfile)["training"]
    with corpus_folder(training) as corpus:
        for job in jobs:
            r = time_job(training, corpus, job, args.steps)
            M, P = r["shape"]
            print(f"{' '.join(job):>24} ({M} runs x {P:,} parameters): whole rows {r['whole']:7.1f} CPU ms an update, "
                  f"chunked {r['chunked']:7.1f}; RATIO whole / chunked {r['whole'] / r['chunked']:.2f} (bitwise equal)",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
