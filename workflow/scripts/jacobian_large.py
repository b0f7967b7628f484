"""results/jacobian/large.json: one large spec (paper preset: d_model 64, 8 heads, P = 16,384)
verified by the Cholesky certificate (attnid.jacobian.verify, method certificate), with its time,
peak memory and margin."""

import torch

from attnid import jacobian
from attnid.io import atomic_write_json, log_to

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
cfg = snakemake.params.cfg
spec = jacobian.spec_from_fields(cfg["large"]["spec"])
row = jacobian.verify(
    spec, method="certificate", seed=cfg["seeds"][0], oversample=cfg["large"]["oversample"],
    device=snakemake.params.device, dtype=getattr(torch, cfg["dtype"]), rtol=cfg["rank_rtol"],
    positions=cfg["positions"], max_memory_gb=cfg["large"].get("max_memory_gb", jacobian.DEFAULT_MAX_MEMORY_GB),
    progress=True,
)  # fmt: skip
print(row)
if not row["passed"]:
    raise SystemExit(
        f"large spec {spec.label}: {row['status']}, predicted {row['predicted']}, measured {row['measured']}"
    )
atomic_write_json(snakemake.output[0], row)
