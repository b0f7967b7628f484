r"""Dense rank: form J, take all its singular values, count those above the tolerance.

For small P (up to a few thousand parameters) J (B T d rows, P columns) fits in memory and its
singular values are computed in float64 in two steps (:func:`tall_svdvals`): a Householder QR
J = Q R (R: P x P upper triangular), then ``torch.linalg.svdvals(R)``. Q has orthonormal columns,
so J^T J = R^T R and the singular values of R are those of J exactly in exact arithmetic; in
floating point Householder QR is backward stable (R is the exact factor of J + E with
||E|| <= c P eps ||J||), so the rounding floor stays at ~1e-15 sigma_max (measured: the kept values
agree with a direct svdvals of J to 1e-12 relative, tests). The half-batch re-measure reuses the
first half's factor: R_half = R(J[:rows/2]), then R = R([R_half; J[rows/2:]]) (a two-step TSQR, the
same R up to row signs), so J is reduced once instead of twice. Measured on one core (python
benchmarks/jacobian.py): 1.3x less CPU time than ``svdvals(J)`` and ``svdvals(J[:rows/2])`` at
P = 1,088 and 2,400, with identical ranks; the P x P SVD of R (8/3 P^3 flops, half of them
memory-bound) is what remains. A singular value counts when
sigma_i > RANK_RTOL sigma_max, RANK_RTOL = 1e-10. Justification, measured: the singular values
of the null space are rounding noise, ~1e-16..1e-15 sigma_max (eps = 2.2e-16 times a modest
factor); the genuine ones go down to ~1e-3..1e-6 sigma_max (slow RoPE planes, heads above
d_model). Each measurement reports both sides, never only the verdict:

    sigma_kept     smallest kept singular value / sigma_max
    sigma_dropped  largest dropped singular value / sigma_max (0 if none)
    gap            log10(sigma_kept / sigma_dropped)           decades between the two sides
    margin         log10(sigma_kept / RANK_RTOL)               decades of the kept side over the tolerance

The measured rank is a lower bound on the generic rank (rank is lower semicontinuous) only when
sigma_kept is far above rounding, so a small margin means "cannot decide", whatever the gap: a
kept value at 1.6e-10 against a tolerance of 1e-10 could be a rotated plane that barely turned or
noise. :mod:`attnid.jacobian.verify` turns margin and gap into the status.
"""

from __future__ import annotations

import math

import torch

from ..layer.spec import AttentionSpec
from .products import jacobian_rows
from .sizing import DTYPE, input_sizing, position_ids, random_point

RANK_RTOL = 1e-10  # relative singular-value threshold of the dense rank (module docstring)


def numerical_rank(sigma: torch.Tensor, rtol: float = RANK_RTOL) -> dict:
    """Rank of singular values `sigma` (any order): count of sigma_i > rtol * max, with both sides.

    Returns rank, sigma_kept (smallest kept / max), sigma_dropped (largest dropped / max, 0 if none),
    gap = log10(sigma_kept / sigma_dropped) in decades (inf if nothing is dropped) and
    margin = log10(sigma_kept / rtol) in decades.
    """
    s = torch.sort(sigma.detach().abs().to(torch.float64).cpu(), descending=True).values
    if s.numel() == 0 or s[0] == 0:
        nan = float("nan")
        return {"rank": 0, "sigma_kept": nan, "sigma_dropped": 0.0 if s.numel() else nan, "gap": nan, "margin": nan}
    rel = s / s[0]
    rank = int((rel > rtol).sum())
    kept = float(rel[rank - 1])
    dropped = float(rel[rank]) if rank < rel.numel() else 0.0
    gap = math.log10(kept / dropped) if dropped > 0 else float("inf")
    return {"rank": rank, "sigma_kept": kept, "sigma_dropped": dropped, "gap": gap, "margin": math.log10(kept / rtol)}


def tall_svdvals(J: torch.Tensor) -> torch.Tensor:
    """Singular values of J (m, n), descending: svdvals of the QR factor R when m > n (module docstring)."""
    return torch.linalg.svdvals(triangular_factor(J) if J.shape[0] > J.shape[1] else J)


def triangular_factor(J: torch.Tensor) -> torch.Tensor:
    """R (min(m, n), n) of the Householder QR J = Q R; same singular values as J."""
    return torch.linalg.qr(J, mode="r").R


def measure(
    spec: AttentionSpec,
    seed: int = 0,
    oversample: float = 3.0,
    device=None,
    rtol: float = RANK_RTOL,
    half: bool = False,
    dtype=DTYPE,
    seq_len: int | None = None,
    positions: str = "spread",
    frequencies=None,
):
    """Dense measurement at one random point: (result dict, J, theta, x, relative singular values).

    result: rank, measured = P - rank, sigma_kept, sigma_dropped, gap, margin, sigma_max, tokens,
    tokens_per_sequence (T); with half=True also measured_half, from the first half of the sequences (same theta).
    seq_len fixes T (default: the sizing rule); positions is the RoPE position rule
    (:func:`attnid.jacobian.sizing.position_ids`); frequencies (p/2,) replace base^(-2i/p).
    """
    sizing = input_sizing(spec, oversample, seq_len=seq_len)
    theta, x = random_point(spec, sizing, seed, device, dtype)
    pos = position_ids(spec, sizing, seed, positions, x.device)
    J = jacobian_rows(spec, theta, x, pos, frequencies)  # (B T d, P)
    P = J.shape[1]
    rows = (sizing.batch // 2) * sizing.seq_len * spec.d_model  # the first half of the sequences
    if half:  # two-step TSQR: the first half's factor, then the factor of [R_half; second half]
        R_half = triangular_factor(J[:rows])  # (min(rows, P), P)
        sigma_half = torch.linalg.svdvals(R_half)
        sigma = tall_svdvals(torch.cat((R_half, J[rows:])))
        del R_half
    else:
        sigma = tall_svdvals(J)
    rank = numerical_rank(sigma, rtol)
    result = {
        **rank,
        "measured": P - rank["rank"],
        "sigma_max": float(sigma.max()),
        "tokens": sizing.batch * sizing.seq_len,
        "tokens_per_sequence": sizing.seq_len,
    }
    if half:
        result["measured_half"] = P - numerical_rank(sigma_half, rtol)["rank"]
    return result, J, theta, x, (sigma / sigma.max()).cpu()


def singular_values(
    spec: AttentionSpec, seed: int = 0, oversample: float = 3.0, device=None, dtype=DTYPE, positions: str = "spread"
) -> torch.Tensor:
    """All P singular values of J / sigma_max, descending (for the spectrum figure)."""
    return measure(spec, seed, oversample, device, dtype=dtype, positions=positions)[4]
