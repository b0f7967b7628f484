"""Aggregate the training sweep: per-job tables -> summary/metrics Parquet, checks, table, study tables, macros.

Which runs converged (attnid.training.sweep.converged: recall solved, or a held-out loss that stopped
changing over the last fifth) is a column of the summary and a table per (task, model, optimizer, H)
(results/training/convergence.csv); times to target and final losses are reported on converged runs
only. The sanity checks (attnid.training.sweep.sanity_checks, the rounding threshold as a multiple of
the runs' dtype's eps) are computed from the runs' own numbers and written to
results/training/checks.csv and to the log; with `training.checks.fail_on_check` a failed check stops
the workflow. A diverged run is kept in the summary (`diverged`), left out
of the checks and the estimates, and marked in the figures; with `training.strict` it stops the
workflow instead, naming the run.
"""

import sys

import pandas as pd
import torch

from attnid.io import atomic_write_csv, atomic_write_parquet, atomic_write_text, log_to, read_result
from attnid.report.latex import booktabs
from attnid.report.macros import fragment, training_macros
from attnid.report.study import study_macros
from attnid.report.tables import training_table
from attnid.training import analysis
from attnid.training.runs import RUN_KEYS
from attnid.training.sweep import (
    SUMMARY_COLUMNS,
    converged,
    convergence_table,
    diverged_runs,
    overlap_table,
    sanity_checks,
)

log = log_to(snakemake.log[0], "training_aggregate")
inp, out, params = snakemake.input, snakemake.output, snakemake.params

summary = pd.concat([read_result(path) for path in inp.summaries], ignore_index=True)
metrics = pd.concat([read_result(path) for path in inp.metrics], ignore_index=True)
lr_summary = pd.read_parquet(inp.lr_summary)
summary["converged"] = converged(summary, params.converged["plateau"], params.converged["accuracy"])
summary = summary.merge(
    analysis.steps_to_target(metrics, params.target_fraction, summary[[*RUN_KEYS, "converged"]]), on=list(RUN_KEYS)
)
extra = [c for c in summary.columns if "overlap_model" in c]  # real architectures: the whole-model gauge
summary = summary[[*SUMMARY_COLUMNS, "converged", "steps_to_target", *extra]]
eps = torch.finfo(getattr(torch, params.dtype)).eps
rounding = params.checks["rounding"] * eps  # k eps of the runs' dtype
checks = sanity_checks(
    summary, rounding=rounding, nonzero=params.checks["nonzero"], min_converged=params.converged["min_fraction"]
)
convergence = convergence_table(analysis.ok(summary).assign(converged=summary["converged"]))
table = overlap_table(analysis.ok(summary))
decay = analysis.weight_decay_decay(metrics, summary)
effects = analysis.effect_table(analysis.paired_differences(summary))
values = training_macros(analysis.ok(summary)) | study_macros(summary, checks, lr_summary, decay, effects)

atomic_write_parquet(out.summary, summary)
atomic_write_parquet(out.metrics, metrics)
atomic_write_csv(out.checks, checks)
atomic_write_csv(out.convergence, convergence)
shown, formats = training_table(table)
atomic_write_text(out.tex, booktabs(shown, formats=formats))
atomic_write_csv(out.csv, table)
atomic_write_parquet(out.decay, decay)
atomic_write_parquet(out.effects, analysis.paired_differences(summary))
atomic_write_csv(out.effect_table, effects)
atomic_write_text(out.macros, fragment(values, "workflow/scripts/training_aggregate.py"))

log.info("%d runs, %d metric rows", len(summary), len(metrics))
with pd.option_context("display.width", 200, "display.max_columns", 20):
    log.info("overlap by task, optimizer, H and rebalancing mode:\n%s", table.to_string(index=False))
    log.info("sanity checks:\n%s", checks.to_string(index=False))
    log.info("converged runs:\n%s", convergence.to_string(index=False))
    log.info("paired effects of rebalancing:\n%s", effects.to_string(index=False))
diverged = diverged_runs(summary)
if len(diverged):
    log.warning(
        "%d run(s) diverged (kept in the summary, left out of checks and estimates):\n%s",
        len(diverged),
        diverged.to_string(index=False),
    )
    if params.strict:
        sys.exit(
            f"training.strict: {len(diverged)} run(s) diverged, e.g. {dict(diverged.iloc[0])}; see {snakemake.log[0]}"
        )
failed = checks[~checks["passed"]]
if len(failed) and params.checks["fail_on_check"]:
    sys.exit(f"training sanity checks failed (see {out.checks}): {', '.join(failed['check'])}")
