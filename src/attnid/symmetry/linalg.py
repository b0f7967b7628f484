"""Small dense linear algebra shared by the projector and the balance: serial LAPACK, Gram ranks.

The symmetry tools solve many tiny problems (k x k and v x v Grams per KV group). Two conventions
hold everywhere: (1) those factorisations run on one thread each (:func:`serial`); (2) an eigenvalue a of
a PSD Gram of size n counts as nonzero when a > GRAM_RTOL * n * max(a) in float64 (GRAM_RTOL =
1e3 eps: rounding of a Gram is ~n eps ||G||), or a > GRAM_RTOL_FLOAT32 * max(a) in float32; (3) the
projector's factors are decomposed by their SVD, not their Grams (:func:`factor_eigs`), and a singular value
s of an (m, n) factor counts as zero when s <= max(m, n) eps max(s) (SIGMA_RTOL: numpy.linalg.matrix_rank's
default tolerance, the rounding of a computed SVD).
(The Jacobian's singular-value tolerance is another quantity: :data:`attnid.jacobian.RANK_RTOL`.)
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

GRAM_RTOL = 1e3 * torch.finfo(torch.float64).eps  # float64: Gram eigenvalue a is zero if a < GRAM_RTOL * size * max(a)
GRAM_RTOL_FLOAT32 = 100 * torch.finfo(torch.float32).eps  # float32 Grams: zero if a < GRAM_RTOL_FLOAT32 * max(a)
SIGMA_RTOL = torch.finfo(torch.float64).eps  # a factor's singular value is zero if s <= SIGMA_RTOL * max(m, n) * max(s)


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


def factor_eigs(X: torch.Tensor, transposed: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a, U, mask) of the Gram of a factor from the factor's SVD, in float64: X (..., m, n) -> X^T X = U diag(a) U^T
    (transposed: X (..., n, m) -> X X^T), a (..., n) = s^2 padded with zeros, U (..., n, n), mask (..., n): a's
    nonzero entries (s > SIGMA_RTOL max(m, n) max(s)).

    Why not eigh of the Gram: its small eigenvalues carry an absolute error ~n eps max(a), so a factor whose
    singular values span more than ~1e6 (a value matrix driven towards low rank by training, smallest
    singular value 7e-7 of its largest: measured) cannot be told from a rank-deficient one, and the kernel's
    dimension flips. The SVD resolves singular values down to ~eps max(s), where the Jacobian's own rank
    tolerance (1e-10) sits well above."""
    X = X.to(torch.float64)
    with serial():
        if transposed:
            U, s, _ = torch.linalg.svd(X, full_matrices=True)  # X = U diag(s) W^T: X X^T = U diag(s^2) U^T
        else:
            _, s, Vh = torch.linalg.svd(X, full_matrices=True)
            U = Vh.mT
    m, n = X.shape[-1] if transposed else X.shape[-2], U.shape[-1]
    mask = nonzero_singular(s, max(m, n))
    pad = n - s.shape[-1]
    a = torch.nn.functional.pad(s.square() * mask, (0, pad))
    return a, U, torch.nn.functional.pad(mask, (0, pad))


def nonzero_singular(s: torch.Tensor, size: int) -> torch.Tensor:
    """Mask of singular values (..., q) of a computed SVD of a matrix of largest side `size` that are numerically
    nonzero: s > SIGMA_RTOL size max(s)."""
    top = s.amax(dim=-1, keepdim=True) if s.shape[-1] else s.new_zeros(*s.shape[:-1], 1)
    return s > SIGMA_RTOL * max(size, 1) * top


def nonzero(eigs: torch.Tensor, size: int) -> torch.Tensor:
    """Mask of eigenvalues of a PSD Gram matrix that are numerically nonzero (..., n)."""
    top = eigs.amax(dim=-1, keepdim=True).clamp_min(0)
    rtol = GRAM_RTOL * max(size, 1) if eigs.dtype == torch.float64 else GRAM_RTOL_FLOAT32
    return eigs > rtol * top


def safe_inverse(x: torch.Tensor) -> torch.Tensor:
    """1 / x where x > 0, else 0."""
    return torch.where(x > 0, 1 / torch.where(x > 0, x, 1), 0)
