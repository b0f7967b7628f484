"""results/symmetry/checks.csv: the symmetry toolkit's properties measured on the configured grid of specs."""

import torch

from attnid.io import atomic_write_csv, log_to
from attnid.symmetry.checks import check_grid

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
df = check_grid(snakemake.params.grid)
atomic_write_csv(snakemake.output[0], df)
print(f"{len(df)} rows, dim T = count on {int(df.dim_match.sum())}")
