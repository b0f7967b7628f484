r"""The predicted null space of J, from the symmetry package, and directions that must stay outside it.

Predicted null space. :class:`attnid.symmetry.Projector` is the orthogonal projection onto the
unidentified subspace T at theta, built from the structure of the layer (per group the product
kernels of the query-key and value-output pairs, the RoPE commutant on each rotated plane, the
key bias on unrotated dims, the value-bias constant), independently of :mod:`attnid.layer.counting`.
Its range, sampled as V = P_T Omega for n = min(P, count + 8) Gaussian vectors Omega, spans T
with probability one (rank V = dim T whenever dim T <= n, and rank V > count whenever dim T
exceeds the count). Three judges then meet: dim span V must equal the count, and J V must vanish
(||J Q|| <= RANK_RTOL sigma_max for an orthonormal basis Q of span V); together with the measured
rank this is the two-sided certificate (rank J <= P - dim T from J Q = 0, rank J >= P - count from
the singular values or the Cholesky of the complement).

Outside directions (:func:`outside_directions`), each of which J must see (||J v|| > RANK_RTOL
sigma_max ||v||): a random direction; under RoPE the orbit tangent of a generic M minus its
commutant part (a rotation-breaking change of basis); with shared keys (GQA/MQA) the tangent of a
commuting M given to the first query head only (its key, shared with the other heads, cannot
follow). Tangents come from :func:`attnid.symmetry.orbit_tangent`, the linearised group action.
"""

from __future__ import annotations

import torch

from ..layer.counting import count
from ..layer.spec import AttentionSpec
from ..symmetry import Projector, commutant, orbit_tangent
from .dense import RANK_RTOL, numerical_rank

EXTRA_SAMPLES = 8  # Gaussian vectors beyond the count, so that a larger dim T would show


def symmetry_directions(spec: AttentionSpec, theta: torch.Tensor, seed: int = 0, extra: int = EXTRA_SAMPLES):
    """V (n, P) = (P_T Omega^T)^T for n = min(P, count + extra) Gaussian rows Omega (module docstring)."""
    P = theta.numel()
    n = min(P, count(spec, check=False).unidentified + extra)
    gen = torch.Generator().manual_seed(int(seed) + 6007)
    omega = torch.randn(n, P, generator=gen, dtype=torch.float64).to(theta.device)
    return Projector(spec, theta.to(torch.float64))(omega).to(theta.dtype)


def orthonormal_basis(V: torch.Tensor, rtol: float = RANK_RTOL) -> torch.Tensor:
    """Q (P, rank V): orthonormal basis of the row span of V (n, P).

    Rows are normalised, then V^T = Q_0 R (thin QR, 2 P n^2 flops) and R = U S W^T (n x n SVD):
    the rank is the number of relative singular values above rtol and Q = Q_0 U[:, :rank].
    """
    if V.shape[0] == 0:
        return V.new_zeros(V.shape[1], 0)
    V = V / V.norm(dim=1, keepdim=True).clamp_min(torch.finfo(V.dtype).tiny)
    Q0, R = torch.linalg.qr(V.mT)  # (P, n), (n, n)
    U, s, _ = torch.linalg.svd(R)
    return Q0 @ U[:, : numerical_rank(s, rtol)["rank"]]


def outside_directions(spec: AttentionSpec, theta: torch.Tensor, seed: int = 0) -> dict:
    """Directions that must NOT be in the null space: name -> (P,) (module docstring)."""
    gen = torch.Generator().manual_seed(seed + 7919)
    k = spec.d_head_qk
    out = {"random": torch.randn(theta.numel(), generator=gen, dtype=theta.dtype).to(theta.device)}
    M = torch.randn(1, k, k, generator=gen, dtype=theta.dtype).to(theta.device)
    if spec.rope_dims:
        out["noncommuting"] = orbit_tangent(spec, theta, qk=M - commutant(spec, M))[0].to(theta.dtype)
    if spec.group_size > 1:
        out["unshared"] = orbit_tangent(spec, theta, qk=commutant(spec, M), query_heads=[0])[0].to(theta.dtype)
    return out


def direction_checks(
    spec: AttentionSpec, theta: torch.Tensor, apply_J, sigma_max_value: float, seed: int = 0, rtol: float = RANK_RTOL
) -> dict:
    """Predicted directions in the null space, others not. apply_J: U (n, P) -> J U^T as (n, rows).

    symmetry_rank: dim of the predicted null space; symmetry_residual: ||J Q||_F / sigma_max for an
    orthonormal basis Q (an upper bound of the largest singular value of J on span Q); outside_min:
    min over outside directions of ||J v|| / (sigma_max ||v||). Returns Q under "_Q".
    """
    Q = orthonormal_basis(symmetry_directions(spec, theta, seed), rtol)  # (P, m)
    squares = sum(float((apply_J(Q[:, i : i + 256].mT) ** 2).sum()) for i in range(0, Q.shape[1], 256))
    resid = squares**0.5 / sigma_max_value  # ||J Q||_F / sigma_max, J Q in column blocks of 256 (never all of it)
    outside = {
        name: float(apply_J(vec[None]).norm() / (sigma_max_value * vec.norm()))
        for name, vec in outside_directions(spec, theta, seed).items()
    }
    return {
        "symmetry_rank": Q.shape[1],
        "symmetry_residual": resid,
        "outside_min": min(outside.values()),
        **{f"outside_{name}": value for name, value in outside.items()},
        "_Q": Q,
    }
