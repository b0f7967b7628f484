"""What the trainer's heap setting (attnid.training.heap) saves: training steps of preset jobs with glibc's
default malloc and with freed buffers kept in the heap, each in its own process (the setting is process-wide).

    python benchmarks/heap.py [--configfile config/paper.yaml] [--job text llama 1] [--job text llama 16]
                              [--steps 10]

Each job (task, model, head count: all its runs batched, as its Snakemake job trains them) runs two warm-up
steps, then --steps steps, on one thread. Printed per job and setting: CPU ms a step, of it system ms, minor
page faults a step and peak resident memory; then the ratio default / heap of the CPU time. The two settings
of a job run one after the other on the same machine, so a loaded machine inflates both.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from sweep import chosen_jobs, job_options

ROOT = Path(__file__).resolve().parent
DEFAULT_JOBS = [["text", "llama", "1"], ["text", "llama", "16"], ["text", "gpt2", "4"]]


def child(args) -> None:
    """One job's steps in this process: prints one JSON line."""
    import resource
    import time

    import torch
    from sweep import corpus_folder, preset_config

    from attnid.training.batched import BatchedRuns
    from attnid.training.determinism import deterministic
    from attnid.training.heap import keep_buffers_on_heap
    from attnid.training.runs import run_config, runs

    torch.set_num_threads(1)
    if args.heap:
        assert keep_buffers_on_heap(), "glibc's mallopt refused (or this is not glibc)"
    task, model, heads = args.job[0]
    training = preset_config(args.configfile)["training"]
    with corpus_folder(training) as corpus:
        cfgs = [run_config(training, "cpu", **k, corpus=corpus) for k in runs(training, task, model, int(heads))]
        with deterministic("cpu"):
            state = BatchedRuns(cfgs, gauge=False)
            for t in range(2):
                state.step(t)
            before, start = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
            for t in range(2, 2 + args.steps):
                state.step(t)
            cpu, after = time.process_time() - start, resource.getrusage(resource.RUSAGE_SELF)
    n = args.steps
    print(json.dumps({"runs": len(cfgs), "cpu_ms": 1000 * cpu / n, "sys_ms": 1000 * (after.ru_stime - before.ru_stime) / n,
                      "faults": (after.ru_minflt - before.ru_minflt) / n, "peak_mib": after.ru_maxrss / 1024}))  # fmt: skip


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configfile", default="config/paper.yaml")
    job_options(p, DEFAULT_JOBS, steps=10)
    p.add_argument("--heap", type=int, choices=(0, 1), help=argparse.SUPPRESS)  # the child's setting
    args = p.parse_args(argv)
    jobs = chosen_jobs(p, args, DEFAULT_JOBS)
    if args.heap is not None:
        return child(args)
    for job in jobs:
        row = {}
        for heap in (0, 1):
            cmd = [sys.executable, __file__, "--configfile", args.configfile, "--job", *job, "--steps", str(args.steps), "--heap", str(heap)]
            out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT.parent)
            if out.returncode:
                sys.exit(f"{' '.join(job)} (heap {heap}) failed:\n{out.stderr[-2000:]}")
            row[heap] = json.loads(out.stdout.strip().splitlines()[-1])
            r = row[heap]
            print(f"{' '.join(job):>16} x{r['runs']} {'heap kept' if heap else 'default  '}: {r['cpu_ms']:8.0f} CPU ms a step, "
                  f"{r['sys_ms']:6.0f} system, {r['faults']:9.0f} faults, peak {r['peak_mib']:6.0f} MiB", flush=True)  # fmt: skip
        print(f"{' '.join(job):>16}: RATIO default / heap kept {row[0]['cpu_ms'] / row[1]['cpu_ms']:.2f}")


if __name__ == "__main__":
    main()
