r"""The gauge toolkit: a whole model's orbit at its current point, for your own model.

    from attnid.gauge import Gauge
    g = Gauge.for_hf_model(model)    # a transformers model of a mapped class (or Gauge(model_spec, theta))
    g.dim                            # the exact unidentified count at this model's sizes
    g.project(update)                # {name: tensor} as model.named_parameters(): its tangent part
    g.overlap(update)                # ||P u|| / ||u||, and per source
    g.balance_(model)                # the balanced point of the orbit (attnid.gauge.balance), in place

The tangent space is the span of the explicit generators (`attnid.gauge.sources`) at the point; `project`
is the orthogonal projection onto it, P u = T^T K^+ T u (`attnid.gauge.operator.Projection`: K factored once
per point, in float64 whatever the parameters' dtype), so it is idempotent and lands where the logits'
directional derivative is at rounding. With weak=True the weakly identified directions (exact symmetries for
eps = 0 that a norm's eps > 0 breaks) join the span; by default they do not (they change the function, a
little). The point moves with training: `refresh()` re-reads it (the optimizer wrappers of
`attnid.gauge.projected` do so after every step). A model on the meta device gives `dim` and the generators'
count without weights (LLaMA-3-8B's shapes in seconds); anything numeric needs real weights.
"""

from __future__ import annotations

import math

import torch

from ..flat import FlatLayout
from ..model.counting import count_model
from ..model.spec import ModelSpec
from ..symmetry.linalg import serial
from .name_map import NameMap, name_map
from .operator import Generators, Projection
from .point import DTYPE, FineLayout, Point
from .sources import generators


