r"""Certified P - rank J for large specs, without an SVD of J (a shifted Cholesky of a Gram matrix).

For P of about ten thousand and more a dense SVD takes hours; this proves the same equality.
(1) Q = orthonormal basis of the predicted null space (:mod:`attnid.jacobian.directions`),
m = rank Q; J Q = 0 gives the upper bound rank J <= P - m (numerically: ||J Q|| / sigma_max at
rounding level). (2) Pick m coordinates S by LU with partial pivoting of Q, so that Q[S, :] is
invertible (its condition number is reported) and no null direction lies in the span of the other
coordinates. rank J >= rank J[:, S^c], and J[:, S^c] has full column rank P - m iff
A = J[:, S^c]^T J[:, S^c] is positive definite. One pass over row blocks of J (per-sequence
jacrev, never all of J at once) accumulates in float64 A (lower block triangle only, half the flops
of a full product), the S columns of J^T J (so sigma_max^2 = lambda_max(J^T J) follows by power
iteration on the blocks, with no further product with the layer), ||J Q||^2 and the images of the
outside directions. (3) A Cholesky factorisation of A - delta I, delta = (CERT_RTOL sigma_max)^2 with
CERT_RTOL = 1e-5, succeeds only if lambda_min(A) > delta up to rounding; the backward error of
Cholesky and of forming A is ~ n eps ||A|| <= 2e-12 sigma_max^2 for n = 15,360, fifty times below
delta. Success certifies sigma_min(J[:, S^c]) >= ~CERT_RTOL sigma_max, hence rank J >= P - m, and
with (1), P - rank J = m.

sigma_kept is then estimated by inverse iteration with the factor: it is sigma_min(J[:, S^c]), a
lower bound of the smallest kept singular value of J (interlacing), and the margin is
log10(sigma_kept / CERT_RTOL). The Gram squares singular values, so the certificate cannot resolve
sigma below ~sqrt(n eps) ~ 1e-6 sigma_max: a spec whose smallest kept value lies below CERT_RTOL
is not certified (the dense method has no such floor). Cost: rows x (P - m)^2 / 2 flops for A
(rows ~ 1.25 P d / info) and (P - m)^3 / 3 for Cholesky; memory one (P - m)^2 matrix.
"""

from __future__ import annotations

import math
import time

import torch

from ..layer.spec import AttentionSpec
from .dense import RANK_RTOL
from .directions import orthonormal_basis, outside_directions, symmetry_directions
from .products import jacobian_rows
from .sizing import DTYPE, input_sizing, position_ids, random_point

CERT_RTOL = 1e-5  # relative singular value certified by the shifted Cholesky (module docstring)


def peak_memory_bytes() -> int:
    """Peak resident memory of this process (VmHWM; ru_maxrss where /proc is absent)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak_memory() -> None:
    """Reset VmHWM to the current resident size (Linux: write 5 to /proc/self/clear_refs); best effort."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def pivot_coordinates(Q: torch.Tensor) -> torch.Tensor:
    """m row indices S of Q (P, m) chosen by LU with partial pivoting (Q[S, :] is invertible)."""
    if Q.shape[1] == 0:
        return torch.zeros(0, dtype=torch.long)
    _, pivots = torch.linalg.lu_factor(Q)
    perm = list(range(Q.shape[0]))
    for i, piv in enumerate((pivots - 1).tolist()):  # LAPACK ipiv: row i was swapped with row piv
        perm[i], perm[piv] = perm[piv], perm[i]
    return torch.tensor(perm[: Q.shape[1]], dtype=torch.long)


def accumulate_gram(A: torch.Tensor, rows: torch.Tensor, block: int = 2048) -> None:
    """A += rows^T rows on the lower block triangle only (about half the flops of a full product)."""
    n = rows.shape[1]
    for i in range(0, n, block):
        for j in range(0, i + 1, block):
            A[i : i + block, j : j + block].addmm_(rows[:, i : i + block].mT, rows[:, j : j + block])


