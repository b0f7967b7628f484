"""results/hf/coverage.csv: the self-checks of the configured model types (results/hf/checks/<type>.csv), gathered.

One row per type and part (every distinct attention layer, the whole model) with its verdict, P, count, measured,
gap and margin (hf_check.py). Fails (non-zero exit, the failing rows in the message and the log) when a row
disagrees, is undecided or the class failed; then no CSV is written.
"""

import pandas as pd

from attnid.hf.coverage import CHECK_COLUMNS, check_failures
from attnid.io import atomic_write_csv, log_to, read_result

log = log_to(snakemake.log[0])
df = pd.concat([read_result(path) for path in snakemake.input.checks], ignore_index=True)
rows = df.astype(object).where(df.notna(), None).to_dict("records")
message = check_failures(rows)
if message:
    print(message)
    raise SystemExit(f"model types whose self-check fails:\n{message}")
atomic_write_csv(snakemake.output[0], df[list(CHECK_COLUMNS)])
print(f"{len(df)} rows of {df['model_type'].nunique()} model types agree (or are refused by the count)")
