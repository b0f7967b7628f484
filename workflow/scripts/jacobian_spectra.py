"""results/jacobian/spectra.csv: all singular values (relative to the largest) of a few specs.

Long format: label, index (1..P), sigma, total, predicted_rank = P - predicted unidentified,
measured_rank, rank_rtol.
"""

import torch

from attnid import jacobian
from attnid.io import atomic_write_csv, log_to

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
cfg = snakemake.params.cfg
df = jacobian.spectra(
    [jacobian.spec_from_fields(fields) for fields in cfg["spectra"]], seed=cfg["seeds"][0],
    oversample=cfg["oversample"], device=snakemake.params.device, dtype=getattr(torch, cfg["dtype"]),
    rtol=cfg["rank_rtol"], positions=cfg["positions"],
)  # fmt: skip
atomic_write_csv(snakemake.output[0], df)
