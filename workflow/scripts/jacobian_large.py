"""results/jacobian/large.json: one large spec (paper preset: d_model 64, 8 heads, P = 16,384)
verified by the Cholesky certificate (attnid.jacobian.certify), with its time and peak memory."""

import torch

from attnid import jacobian, verification_grid
from attnid.device import resolve_device
from attnid.io import atomic_write_json, log_to

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
cfg = snakemake.params.cfg
spec = verification_grid.spec_from_fields(cfg["large"]["spec"])
row = jacobian.certify(
    spec, seed=cfg["seeds"][0], oversample=cfg["large"]["oversample"], device=resolve_device(snakemake.params.device),
    dtype=getattr(torch, cfg["dtype"]), rtol=cfg["rank_rtol"],
)  # fmt: skip
print(row)
if not row["passed"]:
    raise SystemExit(f"large spec {spec.label}: predicted {row['predicted']}, measured {row['measured']} (certified: {row['certified']})")
atomic_write_json(snakemake.output[0], row)
