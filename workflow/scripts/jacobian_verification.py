"""results/jacobian/verification.csv: every spec of the configured grid, predicted vs measured.

Fails (non-zero exit, the disagreeing specs listed in the message and the log) when any spec
disagrees; then no CSV is written, so nothing looks finished.
"""

import torch

from attnid import verification_grid
from attnid.device import resolve_device
from attnid.io import atomic_write_csv, log_to

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
cfg = snakemake.params.cfg
specs = verification_grid.expand_grid(cfg["grid"])
print(f"{len(specs)} specs from {len(cfg['grid'])} families; seeds {cfg['seeds']}, half batch {cfg['half_batch']}")
df = verification_grid.verify_grid(
    specs,
    seed=cfg["seeds"][0],
    other_seeds=tuple(cfg["seeds"][1:]),
    half_batch=cfg["half_batch"],
    oversample=cfg["oversample"],
    rtol=cfg["rank_rtol"],
    dtype=getattr(torch, cfg["dtype"]),
    device=resolve_device(snakemake.params.device),
)
if not df["passed"].all():
    message = verification_grid.failures_message(df, "specs of the verification grid")
    print(message)
    raise SystemExit(message)
atomic_write_csv(snakemake.output[0], df)
print(f"all {len(df)} specs agree; worst gap {df['gap'].min():.1f} decades, {df['seconds'].sum():.0f} s in all")
