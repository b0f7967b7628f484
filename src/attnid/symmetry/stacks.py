"""Per-group stacked matrices: the view of the flat parameters that the symmetry group acts on.

Notation (row convention, see :mod:`attnid.layer.spec`): H query heads in G KV groups of r = H/G heads,
d = d_model, k = d_head_qk split into p rotated dims (the first p, planes (0,1),(2,3),...) and
u = k - p unrotated ones, v = d_head_v. Per group g two stacked matrices carry each side:

    query-key     Q_g = [W_Q^h; b_Q^h]_{h in g}   (r m_q, k),  m_q = d + [b_Q]
                  K_g = [W_K^g; b_K^g]            (d + [b_K], k)
    value-output  V_g = [W_V^g; b_V^g]            (d + [b_V], v)
                  O_g = [W_O^h^T]_{h in g}        (r d, v)

Every function accepts leading batch dims "..." and has an exact inverse (``*_unstack``), so the
group action, the projector, the balance and the conserved quantities all read and write the flat
layout of :mod:`attnid.layer.layout` through these views.
"""

from __future__ import annotations

import torch

from ..layer.layout import Layout
from ..layer.spec import AttentionSpec

PARTS = ("query_key", "value_output")
PART_BLOCKS = {"query_key": ("W_Q", "b_Q", "W_K", "b_K"), "value_output": ("W_V", "b_V", "W_O", "b_O")}
COMPUTE_DTYPE = torch.float64  # small solves run in float64 whatever the parameter dtype


def check_part(part):
    if part is not None and part not in PARTS:
        raise ValueError(f"part must be one of {PARTS} or None, got {part!r}")


def qk_stack(spec: AttentionSpec, w: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Q (..., G, r m_q, k) = [W_Q^h; b_Q^h] stacked over the heads of each group; K (..., G, d + [b_K], k)."""
    G, r, d, k = spec.G, spec.group_size, spec.d, spec.d_head_qk
    lead = w["W_Q"].shape[:-3]
    q = w["W_Q"].reshape(*lead, G, r, d, k)
    if "b_Q" in w:
        q = torch.cat((q, w["b_Q"].reshape(*lead, G, r, 1, k)), dim=-2)
    K = torch.cat((w["W_K"], w["b_K"][..., None, :]), dim=-2) if "b_K" in w else w["W_K"]
    return q.reshape(*lead, G, -1, k), K


def qk_unstack(spec: AttentionSpec, Q: torch.Tensor, K: torch.Tensor) -> dict:
    """Inverse of :func:`qk_stack`."""
    G, H, r, d, k = spec.G, spec.H, spec.group_size, spec.d, spec.d_head_qk
    lead = Q.shape[:-3]
    q = Q.reshape(*lead, G, r, -1, k)
    out = {"W_Q": q[..., :d, :].reshape(*lead, H, d, k), "W_K": K[..., :d, :]}
    if spec.has_bias("q"):
        out["b_Q"] = q[..., d, :].reshape(*lead, H, k)
    if spec.has_bias("k"):
        out["b_K"] = K[..., d, :]
    return out


def vo_stack(spec: AttentionSpec, w: dict, with_bias: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """V (..., G, d + [b_V], v) = [W_V^g; b_V^g]; O (..., G, r d, v) = [W_O^h^T] over the heads of each group."""
    V = torch.cat((w["W_V"], w["b_V"][..., None, :]), dim=-2) if with_bias and "b_V" in w else w["W_V"]
    return V, o_stack(spec, w["W_O"])


def o_stack_t(spec: AttentionSpec, W_O: torch.Tensor) -> torch.Tensor:
    """O^T (..., G, v, r d) = [W_O^h]_{h in g} side by side (a view of W_O (..., H, v, d) when r = 1)."""
    G, r, d, v = spec.G, spec.group_size, spec.d, spec.d_head_v
    return W_O.reshape(*W_O.shape[:-3], G, r, v, d).movedim(-3, -2).reshape(*W_O.shape[:-3], G, v, r * d)


def o_unstack_t(spec: AttentionSpec, Ot: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`o_stack_t`: W_O (..., H, v, d)."""
    G, r, d, v = spec.G, spec.group_size, spec.d, spec.d_head_v
    return Ot.reshape(*Ot.shape[:-3], G, v, r, d).movedim(-2, -3).reshape(*Ot.shape[:-3], G * r, v, d)


def o_stack(spec: AttentionSpec, W_O: torch.Tensor) -> torch.Tensor:
    """O (..., G, r d, v): the transposed output matrices W_O^h^T stacked per group (= o_stack_t(...)^T)."""
    return o_stack_t(spec, W_O).mT


def vo_unstack(spec: AttentionSpec, V: torch.Tensor, O: torch.Tensor) -> dict:
    """Inverse of :func:`vo_stack` (V with or without the b_V row)."""
    d = spec.d
    out = {"W_V": V[..., :d, :], "W_O": o_unstack_t(spec, O.mT)}
    if V.shape[-2] > d:
        out["b_V"] = V[..., d, :]
    return out


def blocks64(spec: AttentionSpec, theta: torch.Tensor) -> dict:
    """Named float64 views of theta (P,) (a copy when theta is not float64)."""
    return Layout(spec).unflatten(theta.to(COMPUTE_DTYPE))


def part_mask(spec: AttentionSpec, part: str, device=None) -> torch.Tensor:
    """Bool (P,): the coordinates of a part (query_key: W_Q, b_Q, W_K, b_K; value_output: the rest)."""
    check_part(part)
    layout = Layout(spec)
    mask = torch.zeros(layout.size, dtype=torch.bool, device=device)
    for name in PART_BLOCKS[part]:
        if name in layout:
            mask[layout.blocks[name].slice] = True
    return mask
