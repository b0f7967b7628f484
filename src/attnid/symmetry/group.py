"""The symmetry group and its action on the parameters: what moves theta without changing the function.

Per KV group g (stacks of :mod:`attnid.symmetry.stacks`): Q_g -> Q_g M, K_g -> K_g M^{-T},
V_g -> V_g N, O_g -> O_g N^{-T} (W_O^h -> N^{-1} W_O^h), with M in the commutant of the RoPE
rotations and N in gl(v); b_O is not acted on; plus the discrete head permutations inside and
across groups. The commutant of the rotations R_t = diag(rot(t w_1), ..., rot(t w_(p/2)), I_u)
at every position t is block-diag(gl(u) on the u unrotated dims, a I + b J on each rotated
plane) when the frequencies satisfy w_i not in pi Z and w_i != +-w_j mod 2 pi (else planes with
a shared frequency mix: gl(k, C) on a block of k such planes). Its linearisation at the identity,
:func:`orbit_tangent`, gives the tangent directions (Q_g X, -K_g X^T, V_g Y, -O_g Y^T): the orbit
part of the unidentified subspace (:mod:`attnid.symmetry.projector` adds the directions one factor
of a product cannot see).
"""

from __future__ import annotations

import itertools
import math

import torch

from ..layer.layout import Layout
from ..layer.spec import AttentionSpec
from .stacks import COMPUTE_DTYPE, blocks64, qk_stack, qk_unstack, vo_stack, vo_unstack


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
    w = blocks64(spec, theta)
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
    w = blocks64(spec, theta)
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


def commutant_basis(spec: AttentionSpec, dtype=COMPUTE_DTYPE, device=None) -> torch.Tensor:
    """A basis (u^2 + p, k, k) of the matrices commuting with every RoPE rotation.

    gl(u) on the unrotated dims p..k-1 (unit matrices) and, per rotated plane (2i, 2i+1), the
    identity and the quarter turn J = [[0, -1], [1, 0]] of that plane.
    """
    k, p = spec.d_head_qk, spec.rope_dims
    mats = []
    for a, b in itertools.product(range(p, k), repeat=2):
        m = torch.zeros(k, k, dtype=dtype)
        m[a, b] = 1.0
        mats.append(m)
    for i in range(0, p, 2):
        one, turn = torch.zeros(k, k, dtype=dtype), torch.zeros(k, k, dtype=dtype)
        one[i, i] = one[i + 1, i + 1] = 1.0
        turn[i + 1, i], turn[i, i + 1] = 1.0, -1.0
        mats += [one, turn]
    return torch.stack(mats).to(device) if mats else torch.zeros(0, k, k, dtype=dtype, device=device)


def orbit_tangent(
    spec: AttentionSpec,
    theta: torch.Tensor,
    qk: torch.Tensor | None = None,
    vo: torch.Tensor | None = None,
    query_heads=None,
) -> torch.Tensor:
    """Tangent vectors (n, P) of :func:`act` at the identity: d/dt act(theta, I + t X, I + t Y) at t = 0.

    qk (n, k, k) or (n, G, k, k) generators X, vo (n, v, v) or (n, G, v, v) generators Y (same n;
    None = zero): per group (Q_g X, -K_g X^T, V_g Y, -O_g Y^T), i.e. dW_Q^h = W_Q^h X_g,
    dW_K^g = -W_K^g X_g^T, dW_V^g = W_V^g Y_g, dW_O^h = -Y_g W_O^h, biases alike, db_O = 0.
    `query_heads` restricts the query side to those heads (None = all): a generator given to one
    head of a shared KV group only, whose key cannot follow (not a symmetry). Float64.
    """
    layout = Layout(spec)
    w = blocks64(spec, theta)
    G, r = spec.G, spec.group_size
    n = (qk if qk is not None else vo).shape[0]
    out = {name: t.new_zeros(n, *t.shape) for name, t in w.items()}
    if qk is not None:
        X = qk.to(device=theta.device, dtype=COMPUTE_DTYPE)
        X = X[:, None].expand(-1, G, -1, -1) if X.dim() == 3 else X  # (n, G, k, k)
        Q, K = qk_stack(spec, w)  # (G, r m_q, k), (G, c, k)
        dQ = (Q @ X).unflatten(-2, (r, -1))  # (n, G, r, m_q, k)
        if query_heads is not None:
            mask = torch.zeros(spec.H, dtype=COMPUTE_DTYPE, device=theta.device)
            mask[list(query_heads)] = 1.0
            dQ = dQ * mask.reshape(G, r)[None, :, :, None, None]
        out.update(qk_unstack(spec, dQ.flatten(-3, -2), -K @ X.mT))
    if vo is not None:
        Y = vo.to(device=theta.device, dtype=COMPUTE_DTYPE)
        Y = Y[:, None].expand(-1, G, -1, -1) if Y.dim() == 3 else Y  # (n, G, v, v)
        V, O = vo_stack(spec, w)  # (G, d + [b_V], v), (G, r d, v)
        out.update(vo_unstack(spec, V @ Y, -O @ Y.mT))
    return layout.flatten(out)
