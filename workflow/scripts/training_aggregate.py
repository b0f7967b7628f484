"""Aggregate the training sweep: per-run files -> metrics/summary Parquet, checks, table, macros.

The sanity checks (attnid.sweep.sanity_checks) are computed from the runs' own numbers and
written to results/training/checks.csv and to the log; with `training.checks.fail_on_check` a
failed check stops the workflow (Snakemake then removes this job's outputs; the log keeps the
measured numbers).
"""

import json
import sys

import pandas as pd

from attnid.io import atomic_write_csv, atomic_write_parquet, atomic_write_text, log_to
from attnid.report.macros import fragment, training_macros
from attnid.sweep import SUMMARY_COLUMNS, overlap_table, sanity_checks, table_tex

log = log_to(snakemake.log[0], "training_aggregate")  # noqa: F821
inp, out, params = snakemake.input, snakemake.output, snakemake.params  # noqa: F821

summary = pd.DataFrame([json.loads(open(path).read()) for path in inp.summaries])[list(SUMMARY_COLUMNS)]
metrics = pd.concat([pd.read_parquet(path) for path in inp.metrics], ignore_index=True)
checks = sanity_checks(summary, rounding=params.checks["rounding"], nonzero=params.checks["nonzero"])
table = overlap_table(summary)

atomic_write_parquet(out.summary, summary)
atomic_write_parquet(out.metrics, metrics)
atomic_write_csv(out.checks, checks)
atomic_write_text(out.tex, table_tex(table))
atomic_write_csv(out.csv, table)
atomic_write_text(out.macros, fragment(training_macros(summary), "workflow/scripts/training_aggregate.py"))

log.info("%d runs, %d metric rows", len(summary), len(metrics))
with pd.option_context("display.width", 200, "display.max_columns", 20):
    log.info("overlap by task, optimizer, H and rebalancing mode:\n%s", table.to_string(index=False))
    log.info("sanity checks:\n%s", checks.to_string(index=False))
failed = checks[~checks["passed"]]
if len(failed) and params.checks["fail_on_check"]:
    sys.exit(f"training sanity checks failed (see {out.checks}): {', '.join(failed['check'])}")