def _largest_eigenvalue(A, G_rs, G_ss, block: int, seed: int, iters: int = 50) -> float:
    """lambda_max of J^T J from its blocks (A: the S^c Gram, lower block triangle with full diagonal
    blocks; G_rs = J_{S^c}^T J_S; G_ss = J_S^T J_S), by power iteration (2 n^2 flops a step)."""
    n, m = G_rs.shape
    gen = torch.Generator().manual_seed(seed + 1)
    u = torch.randn(n + m, generator=gen, dtype=A.dtype).to(A.device)
    lam = 0.0
    for _ in range(iters):
        u = u / u.norm()
        ur, us = u[:n], u[n:]
        wr = A @ ur + A.mT @ ur + G_rs @ us  # the diagonal blocks are counted twice: remove once
        for i in range(0, n, block):
            wr[i : i + block] -= A[i : i + block, i : i + block] @ ur[i : i + block]
        w = torch.cat((wr, G_rs.mT @ ur + G_ss @ us))
        lam = float(u @ w)
        u = w
    return max(lam, 0.0)


def _smallest_eigenvalue(L: torch.Tensor, seed: int, iters: int = 20) -> float:
    """lambda_min of L L^T by inverse iteration with the Cholesky factor L (n, n)."""
    gen = torch.Generator().manual_seed(seed)
    y = torch.randn(L.shape[0], 1, generator=gen, dtype=L.dtype).to(L.device)
    lam = float("nan")
    for _ in range(iters):
        y = y / y.norm()
        z = torch.cholesky_solve(y, L)
        lam = 1.0 / float((y * z).sum())
        y = z
    return lam


def certify(
    spec: AttentionSpec, seed: int = 0, oversample: float = 1.25, device=None, rtol: float = RANK_RTOL, cert_rtol: float = CERT_RTOL,
    block: int = 2048, row_chunk_bytes: float = 2**28, log=print, dtype=DTYPE,
    seq_len: int | None = None, positions: str = "spread", frequencies=None,
) -> dict:  # fmt: skip
    """Certified P - rank J for a large spec without forming J (method in the module docstring).

    The row has the measurement (measured is None when not certified), its margins and the
    direction checks, timings, peak memory and threads; the verdict is left to the caller
    (:func:`attnid.jacobian.verify`).
    """
    start = time.perf_counter()
    reset_peak_memory()
    if torch.device(device or "cpu").type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    sizing = input_sizing(spec, oversample, seq_len=seq_len)
    theta, x = random_point(spec, sizing, seed, device, dtype)
    pos = position_ids(spec, sizing, seed, positions, x.device)
    timings = {}

    def lap(name, t0):
        timings[f"seconds_{name}"] = time.perf_counter() - t0
        log(f"[{spec.label}] {name}: {timings[f'seconds_{name}']:.1f} s, peak {peak_memory_bytes() / 2**30:.2f} GiB")

    t0 = time.perf_counter()
    null = _NullSpace(spec, theta, seed, rtol)
    lap("directions", t0)
    t0 = time.perf_counter()
    gram = _Gram(spec, theta, x, pos, frequencies, null, block, row_chunk_bytes, log)
    smax = math.sqrt(_largest_eigenvalue(gram.A, gram.G_rs, gram.G_ss, block, seed))
    dirs = {
        "symmetry_rank": null.m,
        "symmetry_residual": math.sqrt(gram.JQ2) / smax,
        "outside_min": float(gram.JU2.sqrt().min()) / smax,
        **{f"outside_{name}": float(v) / smax for name, v in zip(null.outside, gram.JU2.sqrt())},
    }
    lap("gram", t0)
    timings["seconds_jacobian_rows"] = gram.seconds_rows
    t0 = time.perf_counter()
    certified, sigma_kept = _shifted_cholesky(gram.A, smax, cert_rtol, seed)
    del gram
    lap("cholesky", t0)

    sigma_dropped = dirs["symmetry_residual"]
    row = {
        "measured": null.m if certified and sigma_dropped <= rtol else None,
        "sigma_kept": sigma_kept,
        "sigma_dropped": sigma_dropped,
        "gap": (math.log10(sigma_kept / sigma_dropped) if sigma_dropped > 0 else math.inf) if certified else math.nan,
        "margin": math.log10(sigma_kept / cert_rtol) if certified else float("nan"),
        "tokens": sizing.batch * sizing.seq_len,
        "tokens_per_sequence": sizing.seq_len,
        "certified": certified,
        "cert_rtol": cert_rtol,
        "pivot_condition": null.pivot_condition,
        **dirs,
        **timings,
        "peak_memory_bytes": peak_memory_bytes(),  # host (VmHWM)
    }
    if theta.device.type == "cuda":
        row["peak_gpu_memory_bytes"] = torch.cuda.max_memory_allocated(theta.device)
    row["threads"] = torch.get_num_threads()
    row["seconds"] = time.perf_counter() - start
    return row


