"""The symmetry toolkit: orbit tangent space, projection, rebalancing, conserved quantities.

Notation (row convention, see :mod:`attnid.spec`): H query heads in G KV groups of r = H/G heads,
d = d_model, k = d_head_qk split into p rotated dims (the first p, planes (0,1),(2,3),...) and
u = k - p unrotated ones, v = d_head_v. Per group g two stacked matrices carry each side:

    query-key     Q_g = [W_Q^h; b_Q^h]_{h in g}   (r m_q, k),  m_q = d + [b_Q]
                  K_g = [W_K^g; b_K^g]            (d + [b_K], k)
    value-output  V_g = [W_V^g; b_V^g]            (d + [b_V], v)
                  O_g = [W_O^h^T]_{h in g}        (r d, v)

Group action (:func:`act`): Q_g -> Q_g M, K_g -> K_g M^{-T}, V_g -> V_g N, O_g -> O_g N^{-T}, i.e.
W_O^h -> N^{-1} W_O^h, with M in the commutant of the RoPE rotations (block-diag of gl(u) on the
unrotated dims and a I + b J on each rotated plane) and N in gl(v); b_O is not acted on.

Unidentified subspace T at theta (the Jacobian null space; :func:`project`): the function sees
only (i) per group the products A B^T of the unrotated query/key columns, A = Q_g[:, p:] (b_Q rows
included) and B = W_K^g[:, p:]; (ii) per rotated plane the complex rank-one product z w^* of the
plane's query columns z (stacked, incl. b_Q) and key columns w (incl. b_K); (iii) per group the
products W_V^g W_O^h; (iv) the constant c = sum_g b_V^g S_g + b_O, S_g = sum_{h in g} W_O^h. Hence

    T = ker dL_qk(A, B)  (+)  span{(z, -w), (z J, w J)} per plane  (+)  {db_K on unrotated dims}
        (+)  {(dW_V, dW_O, db_V, db_O): (dW_V, dW_O) in ker dL_vo,  d c = 0}

with dL(A, B)(dA, dB) = dA B^T + A dB^T. For a product (A, B), A (m, n), B (c, n), the kernel is

    ker dL = {(A M + Z_1, -B M^T + Z_2) : M in gl(n), Z_1 B^T = 0, A Z_2^T = 0},

the orbit tangent plus, when n exceeds m or c (head sizes above d_model, or GQA stacks), the
directions that one factor cannot see; then the generators M are not independent. Its dimension
is attnid.counting's fibre n (m + c) - rho (m + c - rho), rho = min(n, m, c).

Orthogonal projection onto ker dL (:class:`ProductKernel`). With the Gram eigendecompositions
A^T A = U diag(a) U^T, B^T B = V diag(b) V^T, Pi_A, Pi_B the projectors onto the row spaces of A
and B, the space splits orthogonally into the invisible parts (dA (I - Pi_B), dB (I - Pi_A)) and
{(A M Pi_B, -B M^T Pi_A)}; least squares over M gives the Sylvester-type normal equation

    A^T A M Pi_B + Pi_A M B^T B = A^T dA Pi_B - Pi_A dB^T B,

diagonal in the eigenbases: (U^T M V)_ij = (U^T R V)_ij / (a_i [b_j > 0] + [a_i > 0] b_j). For
n <= m, c (the usual case) this is the Sylvester equation (A^T A) M + M (B^T B) = A^T dA - dB^T B.
Cost per group O(m n^2 + c n^2): never a P x P matrix.

Value-bias coupling: the constraint d c = 0 couples the groups through one d-vector equation
Phi x = 0 (Phi x = db_O + sum_g db_V^g S_g + sum_g b_V^g dS_g). With P_K the projection onto the
product kernels (identity on db_V, db_O), P_T = P_K - P_K Phi^T (Phi P_K Phi^T)^+ Phi P_K; the
d x d matrix Phi P_K Phi^T is assembled in closed form from the per-group eigenbases (see
:meth:`_ValueBias.gram`).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch

from .counting import count
from .layout import Layout
from .spec import AttentionSpec

PARTS = ("query_key", "value_output")
PART_BLOCKS = {"query_key": ("W_Q", "b_Q", "W_K", "b_K"), "value_output": ("W_V", "b_V", "W_O", "b_O")}
COMPUTE_DTYPE = torch.float64  # small solves run in float64 whatever the parameter dtype
RANK_RTOL = 1e3 * torch.finfo(torch.float64).eps  # float64: Gram eigenvalue a is zero if a < RANK_RTOL * size * max(a)
RANK_RTOL_FLOAT32 = 100 * torch.finfo(torch.float32).eps  # float32 Grams: zero if a < RANK_RTOL_FLOAT32 * max(a)


# --------------------------------------------------------------------------------------------
# Layout <-> per-group stacked matrices (all functions accept leading batch dims "...")
# --------------------------------------------------------------------------------------------


def _check_part(part):
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


def _blocks64(spec: AttentionSpec, theta: torch.Tensor) -> dict:
    return Layout(spec).unflatten(theta.to(COMPUTE_DTYPE))


# --------------------------------------------------------------------------------------------
# Sizes
# --------------------------------------------------------------------------------------------


def part_mask(spec: AttentionSpec, part: str, device=None) -> torch.Tensor:
    """Bool (P,): the coordinates of a part (query_key: W_Q, b_Q, W_K, b_K; value_output: the rest)."""
    _check_part(part)
    layout = Layout(spec)
    mask = torch.zeros(layout.size, dtype=torch.bool, device=device)
    for name in PART_BLOCKS[part]:
        if name in layout:
            mask[layout.blocks[name].slice] = True
    return mask


def subspace_dim(spec: AttentionSpec, part: str | None = None) -> int:
    """dim T (or of one part) from attnid.counting: query_key = query_key + key_bias, value_output = value_output + value_bias."""
    _check_part(part)
    b = count(spec).breakdown
    dims = {"query_key": b["query_key"] + b["key_bias"], "value_output": b["value_output"] + b["value_bias"]}
    return sum(dims.values()) if part is None else dims[part]


def chance_overlap(spec: AttentionSpec, part: str | None = None) -> float:
    """sqrt(dim / n): the root-mean-square overlap ||P_T x|| / ||x|| of an isotropic random x (n coordinates)."""
    n = Layout(spec).size if part is None else int(part_mask(spec, part).sum())
    return math.sqrt(subspace_dim(spec, part) / n)


# --------------------------------------------------------------------------------------------
# Projection onto the kernel of (dA, dB) -> dA B^T + A dB^T, batched over groups
# --------------------------------------------------------------------------------------------


@contextmanager
def _serial():
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


def _eigh_all(grams: list[torch.Tensor]) -> list:
    """torch.linalg.eigh of each matrix batch, single-threaded each, spread over torch's thread budget."""
    threads = torch.get_num_threads()
    with _serial():
        if threads == 1 or len(grams) == 1:
            return [torch.linalg.eigh(g) for g in grams]
        with ThreadPoolExecutor(min(threads, len(grams))) as pool:
            return list(pool.map(torch.linalg.eigh, grams))


