"""The measurements of a run: what is kept, on which steps, and the table they become.

Measured steps (attnid.training.runs.measured_steps): every `metrics_every`-th and `eval_every`-th step
and the last. Only those are stored, so a sweep's metrics grow with steps / metrics_every, not with the
steps. Each measured step t holds, per attention layer:

    point values at step t
      update_norm, overlap_*    ||u_t|| and ||P_T u_t|| / ||u_t|| of the applied update at theta_t (all of T,
                                its query-key and value-output parts; overlap_gauge: at the balanced point,
                                in the batched trainer on the measured steps that are multiples of
                                `gauge_overlap_every` and the last, NaN on the others)
      drift_*, imbalance_*      the conserved quantities at theta_{t+1} (attnid.symmetry.imbalance_drift)
      eval_loss, eval_accuracy  held-out loss (and recall accuracy) at theta_t on eval steps, NaN elsewhere
    window values over the steps s of (t_prev, t], t_prev the previous measured step
      loss                      the mean training loss of those steps (each on its own fresh batch)
      rebalance_function_change the largest relative function change of a `balance` step among them
      rebalance_norm_removed    the mean norm removed: ||P_T u_s|| per step (`project`), ||theta|| - ||theta'||
                                per balancing step (`balance`)

A window mean of the training loss is what a per-step record would be smoothed to anyway (time to target),
and the point values sample the run at a fixed cadence: a run's mean overlap over its measured steps is an
unbiased estimate of its mean over all steps, whose spread over seeds is what the intervals measure
(`benchmarks/training.py --cadence` compares both on the same runs).

The trainer keeps the measurements as float64 tensors (M, R, L) for M runs, R measured steps and L
layers on the runs' device (the training loop never waits for the host) and turns them into one table per run.
"""

from __future__ import annotations

import math

import pandas as pd
import torch

from .. import symmetry
from ..layer.spec import AttentionSpec

WINDOW_COLUMNS = ("loss", "rebalance_function_change", "rebalance_norm_removed")


def chance_levels(spec: AttentionSpec) -> dict[str, float]:
    """sqrt(dim T / n) for the whole update ('all', n = P) and per part (n = the part's coordinates):
    the overlap ||P_T x|| / ||x|| of an isotropic random x (attnid.symmetry.chance_overlap)."""
    return {key: symmetry.chance_overlap(spec, None if key == "all" else key) for key in symmetry.OVERLAP_KEYS}


class Measurements:
    """{column: (M, R, L) float64 NaN} on the measured steps, and the window accumulators of :data:`WINDOW_COLUMNS`."""

    def __init__(self, columns, runs: int, steps: list[int], layers: int, device):
        self.columns, self.steps = list(columns), list(steps)
        self.row = {t: r for r, t in enumerate(self.steps)}
        shape = (runs, len(self.steps), layers)
        self.values = {c: torch.full(shape, math.nan, dtype=torch.float64, device=device) for c in self.columns}
        self.M, self.L, self.device = runs, layers, device
        self._reset()

    def ensure(self, column: str) -> None:
        """Add a column (NaN everywhere) if it is not there yet (the whole-model gauge's sources)."""
        if column not in self.values:
            self.columns.append(column)
            self.values[column] = torch.full_like(next(iter(self.values.values())), math.nan)

    def _reset(self) -> None:
        zeros = lambda *s: torch.zeros(*s, dtype=torch.float64, device=self.device)
        self.loss_sum, self.loss_count = zeros(self.M), zeros(self.M)
        self.change_max = torch.full((self.M,), -math.inf, dtype=torch.float64, device=self.device)
        self.removed_sum, self.removed_count = zeros(self.M, self.L), zeros(self.M, self.L)

    def add_loss(self, loss: torch.Tensor, alive: torch.Tensor) -> None:
        self.loss_sum += torch.where(alive, loss.to(torch.float64), 0)
        self.loss_count += alive.to(torch.float64)

    def add_change(self, rows, change: torch.Tensor) -> None:
        self.change_max[rows] = torch.maximum(self.change_max[rows], change.to(torch.float64))

    def add_removed(self, rows, layer: int, removed: torch.Tensor) -> None:
        self.removed_sum[rows, layer] += removed.to(torch.float64)
        self.removed_count[rows, layer] += 1

    def close_window(self, t: int) -> None:
        """Write the window values of step t's row and start the next window."""
        r = self.row[t]
        self.values["loss"][:, r] = (self.loss_sum / self.loss_count)[:, None]
        change = torch.where(self.change_max > -math.inf, self.change_max, math.nan)
        self.values["rebalance_function_change"][:, r] = change[:, None]
        self.values["rebalance_norm_removed"][:, r] = self.removed_sum / self.removed_count
        self._reset()

    def set(self, column: str, t: int, value: torch.Tensor, layer: int | None = None, rows=None) -> None:
        """column at step t: value (M,) or (len(rows),) for one layer, or (M, L) / (M,) broadcast over layers."""
        target = self.values[column][:, self.row[t]]  # (M, L) view
        value = value.to(torch.float64)
        if layer is None:
            value = value if value.dim() == 2 else value[:, None].expand(-1, self.L)
            if rows is None:
                target.copy_(value)
            else:
                target[rows] = value
        elif rows is None:
            target[:, layer] = value
        else:
            target[rows, layer] = value

    def blank(self, t: int, dead: torch.Tensor, columns) -> None:
        """NaN for the runs `dead` (bool (M,)) in `columns` at step t."""
        for c in columns:
            self.values[c][dead, self.row[t]] = math.nan

    def table(self, run: int) -> pd.DataFrame:
        """One run's measurements as a table: `layer`, `step`, then the columns, row-major in (step, layer)."""
        R, L = len(self.steps), self.L
        data = {
            "layer": torch.arange(L).repeat(R).numpy(),
            "step": torch.tensor(self.steps).repeat_interleave(L).numpy(),
        }
        for c in self.columns:
            data[c] = self.values[c][run].reshape(-1).cpu().numpy()
        return pd.DataFrame(data)
