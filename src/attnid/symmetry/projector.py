"""The orthogonal projection onto the unidentified subspace T at theta (the Jacobian null space).

Stacked matrices Q_g, K_g, V_g, O_g as in :mod:`attnid.symmetry.stacks`. The function sees
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
is attnid.layer.counting's fibre n (m + c) - rho (m + c - rho), rho = min(n, m, c).

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
"""

from __future__ import annotations

import math

import torch

from ..layer.counting import count
from ..layer.layout import Layout
from ..layer.spec import AttentionSpec
from .linalg import factor_eigs, nonzero, safe_inverse, serial
from .stacks import (
    COMPUTE_DTYPE,
    PART_BLOCKS,
    PARTS,
    check_part,
    o_stack_t,
    o_unstack_t,
    part_mask,
    qk_stack,
    qk_unstack,
)

OVERLAP_KEYS = ("all", *PARTS)  # what :func:`overlap` measures: the whole vector, then each part


def subspace_dim(spec: AttentionSpec, part: str | None = None) -> int:
    """dim T (or of one part) from attnid.layer.counting: query_key = query_key + key_bias, value_output = value_output + value_bias."""
    check_part(part)
    b = count(spec).breakdown
    dims = {"query_key": b["query_key"] + b["key_bias"], "value_output": b["value_output"] + b["value_bias"]}
    return sum(dims.values()) if part is None else dims[part]


def chance_overlap(spec: AttentionSpec, part: str | None = None) -> float:
    """sqrt(dim / n): the root-mean-square overlap ||P_T x|| / ||x|| of an isotropic random x (n coordinates)."""
    n = Layout(spec).size if part is None else int(part_mask(spec, part).sum())
    return math.sqrt(subspace_dim(spec, part) / n)


class ProductKernel:
    """Orthogonal projection onto ker dL, dL(dA, dB) = dA B^T + A dB^T, for A (G, m, n), B (G, c, n).

    B is given (and its directions taken and returned) transposed, Bt = B^T (G, n, c), which is how
    W_K^T and W_O are stored. The eigenpairs of each n x n Gram per group come from its factor's SVD
    (attnid.symmetry.linalg.factor_eigs); applied in the
    dtype of its input. `generator` gives the least-squares M of the module docstring's normal
    equation, `expand` the tangent vector (A M + dA (I - Pi_B), (-B M^T + dB (I - Pi_A))^T).
    """

    def __init__(self, A: torch.Tensor, Bt: torch.Tensor):
        (a, U, ma), (b, V, mb) = factor_eigs(A), factor_eigs(Bt, transposed=True)  # (G, n), (G, n, n), (G, n)
        self.ma = ma.to(COMPUTE_DTYPE)  # (G, n): 1 on the row space of A (eigenbasis U)
        den = a[..., :, None] * mb[..., None, :] + ma[..., :, None] * b[..., None, :]
        self.tensors = {
            "U": U,
            "V": V,
            "inv_den": safe_inverse(den),  # (G, n, n): 1 / (a_i [b_j > 0] + [a_i > 0] b_j)
            # projectors onto the null spaces of A and B (None when trivial, the usual case n <= m, c)
            "null_A": (U * (~ma)[..., None, :]) @ U.mT if not ma.all() else None,
            "null_B": (V * (~mb)[..., None, :]) @ V.mT if not mb.all() else None,
        }
        self.A, self.Bt = A, Bt
        self._cast = {}

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

    inv = safe_inverse((Qp**2).sum((-3, -1)) + (Kp**2).sum((-3, -1)))  # (G, s)
    QJ, KJ = J(Qp), J(Kp)
    c1 = ((dQ * Qp).sum((-3, -1)) - (dK * Kp).sum((-3, -1))) * inv  # (..., G, s)
    cJ = ((dQ * QJ).sum((-3, -1)) + (dK * KJ).sum((-3, -1))) * inv
    c1, cJ = c1[..., None, :, None], cJ[..., None, :, None]
    return c1 * Qp + cJ * QJ, -c1 * Kp + cJ * KJ


