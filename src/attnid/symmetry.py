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

import torch

from .counting import count
from .layout import Layout
from .spec import AttentionSpec

PARTS = ("query_key", "value_output")
PART_BLOCKS = {"query_key": ("W_Q", "b_Q", "W_K", "b_K"), "value_output": ("W_V", "b_V", "W_O", "b_O")}
COMPUTE_DTYPE = torch.float64  # small solves run in float64 whatever the parameter dtype
RANK_RTOL = 1e3 * torch.finfo(torch.float64).eps  # Gram eigenvalue a is zero if a < RANK_RTOL * size * max(a)


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


def o_stack(spec: AttentionSpec, W_O: torch.Tensor) -> torch.Tensor:
    """O (..., G, r d, v): the transposed output matrices W_O^h^T (..., H, v, d) stacked per group."""
    G, r, d, v = spec.G, spec.group_size, spec.d, spec.d_head_v
    return W_O.reshape(*W_O.shape[:-3], G, r, v, d).transpose(-1, -2).reshape(*W_O.shape[:-3], G, r * d, v)


def vo_unstack(spec: AttentionSpec, V: torch.Tensor, O: torch.Tensor) -> dict:
    """Inverse of :func:`vo_stack` (V with or without the b_V row)."""
    G, H, r, d, v = spec.G, spec.H, spec.group_size, spec.d, spec.d_head_v
    lead = O.shape[:-3]
    out = {"W_V": V[..., :d, :], "W_O": O.reshape(*lead, G, r, d, v).transpose(-1, -2).reshape(*lead, H, v, d)}
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


def _nonzero(eigs: torch.Tensor, size: int) -> torch.Tensor:
    """Mask of eigenvalues of a PSD Gram matrix that are numerically nonzero (..., n)."""
    top = eigs.amax(dim=-1, keepdim=True).clamp_min(0)
    return eigs > RANK_RTOL * max(size, 1) * top


