"""Conserved quantities of gradient flow: the imbalances Q^T Q - K^T K and V^T V - O O^T per group.

For each generator X of the symmetry group the function is invariant along t -> act(exp(tX)), so
<grad L, tangent(X)> = 0 and d/dt <X, Q^T Q - K^T K> = 0 under gradient flow (Noether; Kunin et
al., ICLR 2021). Under RoPE only the commutant generators count: the unrotated block of the
difference and, per rotated plane, the difference of squared norms (the rotation generator J
gives no law). A finite step of size lr changes them by O(lr^2) (measured by the training runs).
"""

from __future__ import annotations

import torch

from ..layer.spec import AttentionSpec
from .group import commutant
from .stacks import PARTS, blocks64, qk_stack, vo_stack


def imbalance(spec: AttentionSpec, theta: torch.Tensor) -> dict:
    """The conserved quantities of gradient flow (Noether for the group action), float64.

    query_key (G, k, k): commutant(Q_g^T Q_g - K_g^T K_g) — the unrotated block of the difference of
      Grams ([W_Q; b_Q] stacked over the group's heads vs [W_K; b_K]) and, per rotated plane,
      (||Q_plane||^2 - ||K_plane||^2) / 2 times I_2 (the J-part of a symmetric matrix is zero);
    value_output (G, v, v): W_V^T W_V + b_V^T b_V - sum_{h in g} W_O^h W_O^h^T.
    For each generator X of the group, d/dt <X, Q^T Q - K^T K> = -2 <grad, tangent(X)> = 0 under
    gradient flow (Kunin et al., ICLR 2021); a gradient step of size lr changes them by O(lr^2).
    """
    w = blocks64(spec, theta)
    Q, K = qk_stack(spec, w)
    V, O = vo_stack(spec, w)
    return {"query_key": commutant(spec, Q.mT @ Q - K.mT @ K), "value_output": V.mT @ V - O.mT @ O}


def imbalance_reference(spec: AttentionSpec, theta0: torch.Tensor) -> dict:
    """What :func:`imbalance_drift` needs of theta0 (..., P), computed once: {"imbalance": ..., "scale": ...}.

    scale (...,) = ||Q^T Q||_F + ||K^T K||_F (query_key), ||V^T V||_F + ||O^T O||_F (value_output), the
    norms over all groups; for stacked points theta0 (M, P) one scale per point (M,).
    """
    w = blocks64(spec, theta0)
    Q, K = qk_stack(spec, w)
    V, O = vo_stack(spec, w)
    gram = lambda x: (x.mT @ x).flatten(-3).norm(dim=-1)  # (..., G, n, k) -> (...,): ||x^T x||_F over the groups
    scale = {"query_key": gram(Q) + gram(K), "value_output": gram(V) + gram(O)}
    return {"imbalance": imbalance(spec, theta0), "scale": scale}


def imbalance_drift(
    spec: AttentionSpec, theta0: torch.Tensor | None, theta1: torch.Tensor, reference: dict | None = None
) -> dict:
    """Relative change of the conserved quantities at one point: ||I(theta1) - I(theta0)||_F / scale(theta0).

    scale (:func:`imbalance_reference`) stays away from zero even at a balanced point where I = 0.
    `reference` = imbalance_reference(spec, theta0) skips recomputing theta0's part (theta0 may then be None).
    """
    ref = reference or imbalance_reference(spec, theta0)
    i1 = imbalance(spec, theta1)
    return {part: ((i1[part] - ref["imbalance"][part]).norm() / ref["scale"][part]).item() for part in PARTS}
