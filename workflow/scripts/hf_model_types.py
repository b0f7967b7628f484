"""results/hf/model_types.csv: every model type of the installed `transformers`, mapped or refused, and why.

One row per type (attnid.hf.coverage.coverage: its causal LMs and BERT): status, category, the one-line
reason, for a mapped type how much of its default config is counted, and the class the self-check builds.
"""

import pandas as pd
import transformers

from attnid.hf.coverage import coverage, summary
from attnid.io import atomic_write_csv, log_to

log = log_to(snakemake.log[0])
transformers.logging.set_verbosity_error()
rows = coverage()
atomic_write_csv(snakemake.output[0], pd.DataFrame(rows))
log.info("%s", summary(rows))
