"""results/hf/coverage.csv: the self-check (`attnid check --model-type`) of the configured model types.

Each type's default config (attnid.hf.coverage.checked_config) is shrunk and its real `transformers` class
measured against the count (attnid.hf.check): one row per type and part (every distinct attention layer, the
whole model) with its verdict, P, count, measured, gap and margin. Fails (non-zero exit, the failing rows in
the message and the log) when a row disagrees, is undecided or the class failed; then no CSV is written.
"""

import pandas as pd

from attnid.hf.coverage import CHECK_COLUMNS, check_failures, check_types
from attnid.io import atomic_write_csv, log_to

if __name__ == "__main__":  # the workers are spawned processes that import this file again
    log = log_to(snakemake.log[0])
    cfg = snakemake.params.cfg
    rows = check_types(cfg["coverage"], cfg["seed"], cfg["oversample"], workers=snakemake.threads, log=log.info)
    message = check_failures(rows)
    if message:
        print(message)
        raise SystemExit(f"model types whose self-check fails:\n{message}")
    atomic_write_csv(snakemake.output[0], pd.DataFrame(rows, columns=CHECK_COLUMNS))
    print(f"{len(rows)} rows of {len({r['model_type'] for r in rows})} model types agree (or are refused by the count)")
