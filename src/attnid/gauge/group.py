"""One group of generators: a linear map from coefficients to tangent vectors at the point theta (the
whole-model form of `attnid.symmetry.group`, one attention layer's group and its action).

A :class:`Group` is the linearised action of one symmetry (or the span of one blind spot) of a whole
model at theta: `apply(c)` with c (..., n) returns the tangent's nonzero blocks {fine block name:
(..., *shape)}, linear in c. Its adjoint (vector -> coefficients) is the vector-Jacobian product of that
linear map, so only `apply` is written down, once, in closed form. `source` is the breakdown key of
`attnid.model.count_model` that the group explains; `weak` marks a weakly identified class (an exact
symmetry for eps = 0 that a norm's eps > 0 breaks); `fallback` marks a group that is not written in closed
form but read off the Jacobian (tiny sizes only, said where it is used).

The helpers act on a block along one axis, batched over the coefficients' leading dims:
`along_input(W, L, axis)` is L W on the axis that contracts with the stream (a reader's input),
`scale_input(W, s, axis)` is diag(s) W there, `along_output(X, R)` is X R on the last axis (a writer's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch


@dataclass
class Group:
    source: str  # breakdown key of count_model
    name: str  # e.g. layers.0.attn.value_output
    n: int  # coefficients
    fn: Callable[[torch.Tensor], dict]  # c (..., n) -> {block: (..., *shape)}, linear in c
    blocks: tuple[str, ...]  # the blocks the tangents touch
    weak: bool = False
    fallback: bool = False
    # optional closed-form pieces for large groups: (n, n) Gram of the group with itself
    gram: Callable[[], torch.Tensor] | None = None
    meta: dict = field(default_factory=dict)

    def apply(self, c: torch.Tensor) -> dict:
        return self.fn(c) if self.n else {}


def _lead(t: torch.Tensor, core: int) -> tuple:
    return tuple(t.shape[: t.dim() - core])


def along_input(W: torch.Tensor, L: torch.Tensor, axis: int) -> torch.Tensor:
    """(..., *W.shape): sum_j L[..., i, j] W[.., j, ..] on `axis` of W (L (..., d, d))."""
    lead = _lead(L, 2)
    Wm = W.movedim(axis, -1)  # (rest..., d)
    Lt = L.mT.reshape(*lead, *([1] * (Wm.dim() - 2)), *L.shape[-2:])
    return (Wm @ Lt).movedim(-1, len(lead) + axis)


def scale_input(W: torch.Tensor, s: torch.Tensor, axis: int) -> torch.Tensor:
    """(..., *W.shape): W[.., i, ..] s[..., i] on `axis` of W (s (..., d))."""
    lead = _lead(s, 1)
    Wm = W.movedim(axis, -1)
    return (Wm * s.reshape(*lead, *([1] * (Wm.dim() - 1)), s.shape[-1])).movedim(-1, len(lead) + axis)


def along_output(X: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """(..., *X.shape): X R on the last axis (R (..., d, d))."""
    lead = _lead(R, 2)
    return X @ R.reshape(*lead, *([1] * (X.dim() - 2)), *R.shape[-2:])


def outer_input(u: torch.Tensor, col: torch.Tensor, shape: tuple, axis: int) -> torch.Tensor:
    """(..., *shape): the block whose slice along `axis` at input index i is col[i] * u (u (..., *rest)),
    i.e. a rank-one change col u^T of a reader (col (d,) on the input axis)."""
    lead = _lead(u, len(shape) - 1)
    rest = list(shape)
    rest.pop(axis)
    out = u.reshape(*lead, *rest)[..., None] * col  # (..., rest..., d)
    return out.movedim(-1, len(lead) + axis)


def expand(c: torch.Tensor, value: torch.Tensor, n_core: int) -> torch.Tensor:
    """value (shape) broadcast to c's leading dims (c (..., n_core dims))."""
    return value.expand(*_lead(c, n_core), *value.shape)
