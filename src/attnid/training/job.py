"""One Snakemake job of the sweep: every run of one (task, model, head count), trained batched.

A job's runs (attnid.training.runs.runs: optimizers x rebalancing modes x seeds) share their shapes, so
they train as one batched model (attnid.training.batched), whatever their update rule. The learning-rate
study is one more job of the same kind: one task, one head count, plain SGD at several learning rates,
every (learning rate, seed) a run of one batch.

Outputs are long tables with the run's identity as leading columns: metrics (one row per run, measured
step and attention layer) and summary (one row per run, attnid.training.sweep.SUMMARY_COLUMNS). A run
whose loss stopped being finite is kept, with `diverged = True` and the step.
"""

from __future__ import annotations

import pandas as pd

from .batched import train_batched
from .runs import attention_spec, run_config, runs, task_section
from .sweep import summary_row

# The job log's last line (workflow/scripts/train_job.py), which benchmarks/sweep.py --from-build reads:
# Snakemake's benchmark cpu_time is sampled (every 0.5 s for 15 s, then every 30 s) and misses up to 30 s at a
# job's end, so a job counts its own CPU seconds
JOB_CPU_LINE = "job CPU-s (this process, user + system, start-up included):"


def job_cpu_line() -> str:
    """JOB_CPU_LINE and this process's CPU seconds since it started (user + system, every thread)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return f"{JOB_CPU_LINE} {usage.ru_utime + usage.ru_stime:.2f}"


def logged_job_cpu(text: str) -> float | None:
    """The CPU seconds a job log's JOB_CPU_LINE gives (the last one), None without one."""
    lines = [line for line in text.splitlines() if line.startswith(JOB_CPU_LINE)]
    return float(lines[-1][len(JOB_CPU_LINE) :]) if lines else None


def _tables(keys: list[dict], cfgs: list, results: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    metrics, summaries = [], []
    for key, cfg, (m, s) in zip(keys, cfgs, results):
        metrics.append(m.assign(**key)[[*key, *m.columns]])
        summaries.append(summary_row(key, cfg, s))
    return pd.concat(metrics, ignore_index=True), pd.DataFrame(summaries)


def train_job(
    training: dict, device: str, task: str, model: str, heads, progress: bool = True, corpus: str = ""
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metrics, summary) of every run of the job (task, model, heads); `corpus` the built corpus's folder (a
    text job's input, attnid.training.corpus)."""
    keys = runs(training, task, model, int(heads))
    cfgs = [run_config(training, device, **k, corpus=corpus) for k in keys]
    return _tables(keys, cfgs, train_batched(cfgs, progress=progress))


def train_lr_study(training: dict, device: str, progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metrics, summary) of the learning-rate study `training.lr_study` (plain SGD, no rebalancing)."""
    study = training["lr_study"]
    section = task_section(training, study["task"])
    base = run_config(training, device, study["task"], section["optimizers"][0]["name"], "none", study["heads"], 0)
    base = base.with_(
        attention=attention_spec(section, study["heads"]), algorithm="sgd", weight_decay=0.0, steps=study["steps"],
        noise=0.0, metrics_every=1, eval_every=study["steps"],
    )  # fmt: skip
    keys, cfgs = [], []
    for lr in study["lrs"]:
        for seed in training["seeds"]:
            keys.append({"task": study["task"], "model": "own", "optimizer": "sgd", "rebalance": "none",
                         "heads": study["heads"], "seed": seed, "lr_value": lr})  # fmt: skip
            cfgs.append(base.with_(lr=float(lr), seed=int(seed), name=f"lr_study/lr{lr}/s{seed}"))
    metrics, summary = _tables(keys, cfgs, train_batched(cfgs, progress=progress))
    summary["lr_value"] = [k["lr_value"] for k in keys]
    return metrics, summary
