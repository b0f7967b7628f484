"""results/jacobian/ratio_points.csv: the Jacobian-measured unidentified dimension of every spec of
the counting ratio grid (results/counting/ratios.csv), for the points of the ratio figure.

Specs above `jacobian.ratio_points.max_params` are skipped (logged). Fails when any measured
point disagrees with its count.
"""

import pandas as pd
import torch

from attnid import AttentionSpec, jacobian, verification_grid
from attnid.device import resolve_device
from attnid.io import atomic_write_csv, log_to

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
cfg = snakemake.params.cfg
device = resolve_device(snakemake.params.device)
ratios = pd.read_csv(snakemake.input[0], keep_default_na=False)
rows = []
for r in ratios.itertuples(index=False):
    spec = AttentionSpec(
        int(r.d_model), int(r.n_heads), int(r.n_kv_heads), int(r.d_head_qk), int(r.d_head_v),
        rope_dims=int(r.rope_dims), biases=str(r.biases), causal=str(r.causal).lower() == "true",
    )  # fmt: skip
    if int(r.total) > cfg["ratio_points"]["max_params"]:
        print(f"skip {spec.label}: P={r.total} > max_params={cfg['ratio_points']['max_params']}")
        continue
    res = jacobian.verify_auto(
        spec, seed=cfg["seeds"][0], oversample=cfg["oversample"], device=device, dtype=getattr(torch, cfg["dtype"]),
        rtol=cfg["rank_rtol"], other_seeds=(), half_batch=False, directions=False,
    )  # fmt: skip
    measured = res["measured"]
    rows.append(
        {
            "label": spec.label,
            "predicted": res["predicted"],
            "measured": measured,
            "ratio_measured": measured / res["total"] if measured is not None else float("nan"),
            "sigma_kept": res["sigma_kept"],
            "sigma_dropped": res["sigma_dropped"],
            "passed": res["passed"],
            "method": res["method"],
            "seconds": res["seconds"],
        }
    )
    print(f"{spec.label}: predicted {res['predicted']}, measured {measured}, {res['seconds']:.2f}s")
df = pd.DataFrame(rows, columns=["label", "predicted", "measured", "ratio_measured", "sigma_kept", "sigma_dropped", "passed", "method", "seconds"])
if len(df) and not df["passed"].all():
    message = verification_grid.failures_message(df, "ratio points")
    print(message)
    raise SystemExit(message)
atomic_write_csv(snakemake.output[0], df)
print(f"{len(df)} of {len(ratios)} ratio-grid specs measured, all agree")
