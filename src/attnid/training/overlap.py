"""The overlap of the runs' updates with the orbit of their attention layers, stacked over runs.

    overlap     ||P_T u|| / ||u|| with T the tangent space of the orbit at theta (attnid.symmetry.Projector,
                set up once for the stacked points, M rows at a time)
    gauge       the gauge-invariant overlap (`overlap_gauge`): theta_t moved to the balanced point of its orbit,
                theta_b = g theta_t (g a group element), the update carried along, u_b = g u_t (the action is
                linear), and the overlap of u_b with T at theta_b. Any other point h theta_t of the orbit with
                its update h u_t gives the same number (balancing h theta_t reaches theta_b up to an orthogonal
                map, which keeps norms and overlaps).
"""

from __future__ import annotations

import math

import torch

from .. import symmetry
from ..layer.layout import Layout


def stacked_projector(spec, theta: torch.Tensor):
    """u (M, P) -> P_T u at the stacked points theta (M, P), set up once for all of them."""
    if not len(theta):
        return lambda u: u.clone()
    return symmetry.Projector(spec, theta)


def gauge_overlap(spec, theta: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Overlap of u at theta after both are moved to the balanced point of the orbit; (M,) for (M, P).

    The group element is read off the stacked query-key and value-output matrices by least squares,
    M = Q^+ Q_b and N = V^+ V_b per group (exact when Q and V have full column rank, the generic case
    for head sizes up to d_model).
    """
    (Q, V), (Qb, Vb) = _stacks(spec, theta), _stacks(spec, symmetry.balance(spec, theta))
    M = torch.linalg.lstsq(Q, Qb).solution  # (M, G, k, k)
    N = torch.linalg.lstsq(V, Vb).solution  # (M, G, v, v)
    # A point whose stacked Q or V has lost column rank (training can drive a square W_Q there; measured at
    # teacher-student H = 1) has no invertible group element to its balanced point: its overlap there is not
    # defined (NaN), the other runs are measured.
    ok = _full_column_rank(Q) & _full_column_rank(V)
    out = torch.full((theta.shape[0],), math.nan, dtype=torch.float64, device=theta.device)
    if ok.any():
        theta_b = symmetry.act(spec, theta[ok], M[ok], N[ok])
        u_b = symmetry.act(spec, u[ok], M[ok], N[ok])
        out[ok] = (stacked_projector(spec, theta_b)(u_b).norm(dim=-1) / u_b.norm(dim=-1)).to(torch.float64)
    return out


def _full_column_rank(X: torch.Tensor) -> torch.Tensor:
    """(M,) whether every group's stacked matrix X (M, G, m, n) has rank n (attnid.symmetry's SVD tolerance)."""
    if X.shape[-2] < X.shape[-1]:
        return torch.zeros(X.shape[0], dtype=torch.bool, device=X.device)
    s = torch.linalg.svdvals(X)  # (M, G, n)
    return symmetry.nonzero_singular(s, max(X.shape[-2:])).flatten(1).all(1)


def _stacks(spec, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The stacked query and value matrices Q (M, G, r m_q, k), V (M, G, d + [b_V], v) in float64."""
    w = Layout(spec).unflatten(theta.to(symmetry.COMPUTE_DTYPE))
    return symmetry.qk_stack(spec, w)[0], symmetry.vo_stack(spec, w)[0]
