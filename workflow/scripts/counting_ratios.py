"""results/counting/ratios.csv: exact counts over the configured grid (heads x GQA x RoPE x biases)."""

from attnid.counting import ratio_grid
from attnid.io import atomic_write_csv, log_to

log_to(snakemake.log[0])
grid = snakemake.params.grid
df = ratio_grid(grid["d_model"], grid["heads"], grid["kv_groups"], grid["rope"], grid["biases"])
atomic_write_csv(snakemake.output[0], df)
print(f"{len(df)} specs, ratio range {df.ratio.min():.4f}..{df.ratio.max():.4f}")
