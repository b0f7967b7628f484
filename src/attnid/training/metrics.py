"""The per-(step, layer) measurements of a run: where they are kept while it trains, and the table they become.

Both trainers (attnid.training.loop, one run; attnid.training.batched, M runs stacked) keep every
measurement as a float64 tensor on the run's device, (S, L) or (M, S, L) for S steps and L
attention layers, NaN where nothing was measured, so the loop never waits for the host; the
tensors become one table per run at the end, row-major in (step, layer). The columns are
attnid.training.runs.METRIC_COLUMNS (the loop's docstring says what each one is).
"""

from __future__ import annotations

import pandas as pd
import torch

from .. import symmetry
from ..spec import AttentionSpec


def chance_levels(spec: AttentionSpec) -> dict[str, float]:
    """sqrt(dim T / n) for the whole update ('all', n = P) and per part (n = the part's coordinates):
    the overlap ||P_T x|| / ||x|| of an isotropic random x (attnid.symmetry.chance_overlap)."""
    return {key: symmetry.chance_overlap(spec, None if key == "all" else key) for key in symmetry.OVERLAP_KEYS}


def measurement_tensors(
    columns, shape: tuple[int, ...], spec: AttentionSpec, lr: float | torch.Tensor, device
) -> dict[str, torch.Tensor]:
    """{column: float64 tensor of `shape` (..., S, L)}, NaN but for the constants known before step 0:
    chance_* (:func:`chance_levels`) and lr (a float, or one per run (M,) for stacked runs)."""
    rows = {c: torch.full(shape, float("nan"), dtype=torch.float64, device=device) for c in columns}
    for key, value in chance_levels(spec).items():
        rows[f"chance_{key}"].fill_(value)
    lr = torch.as_tensor(lr, dtype=torch.float64).to(device)
    rows["lr"].copy_(lr.reshape(*lr.shape, 1, 1).expand(shape))
    return rows


def metrics_table(rows: dict[str, torch.Tensor], columns) -> pd.DataFrame:
    """One run's measurements {column: (S, L)} -> a table with `layer`, `step` and then `columns`,
    one row per (step, layer) in row-major order."""
    S, L = next(iter(rows.values())).shape
    flat = {c: v.cpu().reshape(-1).numpy() for c, v in rows.items()}
    table = {"layer": torch.arange(L).repeat(S).numpy(), "step": torch.arange(S).repeat_interleave(L).numpy(), **flat}
    return pd.DataFrame(table)[["layer", "step", *columns]]
