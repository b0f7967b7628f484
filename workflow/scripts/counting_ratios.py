"""results/counting/ratios.csv: exact counts over the configured grid (heads x GQA x RoPE x biases)."""

from attnid.layer.counting import ratio_grid
from attnid.io import atomic_write_csv, log_to

log = log_to(snakemake.log[0])
df = ratio_grid(**snakemake.params.grid)
atomic_write_csv(snakemake.output[0], df)
log.info("%d specs, ratio range %.4f..%.4f", len(df), df.ratio.min(), df.ratio.max())
