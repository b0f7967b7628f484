"""results/jacobian/verification.csv: every spec of the configured grid, predicted vs measured.

Fails (non-zero exit, the specs that failed or could not be decided listed in the message and the
log) unless every spec passes; then no CSV is written, so nothing looks finished.
"""

import torch

from attnid import jacobian
from attnid.io import atomic_write_csv, log_to

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
cfg = snakemake.params.cfg
specs = jacobian.expand_grid(cfg["grid"])
print(f"{len(specs)} specs from {len(cfg['grid'])} families; seeds {cfg['seeds']}, half batch {cfg['half_batch']}")
df = jacobian.verify_grid(
    specs,
    seed=cfg["seeds"][0],
    other_seeds=tuple(cfg["seeds"][1:]),
    half_batch=cfg["half_batch"],
    oversample=cfg["oversample"],
    rtol=cfg["rank_rtol"],
    dtype=getattr(torch, cfg["dtype"]),
    device=snakemake.params.device,
    positions=cfg["positions"],
)
if not df["passed"].all():
    message = jacobian.failures_message(df, "specs of the verification grid")
    print(message)
    raise SystemExit(message)
atomic_write_csv(snakemake.output[0], df)
print(f"all {len(df)} specs pass; worst gap {df['gap'].min():.1f}, worst margin {df['margin'].min():.1f} decades")
