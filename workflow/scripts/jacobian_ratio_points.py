"""results/jacobian/ratio_points.csv: the Jacobian-measured unidentified dimension of the specs of the
counting ratio grid (results/counting/ratios.csv), for the points of the ratio figure.

`jacobian.ratio_points`: drawn_only measures only the rows the ratio figure draws; d_model measures the
same (H, G, RoPE, biases) at that width instead of the grid's (where a measurement is cheap); specs
above max_params are skipped (logged). Fails when any measured point does not pass.
"""

import torch

from attnid import jacobian
from attnid.io import atomic_write_csv, log_to, read_result

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
cfg = snakemake.params.cfg
points = cfg["ratio_points"]
columns = ["label", "total", "d_model", "n_heads", "n_kv_heads", "d_head_qk", "d_head_v", "rope", "rope_dims", "biases"]
ratios = read_result(snakemake.input[0], columns=columns, keep_default_na=False)
df = jacobian.ratio_points(
    ratios, points["max_params"], d_model=points.get("d_model"), drawn_only=points.get("drawn_only", False),
    seed=cfg["seeds"][0], oversample=cfg["oversample"], device=snakemake.params.device,
    dtype=getattr(torch, cfg["dtype"]), rtol=cfg["rank_rtol"], positions=cfg["positions"],
)  # fmt: skip
if len(df) and not df["passed"].all():
    message = jacobian.failures_message(df, "ratio points")
    print(message)
    raise SystemExit(message)
atomic_write_csv(snakemake.output[0], df)
print(f"{len(df)} ratio points measured (of {len(ratios)} ratio-grid specs), all pass")
