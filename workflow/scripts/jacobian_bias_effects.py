"""results/jacobian/bias_effects.csv: marginal unidentified dims of each bias, counted and measured,
by RoPE variant, other biases present and head sizes (attnid.jacobian.bias_effects). Fails on a
disagreement."""

import torch

from attnid import jacobian
from attnid.io import atomic_write_csv, log_to

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
cfg = snakemake.params.cfg
df = jacobian.bias_effects(
    cfg["bias_effects"]["bases"],
    cfg["bias_effects"]["rope"],
    seed=cfg["seeds"][0],
    oversample=cfg["oversample"],
    device=snakemake.params.device,
    dtype=getattr(torch, cfg["dtype"]),
    rtol=cfg["rank_rtol"],
    positions=cfg["positions"],
)
if not df["agree"].all():
    raise SystemExit(f"bias effects: counted and measured differ in\n{df[~df['agree']].to_string()}")
atomic_write_csv(snakemake.output[0], df)
