"""The balanced point of an orbit: the same function at the smallest parameter norm.

For a product A B^T the minimum of ||A||^2 + ||B||^2 over factorisations is 2 ||A B^T||_* (the
nuclear norm), reached where A^T A = B^T B; :func:`balance` applies this per KV group to the
unrotated query-key columns and to the value-output pair, and scales each rotated plane's query
and key columns to equal norms (its group is C^*). When a head is wider than what a factor can
see (u > d or d_v > d) the infimum is not attained inside the orbit: the code returns the limit,
which zeroes the components the other factor cannot see (the same function, smaller norm).
"""

from __future__ import annotations

import torch

from ..layer.layout import Layout
from ..layer.spec import AttentionSpec
from .linalg import nonzero_singular, serial
from .stacks import blocks64, qk_stack, qk_unstack, vo_stack, vo_unstack


def balance_product(A: torch.Tensor, B: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The balanced factorisation of A B^T nearest to (A, B); A (G, m, n), B (G, c, n).

    With A = Q_a R_a, B = Q_b R_b (thin QR) and R_a R_b^T = U S V^T (SVD, rank rho), every minimiser
    of ||A'||^2 + ||B'||^2 subject to A' B'^T = A B^T is (Q_a U S^{1/2} R, Q_b V S^{1/2} R) with
    R R^T = I (the nuclear-norm identity min ||A'||^2 + ||B'||^2 = 2 ||A B^T||_*; Srebro et al. 2005);
    all satisfy A'^T A' = B'^T B' = R^T S R. We take the R nearest to (A, B): the orthogonal polar
    factor of S^{1/2} (U^T R_a + V^T R_b) (orthogonal Procrustes), so a balanced point is fixed.
    When A^T A and B^T B are invertible (n <= m, c) the minimisers are the GL(n)-balanced points
    A X^{1/2} O, O orthogonal, X = (A^T A)^{-1} # (B^T B) the matrix geometric mean (the unique
    positive solution of X A^T A X = B^T B; Bhatia, "Positive Definite Matrices", 2007, ch. 4; the
    norm-minimising point of the orbit, Stock et al., ICLR 2019). When n > m or n > c the infimum
    over the orbit is not attained; we return its limit, which zeroes the components that the
    other factor cannot see.
    """
    if A.shape[-1] == 0:
        return A.clone(), B.clone()
    with serial():
        Qa, Ra = torch.linalg.qr(A)
        Qb, Rb = torch.linalg.qr(B)
        U, s, Vh = torch.linalg.svd(Ra @ Rb.mT, full_matrices=False)  # (G, n1, q), (G, q), (G, q, n2)
    s = s * nonzero_singular(s, max(Ra.shape[-2], Rb.shape[-2]))  # singular values: an SVD's tolerance
    root = s.sqrt()[..., None]  # (G, q, 1)
    with serial():
        W, _, Zh = torch.linalg.svd(root * (U.mT @ Ra + Vh @ Rb), full_matrices=False)
    R = W @ Zh  # (G, q, n), orthonormal rows
    return Qa @ U @ (root * R), Qb @ Vh.mT @ (root * R)


def balance(spec: AttentionSpec, theta: torch.Tensor) -> torch.Tensor:
    """The balanced point of theta's orbit: same function, minimal norm, zero imbalance.

    Per KV group g:
      * unrotated query-key dims: (Q_g[:, p:], K_g[:, p:]) -> :func:`balance_product` (b_Q and b_K rows
        included, as the group acts on them), so afterwards Q_g^T Q_g = K_g^T K_g on those dims;
      * each rotated plane (complex scalar group C^*): scale the plane's query columns by
        s = (||K_plane|| / ||Q_plane||)^{1/2} and its key columns by 1/s, so that both norms equal
        (||Q_plane|| ||K_plane||)^{1/2} (the minimum of |c|^2 ||z||^2 + ||w||^2 / |c|^2 over c);
      * value-output: (V_g, O_g) = ([W_V; b_V], [W_O^h^T]) -> :func:`balance_product`, so afterwards
        W_V^T W_V + b_V^T b_V = sum_{h in g} W_O^h W_O^h^T.
    The free translations (unrotated key bias, value bias traded against b_O) are left as they are.
    Idempotent; the function is unchanged (the products the function sees are kept exactly).
    """
    p = spec.rope_dims
    w = blocks64(spec, theta)
    Q, K = (t.clone() for t in qk_stack(spec, w))
    if p < spec.d_head_qk:
        Q[..., p:], K[..., p:] = balance_product(Q[..., p:], K[..., p:])
    if p:
        Qp, Kp = Q[..., :p].unflatten(-1, (p // 2, 2)), K[..., :p].unflatten(-1, (p // 2, 2))  # (G, m, p/2, 2)
        nq, nk = Qp.norm(dim=(-3, -1)), Kp.norm(dim=(-3, -1))  # (G, p/2)
        seen = (nq > 0) & (nk > 0)  # a plane with a zero side contributes nothing: set both to zero
        s = torch.where(seen, (nk / torch.where(seen, nq, 1)).sqrt(), 0)[..., None, :, None]
        Q[..., :p] = (Qp * s).flatten(-2)
        K[..., :p] = (Kp * torch.where(s > 0, 1 / torch.where(s > 0, s, 1), 0)).flatten(-2)
    V, O = balance_product(*vo_stack(spec, w))
    out = dict(w)
    out.update(qk_unstack(spec, Q, K))
    out.update(vo_unstack(spec, V, O))
    return Layout(spec).flatten(out).to(theta.dtype)
