"""results/jacobian/real_heads.csv: RoPE at real head sizes and bases (config jacobian.real_heads:
d_head 64 and 128, bases 1e4 and 5e5, full and partial RoPE, with and without GQA), each spec
verified once at one seed with its predicted null space checked, dense or by the certificate by
size, with its margin. Fails (listing the specs) unless every spec passes."""

import torch

from attnid import jacobian
from attnid.io import atomic_write_csv, log_to

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
cfg = snakemake.params.cfg
real = cfg["real_heads"]
specs = jacobian.expand_grid(real["families"])
df = jacobian.verify_grid(
    specs, seed=cfg["seeds"][0], other_seeds=(), half_batch=False, method=real["method"], rtol=cfg["rank_rtol"],
    dtype=getattr(torch, cfg["dtype"]), device=snakemake.params.device, positions=cfg["positions"],
    max_memory_gb=real["max_memory_gb"], progress=True,
)  # fmt: skip
if not df["passed"].all():
    message = jacobian.failures_message(df, "real-head specs")
    print(message)
    raise SystemExit(message)
atomic_write_csv(snakemake.output[0], df)
print(f"all {len(df)} real-head specs pass; worst margin {df['margin'].min():.1f} decades, {df['seconds'].sum():.0f} s")
