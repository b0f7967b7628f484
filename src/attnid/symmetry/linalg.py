"""Small dense linear algebra shared by the projector and the balance: serial LAPACK, Gram ranks.

The symmetry tools solve many tiny problems (k x k and v x v Grams per KV group). Two conventions
hold everywhere: (1) those factorisations run on one thread each (:func:`serial`), spread over
torch's thread budget by a pool when there are several (:func:`eigh_all`); (2) an eigenvalue a of
a PSD Gram of size n counts as nonzero when a > GRAM_RTOL * n * max(a) in float64 (GRAM_RTOL =
1e3 eps: rounding of a Gram is ~n eps ||G||), or a > GRAM_RTOL_FLOAT32 * max(a) in float32.
(The Jacobian's singular-value tolerance is another quantity: :data:`attnid.jacobian.RANK_RTOL`.)
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch

GRAM_RTOL = 1e3 * torch.finfo(torch.float64).eps  # float64: Gram eigenvalue a is zero if a < GRAM_RTOL * size * max(a)
GRAM_RTOL_FLOAT32 = 100 * torch.finfo(torch.float32).eps  # float32 Grams: zero if a < GRAM_RTOL_FLOAT32 * max(a)


@contextmanager
def serial():
    """Run small dense factorizations (eigh, QR, SVD, Cholesky of k x k matrices) on one thread.

    Batched LAPACK calls on tiny matrices gain nothing from threads and, on a busy machine, lose up
    to 10x to thread contention (measured: eigh of 32 64x64 matrices, 2 threads 20-200 ms, 1 thread 8-20 ms).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def eigh_all(grams: list[torch.Tensor]) -> list:
    """torch.linalg.eigh of each matrix batch, single-threaded each, spread over torch's thread budget."""
    threads = torch.get_num_threads()
    with serial():
        if threads == 1 or len(grams) == 1:
            return [torch.linalg.eigh(g) for g in grams]
        with ThreadPoolExecutor(min(threads, len(grams))) as pool:
            return list(pool.map(torch.linalg.eigh, grams))


def nonzero(eigs: torch.Tensor, size: int) -> torch.Tensor:
    """Mask of eigenvalues of a PSD Gram matrix that are numerically nonzero (..., n)."""
    top = eigs.amax(dim=-1, keepdim=True).clamp_min(0)
    rtol = GRAM_RTOL * max(size, 1) if eigs.dtype == torch.float64 else GRAM_RTOL_FLOAT32
    return eigs > rtol * top


def safe_inverse(x: torch.Tensor) -> torch.Tensor:
    """1 / x where x > 0, else 0."""
    return torch.where(x > 0, 1 / torch.where(x > 0, x, 1), 0)
