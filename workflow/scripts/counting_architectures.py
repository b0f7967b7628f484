"""results/counting/architectures.csv: per-layer and per-model attention counts of real models."""

from attnid.hf.config_tables import architecture_table
from attnid.io import atomic_write_csv, log_to

log = log_to(snakemake.log[0])
df = architecture_table()
atomic_write_csv(snakemake.output[0], df)
log.info("\n%s", df[["model", "total", "unidentified", "ratio"]].to_string(index=False))
