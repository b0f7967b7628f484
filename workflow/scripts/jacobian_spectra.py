"""results/jacobian/spectra.csv: all singular values (relative to the largest) of a few specs.

Long format: label, index (1..P), sigma, total, predicted_rank = P - predicted unidentified,
measured_rank, rank_rtol.
"""

import pandas as pd
import torch

from attnid import count, jacobian, verification_grid
from attnid.device import resolve_device
from attnid.io import atomic_write_csv, log_to

log_to(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
cfg = snakemake.params.cfg
device = resolve_device(snakemake.params.device)
frames = []
for fields in cfg["spectra"]:
    spec = verification_grid.spec_from_fields(fields)
    sigma = jacobian.singular_values(spec, cfg["seeds"][0], cfg["oversample"], device, getattr(torch, cfg["dtype"]))
    c = count(spec)
    frame = pd.DataFrame({"label": spec.label, "index": range(1, len(sigma) + 1), "sigma": sigma.numpy()})
    frame["total"] = c.total
    frame["predicted_rank"] = c.identified
    frame["measured_rank"] = int((sigma > cfg["rank_rtol"]).sum())
    frame["rank_rtol"] = cfg["rank_rtol"]
    frames.append(frame)
    print(f"{spec.label}: P={c.total}, predicted rank {c.identified}, measured {frame['measured_rank'].iloc[0]}")
atomic_write_csv(snakemake.output[0], pd.concat(frames, ignore_index=True))