def _nonzero(eigs: torch.Tensor, size: int) -> torch.Tensor:
    """Mask of eigenvalues of a PSD Gram matrix that are numerically nonzero (..., n)."""
    top = eigs.amax(dim=-1, keepdim=True).clamp_min(0)
    rtol = RANK_RTOL * max(size, 1) if eigs.dtype == torch.float64 else RANK_RTOL_FLOAT32
    return eigs > rtol * top


def _safe_inverse(x: torch.Tensor) -> torch.Tensor:
    """1 / x where x > 0, else 0."""
    return torch.where(x > 0, 1 / torch.where(x > 0, x, 1), 0)


class ProductKernel:
    """Orthogonal projection onto ker dL, dL(dA, dB) = dA B^T + A dB^T, for A (G, m, n), B (G, c, n).

    B is given (and its directions taken and returned) transposed, Bt = B^T (G, n, c), which is how
    W_K^T and W_O are stored. One eigendecomposition of each n x n Gram per group; applied in the
    dtype of its input. `generator` gives the least-squares M of the module docstring's normal
    equation, `expand` the tangent vector (A M + dA (I - Pi_B), (-B M^T + dB (I - Pi_A))^T).
    """

    def __init__(self, A: torch.Tensor, Bt: torch.Tensor, eigs=None):
        m, c, n = A.shape[-2], Bt.shape[-1], A.shape[-1]
        (a, U), (b, V) = eigs or _eigh_all(self.grams(A, Bt))  # (G, n), (G, n, n)
        ma, mb = _nonzero(a, max(m, n)), _nonzero(b, max(c, n))
        a, b = torch.where(ma, a, 0), torch.where(mb, b, 0)
        self.ma = ma.to(COMPUTE_DTYPE)  # (G, n): 1 on the row space of A (eigenbasis U)
        den = a[..., :, None] * mb[..., None, :] + ma[..., :, None] * b[..., None, :]
        self.tensors = {
            "U": U,
            "V": V,
            "inv_den": _safe_inverse(den),  # (G, n, n): 1 / (a_i [b_j > 0] + [a_i > 0] b_j)
            # projectors onto the null spaces of A and B (None when trivial, the usual case n <= m, c)
            "null_A": (U * (~ma)[..., None, :]) @ U.mT if not ma.all() else None,
            "null_B": (V * (~mb)[..., None, :]) @ V.mT if not mb.all() else None,
        }
        self.A, self.Bt = A, Bt
        self._cast = {}

    @staticmethod
    def grams(A: torch.Tensor, Bt: torch.Tensor) -> list[torch.Tensor]:
        """[A^T A, B^T B] (G, n, n): in float64 where a null space is expected from the shapes (its
        eigenvalues must come out ~1e-16, not ~1e-7), else in the parameters' dtype (float32: 2x faster;
        only exactly degenerate directions, e.g. a zero W_O, are then treated as null)."""
        m, c, n = A.shape[-2], Bt.shape[-1], A.shape[-1]
        dtype = COMPUTE_DTYPE if n > min(m, c) else A.dtype
        A_, Bt_ = A.to(dtype), Bt.to(dtype)
        return [A_.mT @ A_, Bt_ @ Bt_.mT]

    def at(self, dtype) -> dict:
        """The set-up tensors in `dtype` (cached)."""
        if dtype not in self._cast:
            tensors = dict(self.tensors, A=self.A, Bt=self.Bt)
            self._cast[dtype] = {k: None if t is None else t.to(dtype) for k, t in tensors.items()}
        return self._cast[dtype]

    def generator(self, dA: torch.Tensor, dBt: torch.Tensor) -> torch.Tensor:
        """M (..., G, n, n): U [(U^T (A^T dA - dB^T B) V) / den] V^T."""
        t = self.at(dA.dtype)
        R = t["U"].mT @ (t["A"].mT @ dA - dBt @ t["Bt"].mT) @ t["V"]
        return t["U"] @ (R * t["inv_den"]) @ t["V"].mT

    def expand(self, M: torch.Tensor, dA: torch.Tensor, dBt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(A M + dA (I - Pi_B), -M Bt + (I - Pi_A) dBt)."""
        t = self.at(M.dtype)
        outA, outBt = t["A"] @ M, -M @ t["Bt"]
        if t["null_B"] is not None:
            outA = outA + dA @ t["null_B"]
        if t["null_A"] is not None:
            outBt = outBt + t["null_A"] @ dBt
        return outA, outBt

    def __call__(self, dA: torch.Tensor, dBt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.expand(self.generator(dA, dBt), dA, dBt)


def _plane_project(Qp: torch.Tensor, Kp: torch.Tensor, dQ: torch.Tensor, dK: torch.Tensor):
    """Projection onto span{(Q, -K), (Q J, K J)} per rotated plane; Qp (G, m, s, 2), Kp (G, c, s, 2).

    J = [[0, -1], [1, 0]] (the tangent of M = a I + b J). The two generators are orthogonal and have
    equal squared norm ||Q||^2 + ||K||^2, so the projection is two inner products.
    """

    def J(x):  # x @ J: columns (x_1, -x_0)
        return torch.stack((x[..., 1], -x[..., 0]), dim=-1)

    inv = _safe_inverse((Qp**2).sum((-3, -1)) + (Kp**2).sum((-3, -1)))  # (G, s)
    QJ, KJ = J(Qp), J(Kp)
    c1 = ((dQ * Qp).sum((-3, -1)) - (dK * Kp).sum((-3, -1))) * inv  # (..., G, s)
    cJ = ((dQ * QJ).sum((-3, -1)) + (dK * KJ).sum((-3, -1))) * inv
    c1, cJ = c1[..., None, :, None], cJ[..., None, :, None]
    return c1 * Qp + cJ * QJ, -c1 * Kp + cJ * KJ


class _ValueBias:
    """The constraint d c = 0 (c = sum_g b_V^g S_g + b_O) on top of the value-output product kernels.

    Phi(dW, db_V, db_O) = [db_O] + sum_g db_V^g S_g + sum_g b_V^g dS_g, S_g = sum_{h in g} W_O^h (v, d);
    P_T = P_K - P_K Phi^T (Phi P_K Phi^T)^+ Phi P_K. Everything but one d x d solve is done on the
    generators M (v x v per group), so the weights are touched once more only (in `expand`).
    """

    def __init__(self, spec: AttentionSpec, kernel: ProductKernel, W_O: torch.Tensor, b_V: torch.Tensor):
        G, r, v, d = spec.G, spec.group_size, spec.d_head_v, spec.d
        self.spec, self.kernel, self.has_o = spec, kernel, spec.has_bias("o")
        t = {k: kernel.tensors[k].to(COMPUTE_DTYPE) for k in ("U", "V", "inv_den")}
        S = W_O.reshape(G, r, v, d).sum(1)  # (G, v, d)
        ub = (t["U"].mT @ b_V[..., None])[..., 0]  # (G, v): U^T b_g
        null_b = (t["U"] @ (ub * (1 - kernel.ma))[..., None])[..., 0]  # (G, v): (I - Pi_A) b_g
        self.tensors = {"S": S, "b": b_V, "ub": ub, "null_b": null_b}
        self._cast = {S.dtype: self.tensors}
        self._solve = self._factor(self.gram())

    def gram(self) -> torch.Tensor:
        """Phi P_K Phi^T (d, d) in closed form.

        = [I] + sum_g F_g^T diag(1 + w_g) F_g + r ||(I - Pi_A) b_g||^2 I, F_g = V_g^T S_g (v, d),
        w_j = sum_i (U^T b_g)_i^2 / den_ij: Phi^T y puts dW_O^h = b_g y^T, whose kernel generator is
        M = -U [((U^T b_g)(V^T S_g y)^T) / den] V^T (see `correct`).
        """
        t, s = {k: self.kernel.tensors[k].to(COMPUTE_DTYPE) for k in ("U", "V", "inv_den")}, self.tensors
        w = (s["ub"][..., :, None] ** 2 * t["inv_den"]).sum(-2)  # (G, v)
        F = t["V"].mT @ s["S"]  # (G, v, d)
        gram = torch.einsum("gjd,gje->de", F * (1 + w)[..., None].sqrt(), F * (1 + w)[..., None].sqrt())
        shift = self.spec.group_size * (s["null_b"] ** 2).sum() + (1.0 if self.has_o else 0.0)
        return gram + shift * torch.eye(self.spec.d, dtype=gram.dtype, device=gram.device)

    @staticmethod
    def _factor(gram: torch.Tensor):
        """y -> gram^+ y: Cholesky when positive definite (with b_O always), else an eigendecomposition."""
        with _serial():
            L, info = torch.linalg.cholesky_ex(gram)
        if info.item() == 0:
            return lambda y: torch.cholesky_solve(y.reshape(-1, y.shape[-1]).mT, L).mT.reshape(y.shape)
        with _serial():
            e, X = torch.linalg.eigh(gram)
        pinv = (X * torch.where(_nonzero(e, gram.shape[-1]), _safe_inverse(e), 0)) @ X.mT
        return lambda y: y @ pinv

    def correct(self, M: torch.Tensor, dO: torch.Tensor, db_V: torch.Tensor, db_O: torch.Tensor | None):
        """Given the kernel generator M (..., G, v, v) of the input and its (dO (..., G, v, r d), db_V, db_O), return
        the corrected generator and biases of P_T x, and lam (..., d) (dO's null part needs lam)."""
        spec, t, s = self.spec, self.kernel.at(M.dtype), self.at(M.dtype)
        r, d = spec.group_size, spec.d
        dS = dO.unflatten(-1, (r, d)).sum(-2)  # (..., G, v, d): sum_h dW_O^h
        # Phi(P_K x): the output's dS_g = -M S_g + (I - Pi_A) dS_g
        phi = torch.einsum("...gv,gvd->...d", db_V - torch.einsum("gv,...gvw->...gw", s["b"], M), s["S"])
        phi = phi + torch.einsum("gv,...gvd->...d", s["null_b"], dS)
        if db_O is not None:
            phi = phi + db_O
        lam = self._solve(phi.to(COMPUTE_DTYPE)).to(M.dtype)  # (..., d)
        z = torch.einsum("gvd,...d->...gv", s["S"], lam)  # (..., G, v): S_g lam
        R = -(s["ub"][..., :, None] * (z[..., None, :] @ t["V"]))  # (..., G, v, v): -(U^T b)(V^T z)^T
        M = M - t["U"] @ (R * t["inv_den"]) @ t["V"].mT  # M(x) - M(Phi^T lam)
        return M, db_V - z, (db_O - lam if db_O is not None else None), lam

    def at(self, dtype) -> dict:
        if dtype not in self._cast:
            self._cast[dtype] = {k: t.to(dtype) for k, t in self.tensors.items()}
        return self._cast[dtype]


# --------------------------------------------------------------------------------------------
# The projector
# --------------------------------------------------------------------------------------------


class Projector:
    """The orthogonal projection onto the unidentified subspace T at theta (set up once, apply many times).

    Set-up (Gram eigendecompositions, the value-bias system) in float64; applied in float64 unless
    both theta and the vector are float32 (then float32, relative accuracy ~1e-6).

    >>> proj = Projector(spec, theta); pv = proj(vec)            # vec (..., P)
    """

    def __init__(self, spec: AttentionSpec, theta: torch.Tensor):
        self.spec, self.layout, self.dtype = spec, Layout(spec), theta.dtype
        w = self.layout.unflatten(theta.detach())
        p = spec.rope_dims
        Q, K = qk_stack(spec, w)
        pairs = [(w["W_V"], o_stack_t(spec, w["W_O"]))] + (
            [(Q[..., p:], w["W_K"][..., p:].mT)] if p < spec.d_head_qk else []
        )
        eigs = _eigh_all([g for pair in pairs for g in ProductKernel.grams(*pair)])  # one pool for all
        self.vo = ProductKernel(*pairs[0], eigs[0:2])
        self.qk = ProductKernel(*pairs[1], eigs[2:4]) if len(pairs) > 1 else None
        self.planes = (Q[..., :p].unflatten(-1, (p // 2, 2)), K[..., :p].unflatten(-1, (p // 2, 2)))  # (G, m, p/2, 2)
        self.value_bias = (
            _ValueBias(spec, self.vo, w["W_O"].to(COMPUTE_DTYPE), w["b_V"].to(COMPUTE_DTYPE)) if "b_V" in w else None
        )

    def _project_qk(self, w: dict) -> dict:
        spec, p, d = self.spec, self.spec.rope_dims, self.spec.d
        dQ, dK = qk_stack(spec, w)
        if p == 0 and not spec.has_bias("k"):
            outQ, outKt = self.qk(dQ, dK.mT)
            return qk_unstack(spec, outQ, outKt.mT)
        outQ, outK = torch.zeros_like(dQ), torch.zeros_like(dK)
        if self.qk is not None:
            outQ[..., p:], outKt = self.qk(dQ[..., p:], dK[..., :d, p:].mT)
            outK[..., :d, p:] = outKt.mT
            if spec.has_bias("k"):
                outK[..., d, p:] = dK[..., d, p:]  # the unrotated key bias is invisible: all of it
        if p:
            Qp, Kp = (t.to(dQ.dtype) for t in self.planes)
            pq, pk = _plane_project(
                Qp, Kp, dQ[..., :p].unflatten(-1, (p // 2, 2)), dK[..., :p].unflatten(-1, (p // 2, 2))
            )
            outQ[..., :p], outK[..., :p] = pq.flatten(-2), pk.flatten(-2)
        return qk_unstack(spec, outQ, outK)

    def _project_vo(self, w: dict) -> dict:
        spec = self.spec
        dV, dO = w["W_V"], o_stack_t(spec, w["W_O"])  # (..., G, d, v), (..., G, v, r d)
        db_V, db_O = w.get("b_V"), w.get("b_O")
        M = self.vo.generator(dV, dO)
        if self.value_bias is None:
            outV, outO = self.vo.expand(M, dV, dO)
            db_O = None if db_O is None else torch.zeros_like(db_O)  # b_O is identified without a value bias
        else:
            M, db_V, db_O, lam = self.value_bias.correct(M, dO, db_V, db_O)
            null_A = self.vo.at(M.dtype)["null_A"]
            if null_A is not None:  # the invisible part of Phi^T lam: dW_O^h = b_g lam^T
                b = self.value_bias.at(M.dtype)["b"]
                corr = torch.einsum("gv,...d->...gvd", b, lam)[..., None, :]  # (..., G, v, 1, d)
                dO = dO - corr.expand(*corr.shape[:-2], spec.group_size, spec.d).flatten(-2)
            outV, outO = self.vo.expand(M, dV, dO)
        out = {"W_V": outV, "W_O": o_unstack_t(spec, outO)}
        if db_V is not None:
            out["b_V"] = db_V
        if db_O is not None:
            out["b_O"] = db_O
        return out

    def __call__(self, vec: torch.Tensor, part: str | None = None) -> torch.Tensor:
        _check_part(part)
        w = self.layout.unflatten(vec.to(torch.promote_types(vec.dtype, self.dtype)))
        out = {}
        for name, fn in (("query_key", self._project_qk), ("value_output", self._project_vo)):
            if part in (None, name):
                out.update(fn(w))
            else:
                out.update({b: torch.zeros_like(w[b]) for b in PART_BLOCKS[name] if b in w})
        return self.layout.flatten(out).to(vec.dtype)


def project(spec: AttentionSpec, theta: torch.Tensor, vec: torch.Tensor, part: str | None = None) -> torch.Tensor:
    """Orthogonal projection of vec (..., P) onto T at theta (or onto one part's subspace)."""
    return Projector(spec, theta)(vec, part)


def project_out(spec: AttentionSpec, theta: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """update - P_T update: the update without its component in the unidentified subspace."""
    return update - project(spec, theta, update)


def overlap(spec: AttentionSpec, theta: torch.Tensor, vec: torch.Tensor, projector: Projector | None = None) -> dict:
    """||P_T v|| / ||v|| overall ('all') and per part (||P_part v_part|| / ||v_part||); nan for a zero vector.

    Pass `projector` (a :class:`Projector` at theta) to reuse its set-up.
    """
    proj = projector or Projector(spec, theta)
    pv = proj(vec)
    out = {"all": (pv.norm() / vec.norm()).item()}
    for part in PARTS:
        mask = part_mask(spec, part, device=vec.device)
        out[part] = (pv[..., mask].norm() / vec[..., mask].norm()).item()
    return out


def basis(spec: AttentionSpec, theta: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """An orthonormal basis of T at theta, (P, dim T): the range of P_T applied to dim T Gaussian vectors.

    P_T Omega spans T with probability one; costs dim T projections (meant for small specs).
    """
    P, dim = Layout(spec).size, subspace_dim(spec)
    omega = torch.randn(dim, P, generator=generator, dtype=COMPUTE_DTYPE).to(theta.device)
    Y = project(spec, theta.to(COMPUTE_DTYPE), omega)  # (dim, P)
    Uy, _, _ = torch.linalg.svd(Y.mT, full_matrices=False)
    return Uy.to(theta.dtype)


# --------------------------------------------------------------------------------------------
# Group action, commutant, head permutations
# --------------------------------------------------------------------------------------------


def commutant(spec: AttentionSpec, M: torch.Tensor) -> torch.Tensor:
    """Orthogonal projection of M (..., k, k) onto the commutant of the RoPE rotations.

    The commutant of {R_t} (distinct nonzero plane frequencies) is block-diag(gl(u) on the unrotated
    dims, a I + b J on each plane): cross blocks are zeroed, each plane block [[m00, m01], [m10, m11]]
    becomes a I + b J with a = (m00 + m11) / 2, b = (m10 - m01) / 2. Identity without RoPE.
    """
    p = spec.rope_dims
    if p == 0:
        return M.clone()
    out = torch.zeros_like(M)
    out[..., p:, p:] = M[..., p:, p:]
    i = torch.arange(0, p, 2, device=M.device)
    a = (M[..., i, i] + M[..., i + 1, i + 1]) / 2
    b = (M[..., i + 1, i] - M[..., i, i + 1]) / 2
    out[..., i, i], out[..., i + 1, i + 1], out[..., i + 1, i], out[..., i, i + 1] = a, a, b, -b
    return out


def group_element(
    spec: AttentionSpec,
    generator: torch.Generator | None = None,
    scale: float = 0.3,
    allowed: bool = True,
    dtype=torch.float64,
    device=None,
):
    """A random group element (qk (G, k, k), vo (G, v, v)) = I + scale * Gaussian / sqrt(size).

    allowed=True restricts qk to the RoPE commutant (so :func:`act` keeps the function); allowed=False
    leaves it generic (under RoPE it then changes the function).
    """
    G, k, v = spec.G, spec.d_head_qk, spec.d_head_v
    qk = torch.eye(k, dtype=torch.float64) + scale * torch.randn(
        G, k, k, generator=generator, dtype=torch.float64
    ) / math.sqrt(k)
    vo = torch.eye(v, dtype=torch.float64) + scale * torch.randn(
        G, v, v, generator=generator, dtype=torch.float64
    ) / math.sqrt(v)
    if allowed:
        qk = commutant(spec, qk)
    return qk.to(dtype=dtype, device=device), vo.to(dtype=dtype, device=device)


def act(
    spec: AttentionSpec, theta: torch.Tensor, qk: torch.Tensor | None = None, vo: torch.Tensor | None = None
) -> torch.Tensor:
    """Apply (M_g, N_g) per KV group: Q_g M, K_g M^{-T}, V_g N, O_g N^{-T} (W_O^h -> N^{-1} W_O^h).

    qk (G, k, k) or (k, k), vo (G, v, v) or (v, v), invertible; None = identity. Biases move with their
    weights (b_Q M, b_K M^{-T}, b_V N); b_O is not acted on. The function is unchanged iff qk lies in
    the RoPE commutant (:func:`commutant`); computed in float64, returned in theta's dtype.
    """
    layout = Layout(spec)
    w = _blocks64(spec, theta)
    out = dict(w)
    if qk is not None:
        M = qk.to(device=theta.device, dtype=COMPUTE_DTYPE)
        Q, K = qk_stack(spec, w)
        out.update(qk_unstack(spec, Q @ M, torch.linalg.solve(M, K.mT).mT))
    if vo is not None:
        N = vo.to(device=theta.device, dtype=COMPUTE_DTYPE)
        V, O = vo_stack(spec, w)
        out.update(vo_unstack(spec, V @ N, torch.linalg.solve(N, O.mT).mT))
    return layout.flatten(out).to(theta.dtype)


def act_heads(spec: AttentionSpec, theta: torch.Tensor, qk_heads: torch.Tensor) -> torch.Tensor:
    """Query head h by its own M_h (qk_heads (H, k, k)); the keys of group g by M_{first head of g}^{-T}.

    A group element only when M_h is the same for all heads of a group (and in the RoPE commutant):
    with distinct M_h inside a GQA group the shared key cannot follow, and the function changes.
    """
    layout = Layout(spec)
    w = _blocks64(spec, theta)
    M = qk_heads.to(device=theta.device, dtype=COMPUTE_DTYPE)  # (H, k, k)
    out = dict(w)
    out["W_Q"] = w["W_Q"] @ M
    if "b_Q" in w:
        out["b_Q"] = (w["b_Q"][:, None, :] @ M)[:, 0]
    first = M[:: spec.group_size]  # (G, k, k)
    _, K = qk_stack(spec, w)
    Q, _ = qk_stack(spec, out)
    out.update(qk_unstack(spec, Q, torch.linalg.solve(first, K.mT).mT))
    return layout.flatten(out).to(theta.dtype)


def permute_heads(spec: AttentionSpec, theta: torch.Tensor, perm) -> torch.Tensor:
    """New head h takes old head perm[h]'s query and output weights; KV groups follow their heads.

    perm must map the heads of each group onto the heads of one group (a permutation within groups,
    possibly also permuting whole groups): then the function is unchanged.
    """
    H, G, r = spec.H, spec.G, spec.group_size
    perm = [int(i) for i in perm]
    if sorted(perm) != list(range(H)):
        raise ValueError(f"perm must be a permutation of range({H}), got {perm}")
    sigma = []  # new group g takes old group sigma[g]
    for g in range(G):
        olds = {spec.group_of(perm[h]) for h in range(g * r, (g + 1) * r)}
        if len(olds) != 1:
            raise ValueError(f"perm {perm} splits KV group {g} across groups {sorted(olds)}")
        sigma.append(olds.pop())
    layout = Layout(spec)
    w = layout.unflatten(theta)
    idx = {"H": torch.tensor(perm, device=theta.device), "G": torch.tensor(sigma, device=theta.device)}
    along = {"W_Q": "H", "b_Q": "H", "W_O": "H", "W_K": "G", "b_K": "G", "W_V": "G", "b_V": "G"}
    out = {name: (t[idx[along[name]]] if name in along else t.clone()) for name, t in w.items()}
    return layout.flatten(out)


# --------------------------------------------------------------------------------------------
# Balance and conserved quantities
# --------------------------------------------------------------------------------------------


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
    with _serial():
        Qa, Ra = torch.linalg.qr(A)
        Qb, Rb = torch.linalg.qr(B)
        U, s, Vh = torch.linalg.svd(Ra @ Rb.mT, full_matrices=False)  # (G, n1, q), (G, q), (G, q, n2)
    s = s * _nonzero(s, max(Ra.shape[-2], Rb.shape[-2]))
    root = s.sqrt()[..., None]  # (G, q, 1)
    with _serial():
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
    w = _blocks64(spec, theta)
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


def imbalance(spec: AttentionSpec, theta: torch.Tensor) -> dict:
    """The conserved quantities of gradient flow (Noether for the group action), float64.

    query_key (G, k, k): commutant(Q_g^T Q_g - K_g^T K_g) — the unrotated block of the difference of
      Grams ([W_Q; b_Q] stacked over the group's heads vs [W_K; b_K]) and, per rotated plane,
      (||Q_plane||^2 - ||K_plane||^2) / 2 times I_2 (the J-part of a symmetric matrix is zero);
    value_output (G, v, v): W_V^T W_V + b_V^T b_V - sum_{h in g} W_O^h W_O^h^T.
    For each generator X of the group, d/dt <X, Q^T Q - K^T K> = -2 <grad, tangent(X)> = 0 under
    gradient flow (Kunin et al., ICLR 2021); a gradient step of size lr changes them by O(lr^2).
    """
    w = _blocks64(spec, theta)
    Q, K = qk_stack(spec, w)
    V, O = vo_stack(spec, w)
    return {"query_key": commutant(spec, Q.mT @ Q - K.mT @ K), "value_output": V.mT @ V - O.mT @ O}


def imbalance_reference(spec: AttentionSpec, theta0: torch.Tensor) -> dict:
    """What :func:`imbalance_drift` needs of theta0, computed once: {"imbalance": ..., "scale": ...}."""
    w = _blocks64(spec, theta0)
    Q, K = qk_stack(spec, w)
    V, O = vo_stack(spec, w)
    scale = {
        "query_key": ((Q.mT @ Q).norm() + (K.mT @ K).norm()).item(),
        "value_output": ((V.mT @ V).norm() + (O.mT @ O).norm()).item(),
    }
    return {"imbalance": imbalance(spec, theta0), "scale": scale}


def imbalance_drift(
    spec: AttentionSpec, theta0: torch.Tensor | None, theta1: torch.Tensor, reference: dict | None = None
) -> dict:
    """Relative change of the conserved quantities: ||I(theta1) - I(theta0)||_F / scale(theta0).

    scale = ||Q^T Q||_F + ||K^T K||_F (query_key) or ||V^T V||_F + ||O^T O||_F (value_output) at
    theta0 (over all groups), which stays away from zero even at a balanced point where I = 0.
    `reference` = imbalance_reference(spec, theta0) skips recomputing theta0's part (theta0 may then be None).
    """
    ref = reference or imbalance_reference(spec, theta0)
    i1 = imbalance(spec, theta1)
    return {part: ((i1[part] - ref["imbalance"][part]).norm() / ref["scale"][part]).item() for part in PARTS}