class Gauge:
    """The orbit of a whole model at one point (module docstring).

    spec: the model's ModelSpec; theta: its point in the layout of `attnid.model.layout.ModelLayout` (None: no
    numbers, dim only); names: a NameMap to a real module's parameters with their (name, shape) list, or None."""

    def __init__(self, spec: ModelSpec, theta: torch.Tensor | None = None, *, names: NameMap | None = None,
                 shapes: list | None = None, weak: bool = False):  # fmt: skip
        self.spec, self.weak = spec, weak
        self.counts = count_model(spec)
        self.fine = FineLayout(spec)
        self.names = names
        self.hf_layout = FlatLayout(shapes, "named_parameters") if shapes is not None else None
        self._theta = None if theta is None else theta.detach().to(DTYPE)
        self._projection = None
        self._groups = None

    # construction ------------------------------------------------------------------------------------
    @classmethod
    def for_hf_model(cls, model: torch.nn.Module, seq_len: int | None = None, weak: bool = False) -> Gauge:
        """The gauge of a `transformers` model of a mapped class at its current weights (meta: dim only)."""
        from ..hf.mapping import model_spec

        cfg = model.config.to_dict()
        spec = model_spec(cfg, seq_len=seq_len)
        shapes = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
        names = name_map(spec, cfg)
        fine = FineLayout(spec)
        names.check(dict(shapes), fine)
        gauge = cls(spec, None, names=names, shapes=shapes, weak=weak)
        if not any(p.is_meta for p in model.parameters()):
            gauge.refresh(model)
        return gauge

    def refresh(self, source=None) -> Gauge:
        """Re-read the point: from a model (its named_parameters), a flat theta in the layout's order, or None
        (keep the point, drop the cached factorisation)."""
        if isinstance(source, torch.nn.Module):
            hf = {n: p.detach().to(DTYPE) for n, p in source.named_parameters()}
            self._theta = self.fine.flatten(self.names.to_fine(hf))
        elif source is not None:
            self._theta = source.detach().to(DTYPE)
        self._projection, self._groups = None, None
        return self

    # counts ------------------------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        """The exact unidentified dimension at this model's sizes (plus the weak ones with weak=True)."""
        return self.counts.unidentified + (self.counts.weakly_identified if self.weak else 0)

    @property
    def n_params(self) -> int:
        return self.spec.n_params

    @property
    def breakdown(self) -> dict:
        return dict(self.counts.breakdown)

    def chance(self) -> float:
        """sqrt(dim / P): the overlap of an isotropic random update."""
        return math.sqrt(self.dim / self.n_params)

    # the operator ------------------------------------------------------------------------------------
    @property
    def theta(self) -> torch.Tensor:
        if self._theta is None:
            raise RuntimeError("this gauge has no weights (a meta model): build it from real parameters")
        return self._theta

    @property
    def groups(self):
        if self._groups is None:
            point = Point(self.spec, self.theta)
            groups = [g for g in generators(point) if self.weak or not g.weak]
            if any(g.fallback for g in groups):
                raise NotImplementedError(
                    f"{', '.join(sorted({g.source for g in groups if g.fallback}))}: no closed-form generators"
                )
            self._groups = groups
        return self._groups

    @property
    def projection(self) -> Projection:
        if self._projection is None:
            self._projection = Projection(Generators(self.fine, self.groups))
        return self._projection

    # vectors in and out ------------------------------------------------------------------------------
    def _to_fine(self, update) -> tuple[torch.Tensor, callable]:
        """(u (P,) in the layout, a function mapping a layout vector back to the update's form)."""
        if isinstance(update, torch.Tensor):
            return update.to(DTYPE), lambda v: v.to(update.dtype)
        if self.names is None:
            raise TypeError("a gauge built from a ModelSpec takes flat vectors in its layout")
        like = {n: t for n, t in update.items()}
        full = {}
        for n, block in self.hf_layout.blocks.items():
            t = like.get(n)
            full[n] = t.detach().to(DTYPE).cpu() if t is not None else torch.zeros(block.shape, dtype=DTYPE)
        u = self.fine.flatten(self.names.to_fine(full))

        def back(v):
            hf = self.names.to_hf(self.fine.unflatten(v))
            return {n: hf[n].to(dtype=like[n].dtype, device=like[n].device) for n in like}

        return u, back

    def project(self, update):
        """The tangent part P u of an update ({name: tensor} as named_parameters, or a flat layout vector)."""
        proj = self.projection
        with serial():  # many small products: one thread each (attnid.symmetry.linalg.serial)
            u, back = self._to_fine(update)
            return back(proj(u))

    def project_out(self, update):
        """u - P u: the update without its tangent part."""
        proj = self.projection
        with serial():
            u, back = self._to_fine(update)
            return back(u - proj(u))

    def overlap(self, update, dense: bool = False) -> dict:
        """||P u|| / ||u|| ('all'), and per source ||T_s c_s|| / ||u|| of the decomposition P u = sum_s T_s c_s.

        dense=True: the same numbers (to rounding) through each group's rows of T on its own blocks
        (`Projection.source_overlaps`, kept with the point): for small models (those rows in memory), where the
        adjoint's backward pass and one apply per source cost more than a few matrix products."""
        if not dense:
            return self.split(update)[1]
        proj = self.projection
        with serial():
            u, _ = self._to_fine(update)
            return {key: float(value) for key, value in proj.source_overlaps(u).items()}

    def split(self, update) -> tuple:
        """(P u in the update's form, the overlaps of :meth:`overlap`) from one solve."""
        proj = self.projection
        with serial():
            return self._split(proj, update)

    def _split(self, proj, update) -> tuple:
        u, back = self._to_fine(update)
        c = proj.coefficients(u)
        pu = proj.T.apply(c)
        norm = float(u.norm())
        out = {"all": float(pu.norm()) / norm if norm else float("nan")}
        by_source: dict[str, list[int]] = {}
        for i, g in enumerate(proj.T.groups):
            by_source.setdefault(g.source, []).append(i)
        sl = proj.T.slices()
        for source, idx in by_source.items():
            part = torch.zeros_like(c)
            for i in idx:
                part[sl[i]] = c[sl[i]]
            out[source] = float(proj.T.apply(part).norm()) / norm if norm else float("nan")
        return back(pu), out

    # balance ---------------------------------------------------------------------------------------
    def balance_(self, model: torch.nn.Module | None = None, **options) -> dict:
        """Move the point to the balanced point of its orbit (`attnid.gauge.balance`), in place in `model`
        (its parameters are overwritten) and in the gauge; returns the report (norms, iterations, residual)."""
        from .balance import balance

        theta, report = balance(self.spec, self.theta, **options)
        self.refresh(theta)
        if model is not None:
            hf = self.names.to_hf(self.fine.unflatten(theta))
            with torch.no_grad():
                for n, p in model.named_parameters():
                    p.copy_(hf[n].to(dtype=p.dtype, device=p.device))
        return report
