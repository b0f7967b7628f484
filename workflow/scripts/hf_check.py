"""results/hf/checks/<model_type>.csv: the self-check (`attnid check --model-type`) of one mapped model type.

The type's default config (attnid.hf.coverage.checked_config) is shrunk and its real `transformers` class
measured against the count (attnid.hf.check): one row per part (every distinct attention layer, the whole
model) with its verdict, P, count, measured, gap and margin. A part that disagrees is a row like any other
here, so that one type never stops the others; results/hf/coverage.csv (hf_coverage.py) gathers them and fails.
"""

import pandas as pd
import torch

from attnid.hf.coverage import CHECK_COLUMNS, check_rows
from attnid.io import atomic_write_csv, log_to

log = log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
cfg = snakemake.params.cfg
mt = snakemake.wildcards.model_type
rows = check_rows(mt, cfg["seed"], cfg["oversample"], sketch=cfg["sketch"])
for r in rows:
    log.info(f"{mt} {r['part']}: {r['verdict']} P={r['P']} count={r['count']} measured={r['measured']} gap={r['gap']}")
atomic_write_csv(snakemake.output[0], pd.DataFrame(rows, columns=CHECK_COLUMNS))