class ProductKernel:
    """Orthogonal projection onto ker dL, dL(dA, dB) = dA B^T + A dB^T, for A (G, m, n), B (G, c, n).

    See the module docstring for the formula; one eigendecomposition of each n x n Gram per group.
    """

    def __init__(self, A: torch.Tensor, B: torch.Tensor):
        m, c, n = A.shape[-2], B.shape[-2], A.shape[-1]
        a, self.U = torch.linalg.eigh(A.mT @ A)  # (G, n), (G, n, n)
        b, self.V = torch.linalg.eigh(B.mT @ B)
        self.ma, self.mb = _nonzero(a, max(m, n)).to(A.dtype), _nonzero(b, max(c, n)).to(A.dtype)
        self.a, self.b = a.clamp_min(0) * self.ma, b.clamp_min(0) * self.mb
        den = self.a[..., :, None] * self.mb[..., None, :] + self.ma[..., :, None] * self.b[..., None, :]
        self.inv_den = torch.where(den > 0, 1 / torch.where(den > 0, den, 1), 0)  # (G, n, n)
        self.Abar, self.Bbar = A @ self.U, B @ self.V  # (G, m, n), (G, c, n): columns A u_i, B v_j

    def coefficients(self, dA: torch.Tensor, dB: torch.Tensor):
        """Eigen-coordinates: dA V, dB U and the least-squares generator U^T M V (..., G, n, n)."""
        dAh, dBh = dA @ self.V, dB @ self.U
        R = (self.Abar.mT @ dAh) * self.mb[..., None, :] - self.ma[..., :, None] * (dBh.mT @ self.Bbar)
        return dAh, dBh, R * self.inv_den

    def __call__(self, dA: torch.Tensor, dB: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        dAh, dBh, Mt = self.coefficients(dA, dB)
        dA_out = (dAh * (1 - self.mb)[..., None, :] + self.Abar @ Mt) @ self.V.mT
        dB_out = (dBh * (1 - self.ma)[..., None, :] - self.Bbar @ Mt.mT) @ self.U.mT
        return dA_out, dB_out


def _plane_project(Qp: torch.Tensor, Kp: torch.Tensor, dQ: torch.Tensor, dK: torch.Tensor):
    """Projection onto span{(Q, -K), (Q J, K J)} per rotated plane; Qp (G, m, s, 2), Kp (G, c, s, 2).

    J = [[0, -1], [1, 0]] (the tangent of M = a I + b J). The two generators are orthogonal and have
    equal squared norm ||Q||^2 + ||K||^2, so the projection is two inner products.
    """

    def J(x):  # x @ J: columns (x_1, -x_0)
        return torch.stack((x[..., 1], -x[..., 0]), dim=-1)

    norm2 = (Qp**2).sum((-3, -1)) + (Kp**2).sum((-3, -1))  # (G, s)
    inv = torch.where(norm2 > 0, 1 / torch.where(norm2 > 0, norm2, 1), 0)
    QJ, KJ = J(Qp), J(Kp)
    c1 = ((dQ * Qp).sum((-3, -1)) - (dK * Kp).sum((-3, -1))) * inv  # (..., G, s)
    cJ = ((dQ * QJ).sum((-3, -1)) + (dK * KJ).sum((-3, -1))) * inv
    c1, cJ = c1[..., None, :, None], cJ[..., None, :, None]
    return c1 * Qp + cJ * QJ, -c1 * Kp + cJ * KJ


class _ValueBias:
    """The constraint d c = 0 (c = sum_g b_V^g S_g + b_O) on top of the value-output product kernels.

    Phi(dW, db_V, db_O) = [db_O] + sum_g db_V^g S_g + sum_g b_V^g dS_g, S_g = sum_{h in g} W_O^h (v, d).
    """

    def __init__(self, spec: AttentionSpec, kernel: ProductKernel, W_O: torch.Tensor, b_V: torch.Tensor):
        G, r, v, d = spec.G, spec.group_size, spec.d_head_v, spec.d
        self.spec, self.kernel, self.has_o = spec, kernel, spec.has_bias("o")
        self.S = W_O.reshape(G, r, v, d).sum(1)  # (G, v, d)
        self.bv = b_V  # (G, v)
        self.gram_inverse = self._pinv(self.gram())

    def gram(self) -> torch.Tensor:
        """Phi P_K Phi^T (d, d) in closed form.

        = [I] + sum_g S_g^T (I + V_g diag(w_g) V_g^T) S_g + r ||(I - Pi_A) b_g||^2 I,
        w_j = sum_i (U^T Pi_A b_g)_i^2 / den_ij: the image of the rank-one inputs dW_O^h = b_g y^T
        under the kernel projection (derivation in the module docstring's notation).
        """
        kern, d, r = self.kernel, self.spec.d, self.spec.group_size
        ub = (kern.U.mT @ self.bv[..., None])[..., 0]  # (G, v): U^T b
        ut = ub * kern.ma
        w = (ut[..., :, None] ** 2 * kern.inv_den).sum(-2)  # (G, v)
        F = kern.V.mT @ self.S  # (G, v, d): V^T S_g
        gram = torch.einsum("gjd,gj,gje->de", F, 1 + w, F)
        shift = r * (ub**2 * (1 - kern.ma)).sum() + (1.0 if self.has_o else 0.0)
        return gram + shift * torch.eye(d, dtype=gram.dtype, device=gram.device)

    def _pinv(self, gram: torch.Tensor) -> torch.Tensor:
        e, X = torch.linalg.eigh(gram)
        keep = _nonzero(e, gram.shape[-1])
        return (X * torch.where(keep, 1 / torch.where(keep, e, 1), 0)) @ X.mT

    def phi(self, dW_O: torch.Tensor, db_V: torch.Tensor, db_O: torch.Tensor | None) -> torch.Tensor:
        G, r, v, d = self.spec.G, self.spec.group_size, self.spec.d_head_v, self.spec.d
        dS = dW_O.reshape(*dW_O.shape[:-3], G, r, v, d).sum(-3)  # (..., G, v, d)
        out = torch.einsum("...gv,gvd->...d", db_V, self.S) + torch.einsum("gv,...gvd->...d", self.bv, dS)
        return out + db_O if db_O is not None else out

    def correct(self, dV, dO, db_V, db_O):
        """P_T = P_K - P_K Phi^T (Phi P_K Phi^T)^+ Phi P_K, given (dV, dO, db_V, db_O) = P_K x."""
        spec = self.spec
        w = vo_unstack(spec, dV, dO)
        lam = self.phi(w["W_O"], db_V, db_O) @ self.gram_inverse  # (..., d)
        G, r = spec.G, spec.group_size
        # Phi^T lam: dW_O^h = b_g lam^T, db_V^g = S_g lam, db_O = lam; then P_K on the weight part
        dW_O = torch.einsum("gv,...d->...gvd", self.bv, lam)  # (..., G, v, d)
        dW_O = dW_O[..., :, None, :, :].expand(*dW_O.shape[:-2], r, *dW_O.shape[-2:]).reshape(*lam.shape[:-1], spec.H, spec.d_head_v, spec.d)
        cV, cO = self.kernel(torch.zeros_like(dV), o_stack(spec, dW_O))
        db_V = db_V - torch.einsum("gvd,...d->...gv", self.S, lam)
        db_O = db_O - lam if db_O is not None else None
        return dV - cV, dO - cO, db_V, db_O


# --------------------------------------------------------------------------------------------
# The projector
# --------------------------------------------------------------------------------------------


class Projector:
    """The orthogonal projection onto the unidentified subspace T at theta (set up once, apply many times).

    >>> proj = Projector(spec, theta); pv = proj(vec)            # vec (..., P)
    """

    def __init__(self, spec: AttentionSpec, theta: torch.Tensor):
        self.spec, self.layout = spec, Layout(spec)
        w = _blocks64(spec, theta)
        p = spec.rope_dims
        Q, K = qk_stack(spec, w)
        self.qk = ProductKernel(Q[..., p:], w["W_K"][..., p:]) if p < spec.d_head_qk else None
        G = spec.G
        self.Qp = Q[..., :p].reshape(G, Q.shape[-2], p // 2, 2)  # (G, r m_q, p/2, 2)
        self.Kp = K[..., :p].reshape(G, K.shape[-2], p // 2, 2)
        V, O = vo_stack(spec, w, with_bias=False)
        self.vo = ProductKernel(V, O)
        self.value_bias = _ValueBias(spec, self.vo, w["W_O"], w["b_V"]) if "b_V" in w else None

    def _project_qk(self, w: dict) -> dict:
        spec, p, d = self.spec, self.spec.rope_dims, self.spec.d
        dQ, dK = qk_stack(spec, w)
        outQ, outK = torch.zeros_like(dQ), torch.zeros_like(dK)
        if self.qk is not None:
            outQ[..., p:], outK[..., :d, p:] = self.qk(dQ[..., p:], dK[..., :d, p:])
            if spec.has_bias("k"):
                outK[..., d, p:] = dK[..., d, p:]  # the unrotated key bias is invisible: all of it
        if p:
            s = (*dQ.shape[:-1], p // 2, 2)
            pq, pk = _plane_project(self.Qp, self.Kp, dQ[..., :p].reshape(s), dK[..., :p].reshape(*dK.shape[:-1], p // 2, 2))
            outQ[..., :p], outK[..., :p] = pq.flatten(-2), pk.flatten(-2)
        return qk_unstack(spec, outQ, outK)

    def _project_vo(self, w: dict) -> dict:
        spec = self.spec
        dV, dO = vo_stack(spec, w, with_bias=False)
        dV, dO = self.vo(dV, dO)
        db_V, db_O = w.get("b_V"), w.get("b_O")
        if self.value_bias is not None:
            dV, dO, db_V, db_O = self.value_bias.correct(dV, dO, db_V, db_O)
        elif db_O is not None:
            db_O = torch.zeros_like(db_O)  # b_O is always identified when there is no value bias
        out = vo_unstack(spec, dV, dO)
        if db_V is not None:
            out["b_V"] = db_V
        if db_O is not None:
            out["b_O"] = db_O
        return out

    def __call__(self, vec: torch.Tensor, part: str | None = None) -> torch.Tensor:
        _check_part(part)
        w = self.layout.unflatten(vec.to(COMPUTE_DTYPE))
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


def overlap(spec: AttentionSpec, theta: torch.Tensor, vec: torch.Tensor) -> dict:
    """||P_T v|| / ||v|| overall ('all') and per part (||P_part v_part|| / ||v_part||); nan for a zero vector."""
    proj = Projector(spec, theta)
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
