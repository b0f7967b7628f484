"""The whole-model orbit of a real architecture's runs (attnid.gauge), measured on a cadence.

The attention layers' own orbits (attnid.symmetry, through attnid.training.archs' maps) are measured on every
measured step of every run; a real model has more symmetries than its attention layers (norm gains against
the maps they feed, hidden units of the MLP, rotations of the residual stream, LayerNorm centring, ...;
Section 4 of the paper). :class:`ModelGauge` measures an update against all of them: the whole-model gauge
toolkit `attnid.gauge.Gauge` (`Gauge.for_hf_model(module)`, `refresh(module)`, `overlap(update)` -> the overlap
with the whole tangent space, 'all', and the part of it each source's generators carry), one run at a time
at its current point (:meth:`ModelGauge.overlaps`: every run of a job, each through its generators' rows, so
T u and every source's tangent are a few matrix products, not a backward pass and one apply per source). It
is the costliest measurement (a Gram of the generators factored per point), so the batched trainer takes it
every `gauge_every` steps only.

Any object with that interface (its `overlap` taking `dense=`) works (`gauge_class` argument); without
attnid.gauge installed (an older tree) :func:`model_gauge` returns None and the whole-model columns are absent.
"""

from __future__ import annotations

import copy
import sys

import torch

from ..errors import SpecError


class ModelGauge:
    """Whole-model overlaps of a Net's runs: overlap(theta (P,), update (P,)) -> {source: overlap}, 'all' first."""

    def __init__(self, net, gauge_class=None):
        if gauge_class is None:
            from ..gauge import Gauge as gauge_class
        self.names, self.sizes, self.shapes = net.names, net.sizes, net.shapes
        self.module = copy.deepcopy(net.module)
        self.gauge = gauge_class.for_hf_model(self.module, seq_len=net.seq_len)

    def _params(self, flat: torch.Tensor) -> dict:
        return {n: t.view(s) for n, t, s in zip(self.names, torch.split(flat, self.sizes), self.shapes)}

    def overlap(self, theta: torch.Tensor, update: torch.Tensor, dense: bool = False) -> dict[str, float]:
        """The overlaps of one run's update (P,) at its point theta (P,) (dense: `Gauge.overlap`'s dense path)."""
        with torch.no_grad():
            for (name, p), value in zip(self.module.named_parameters(), torch.split(theta, self.sizes)):
                p.copy_(value.view(p.shape))
        self.gauge.refresh(self.module)
        return dict(self.gauge.overlap(self._params(update), dense=dense))

    def overlaps(self, theta: torch.Tensor, update: torch.Tensor) -> dict[str, torch.Tensor]:
        """{source: (R,) float64} for R runs' updates (R, P) at their points theta (R, P), 'all' first: each run's
        :meth:`overlap` through the dense generators (the same numbers as the plain path, to rounding)."""
        rows = [self.overlap(t, u, dense=True) for t, u in zip(theta, update)]
        return {key: torch.tensor([row[key] for row in rows], dtype=torch.float64) for key in (rows[0] if rows else {})}


def model_gauge(net, max_dim: int | None = None) -> ModelGauge | None:
    """The whole-model gauge of a real architecture's Net (None for attnid's own models, without attnid.gauge,
    when the whole-model counting rules do not cover the model (attnid.model.counting.limits.check_countable,
    e.g. a vocabulary no larger than d_model: the token rows then span only part of the stream), or when the
    orbit's dimension exceeds `max_dim`: its Gram, dim x dim, is factored per run and point, so a wide model's
    costs minutes a point). Its overlaps are then NaN, and the job's log says why. A model the mapping refuses is
    an error, not a None."""
    if net.kind == "own":
        return None
    try:
        from ..gauge import Gauge
    except ImportError:
        return None
    from ..hf.mapping import model_spec
    from ..model.counting.limits import check_countable

    spec = model_spec(net.module.config.to_dict(), seq_len=net.seq_len)
    try:
        check_countable(spec)
    except SpecError as beyond:
        print(f"no whole-model overlap: the counting rules do not cover this model ({beyond})", file=sys.stderr)
        return None
    gauge = ModelGauge(net, Gauge)
    return None if max_dim is not None and gauge.gauge.dim > max_dim else gauge