class _ValueBias:
    """The constraint d c = 0 (c = sum_g b_V^g S_g + b_O) on top of the value-output product kernels.

    Phi(dW, db_V, db_O) = [db_O] + sum_g db_V^g S_g + sum_g b_V^g dS_g, S_g = sum_{h in g} W_O^h (v, d);
    P_T = P_K - P_K Phi^T (Phi P_K Phi^T)^+ Phi P_K. Everything but one d x d solve is done on the
    generators M (v x v per group), so the weights are touched once more only (in `expand`). Points may be
    stacked (leading dims of W_O and b_V, as the kernels'): one d x d system per point.
    """

    def __init__(self, spec: AttentionSpec, kernel: ProductKernel, W_O: torch.Tensor, b_V: torch.Tensor):
        G, r, v, d = spec.G, spec.group_size, spec.d_head_v, spec.d
        self.spec, self.kernel, self.has_o = spec, kernel, spec.has_bias("o")
        t = {k: kernel.tensors[k].to(COMPUTE_DTYPE) for k in ("U", "V", "inv_den")}
        lead = W_O.shape[:-3]
        S = W_O.reshape(*lead, G, r, v, d).sum(-3)  # (..., G, v, d)
        ub = (t["U"].mT @ b_V[..., None])[..., 0]  # (..., G, v): U^T b_g
        null_b = (t["U"] @ (ub * (1 - kernel.ma))[..., None])[..., 0]  # (..., G, v): (I - Pi_A) b_g
        self.tensors = {"S": S, "b": b_V, "ub": ub, "null_b": null_b}
        self._cast = {S.dtype: self.tensors}
        self._solve = self._factor(self.gram())

    def gram(self) -> torch.Tensor:
        """Phi P_K Phi^T (..., d, d) in closed form.

        = [I] + sum_g F_g^T diag(1 + w_g) F_g + r ||(I - Pi_A) b_g||^2 I, F_g = V_g^T S_g (v, d),
        w_j = sum_i (U^T b_g)_i^2 / den_ij: Phi^T y puts dW_O^h = b_g y^T, whose kernel generator is
        M = -U [((U^T b_g)(V^T S_g y)^T) / den] V^T (see `correct`).
        """
        t, s = {k: self.kernel.tensors[k].to(COMPUTE_DTYPE) for k in ("U", "V", "inv_den")}, self.tensors
        w = (s["ub"][..., :, None] ** 2 * t["inv_den"]).sum(-2)  # (..., G, v)
        F = (t["V"].mT @ s["S"]) * (1 + w)[..., None].sqrt()  # (..., G, v, d)
        gram = (F.mT @ F).sum(-3)  # (..., d, d)
        shift = self.spec.group_size * (s["null_b"] ** 2).sum((-2, -1)) + (1.0 if self.has_o else 0.0)  # (...,)
        return gram + shift[..., None, None] * torch.eye(self.spec.d, dtype=gram.dtype, device=gram.device)

    @staticmethod
    def _factor(gram: torch.Tensor):
        """y (..., d) -> gram^+ y: Cholesky when every system is positive definite (with b_O always), else
        an eigendecomposition."""
        with serial():
            L, info = torch.linalg.cholesky_ex(gram)
        if not bool((info != 0).any()):
            return lambda y: torch.cholesky_solve(y[..., None], L)[..., 0]
        with serial():
            e, X = torch.linalg.eigh(gram)
        pinv = (X * torch.where(nonzero(e, gram.shape[-1]), safe_inverse(e), 0)[..., None, :]) @ X.mT
        return lambda y: (pinv @ y[..., None])[..., 0]

    def correct(self, M: torch.Tensor, dO: torch.Tensor, db_V: torch.Tensor, db_O: torch.Tensor | None):
        """Given the kernel generator M (..., G, v, v) of the input and its (dO (..., G, v, r d), db_V, db_O), return
        the corrected generator and biases of P_T x, and lam (..., d) (dO's null part needs lam)."""
        spec, t, s = self.spec, self.kernel.at(M.dtype), self.at(M.dtype)
        r, d = spec.group_size, spec.d
        dS = dO.unflatten(-1, (r, d)).sum(-2)  # (..., G, v, d): sum_h dW_O^h
        # Phi(P_K x): the output's dS_g = -M S_g + (I - Pi_A) dS_g
        bM = (s["b"][..., None, :] @ M)[..., 0, :]  # (..., G, v): b_g^T M_g
        phi = ((db_V - bM)[..., None, :] @ s["S"]).sum(-3)[..., 0, :]  # (..., d)
        phi = phi + (s["null_b"][..., None, :] @ dS).sum(-3)[..., 0, :]
        if db_O is not None:
            phi = phi + db_O
        lam = self._solve(phi.to(COMPUTE_DTYPE)).to(M.dtype)  # (..., d)
        z = (s["S"] @ lam[..., None, :, None])[..., 0]  # (..., G, v): S_g lam
        R = -(s["ub"][..., :, None] * (z[..., None, :] @ t["V"]))  # (..., G, v, v): -(U^T b)(V^T z)^T
        M = M - t["U"] @ (R * t["inv_den"]) @ t["V"].mT  # M(x) - M(Phi^T lam)
        return M, db_V - z, (db_O - lam if db_O is not None else None), lam

    def at(self, dtype) -> dict:
        if dtype not in self._cast:
            self._cast[dtype] = {k: t.to(dtype) for k, t in self.tensors.items()}
        return self._cast[dtype]


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
        self.vo = ProductKernel(*pairs[0])
        self.qk = ProductKernel(*pairs[1]) if len(pairs) > 1 else None
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
                corr = (b[..., None] * lam[..., None, None, :])[..., None, :]  # (..., G, v, 1, d)
                dO = dO - corr.expand(*corr.shape[:-2], spec.group_size, spec.d).flatten(-2)
            outV, outO = self.vo.expand(M, dV, dO)
        out = {"W_V": outV, "W_O": o_unstack_t(spec, outO)}
        if db_V is not None:
            out["b_V"] = db_V
        if db_O is not None:
            out["b_O"] = db_O
        return out

    def __call__(self, vec: torch.Tensor, part: str | None = None) -> torch.Tensor:
        check_part(part)
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
    """||P_T v|| / ||v|| overall ('all') and per part (||P_part v_part|| / ||v_part||), keyed by
    OVERLAP_KEYS; nan for a zero vector.

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