class _NullSpace:
    """Step (1) and (2): Q (P, m) orthonormal on the predicted null space, U (P, o) the unit outside
    directions J must see (by name in `outside`), the pivot coordinates S and the rest S^c (P - m,)."""

    def __init__(self, spec: AttentionSpec, theta: torch.Tensor, seed: int, rtol: float):
        self.Q = orthonormal_basis(symmetry_directions(spec, theta, seed), rtol)  # (P, m)
        self.outside = outside_directions(spec, theta, seed)  # name -> (P,)
        self.U = torch.stack([vec / vec.norm() for vec in self.outside.values()], dim=1)  # (P, o)
        self.m = self.Q.shape[1]
        self.S = pivot_coordinates(self.Q).to(theta.device)
        keep = torch.ones(theta.numel(), dtype=torch.bool, device=theta.device)
        keep[self.S] = False
        self.rest = torch.nonzero(keep).squeeze(1)  # S^c
        self.pivot_condition = float(torch.linalg.cond(self.Q[self.S])) if self.m else 1.0


class _Gram:
    """One pass over row blocks of J (per-sequence jacrev): A = J[:, S^c]^T J[:, S^c] (lower block
    triangle), G_rs = J[:, S^c]^T J[:, S], G_ss = J[:, S]^T J[:, S], JQ2 = ||J Q||_F^2 and JU2 (o,) the
    squared norms of J U; seconds_rows is the part of the pass spent forming rows of J (autograd)."""

    def __init__(self, spec, theta, x, pos, frequencies, null: _NullSpace, block: int, row_chunk_bytes: float, log):
        n, m, P, like = null.rest.numel(), null.m, theta.numel(), {"dtype": theta.dtype, "device": theta.device}
        self.A, self.G_rs, self.G_ss = torch.zeros(n, n, **like), torch.zeros(n, m, **like), torch.zeros(m, m, **like)
        self.JQ2, self.JU2 = 0.0, torch.zeros(null.U.shape[1], **like)
        per_chunk = max(1, int(row_chunk_bytes // (x.shape[1] * spec.d_model * P * theta.element_size())))
        self.seconds_rows = 0.0
        for i in range(0, x.shape[0], per_chunk):
            t_rows = time.perf_counter()
            rows = jacobian_rows(spec, theta, x[i : i + per_chunk], pos[i : i + per_chunk], frequencies)  # (rows_c, P)
            self.seconds_rows += time.perf_counter() - t_rows
            rest_rows, s_rows = rows[:, null.rest], rows[:, null.S]
            accumulate_gram(self.A, rest_rows, block)
            self.G_rs.addmm_(rest_rows.mT, s_rows)
            self.G_ss.addmm_(s_rows.mT, s_rows)
            self.JQ2 += float((rows @ null.Q).square().sum())
            self.JU2 += (rows @ null.U).square().sum(0)
            del rows, rest_rows, s_rows
            log(f"[{spec.label}] gram: {min(i + per_chunk, x.shape[0])}/{x.shape[0]} sequences")


def _shifted_cholesky(A: torch.Tensor, smax: float, cert_rtol: float, seed: int) -> tuple[bool, float]:
    """Step (3): Cholesky of A - delta I, delta = (cert_rtol sigma_max)^2, in place (A's lower triangle
    becomes the factor L); (certified, sigma_kept = sqrt(lambda_min(L L^T) + delta) / sigma_max)."""
    delta = (cert_rtol * smax) ** 2
    A.diagonal().sub_(delta)
    info = torch.empty((), dtype=torch.int32, device=A.device)
    L, _ = torch.linalg.cholesky_ex(A, out=(A, info))
    certified = int(info) == 0
    sigma_kept = math.sqrt(_smallest_eigenvalue(L, seed) + delta) / smax if certified else float("nan")
    return certified, sigma_kept
