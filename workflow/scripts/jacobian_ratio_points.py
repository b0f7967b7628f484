"""results/jacobian/ratio_points.csv: the Jacobian-measured unidentified dimension of every spec of
the counting ratio grid (results/counting/ratios.csv), for the points of the ratio figure.

Specs above `jacobian.ratio_points.max_params` are skipped (logged). Fails when any measured
point does not pass.
"""

import torch

from attnid import jacobian
from attnid.io import atomic_write_csv, log_to, read_result

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
cfg = snakemake.params.cfg
ratios = read_result(snakemake.input[0], columns=["label", "total"], keep_default_na=False)
df = jacobian.ratio_points(
    ratios, cfg["ratio_points"]["max_params"], seed=cfg["seeds"][0], oversample=cfg["oversample"],
    device=snakemake.params.device, dtype=getattr(torch, cfg["dtype"]), rtol=cfg["rank_rtol"],
    positions=cfg["positions"],
)  # fmt: skip
if len(df) and not df["passed"].all():
    message = jacobian.failures_message(df, "ratio points")
    print(message)
    raise SystemExit(message)
atomic_write_csv(snakemake.output[0], df)
print(f"{len(df)} of {len(ratios)} ratio-grid specs measured, all pass")
