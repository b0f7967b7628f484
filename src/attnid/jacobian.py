r"""The judge of the counts: the unidentified dimension measured as P - rank of the Jacobian.

For a spec with P parameters, the layer is a map theta -> Y(X; theta). At a generic point theta
and enough generic inputs X, the null space of J = dY/dtheta (all outputs of all tokens, one row
each) is the tangent space of the fibre, so its dimension, P - rank J, is the unidentified
dimension that :func:`attnid.counting.count` predicts. Everything runs in float64.

Input sizing (:func:`input_sizing`): by information per token, not by the raw output count. A
token's output row y_t = sum_h a_h(t) V_g W_O^h + b_O carries at most
    info = min(d, H d_v + 1, H (T - 1))
independent equations: it moves in the row spaces of the W_O^h (at most H d_v directions) plus
the constant b_O, and the query-key parameters reach it only through the H attention rows
a_h(t), each with T - 1 free entries (a softmax row sums to one; with a causal mask a query sees
(T - 1) / 2 other keys on average, so that term is halved). We take
    T = max(3, p + 2, ceil(c d / H) + 1)      (c = 2 if causal, else 1)
so that the attention rows do not limit info, and so that RoPE is seen: a rotated plane's score
varies with the query-key offset n as cos/sin(n w_i) over p/2 frequencies, p + 1 functions of n
with the constant, which need at least p + 1 distinct offsets (causal: offsets 0..T-1 only).
Then N = ceil(oversample * P / info) tokens (oversample = 3 by default) in B = max(2, ceil(N / T))
independent Gaussian sequences, so the N d rows of J exceed the identified dimension by the
oversampling factor. Measured (tests): with too few tokens the rank drops, with the rule it does
not, and halving the batch (oversample 1.5) leaves it unchanged.

Dense method (:func:`measure`, small P): J row by row via vmap over sequences of
``torch.func.jacrev`` (each output depends on its own sequence only, so one sequence's Jacobian
costs T d backward passes of length T, not of the whole batch), then ``svdvals`` in float64.
Rank tolerance: a singular value counts if sigma_i > RANK_RTOL * sigma_max with RANK_RTOL =
1e-10. Justification, measured: the singular values that belong to the null space are rounding
noise, ~1e-16..1e-15 sigma_max (eps = 2.2e-16 times a modest factor); the genuine ones go down to
~1e-3..1e-6 sigma_max (RoPE's slow frequencies base^(-2i/p) turn by only T w_i over a sequence,
and head sizes above d_model with RoPE are the worst). 1e-10 sits about 5 decades from each side,
and every row reports both margins: sigma_kept (smallest kept / sigma_max), sigma_dropped
(largest dropped / sigma_max) and their gap in decades. Invariance (:func:`verify`): the count
is measured again on the first half of the sequences and at another seed (new theta and X).

Symmetry directions (:func:`symmetry_directions`): the predicted null space, built from the
generators, per KV group g with heads h in g:
  * query-key: (W_Q^h M, b_Q^h M, -W_K^g M^T, -b_K^g M^T) for M in the commutant of the RoPE
    rotations: gl(u) on the u = k - p unrotated dims, a I + b J on each rotated plane;
  * value-output: (W_V^g N, b_V^g N, -N W_O^h) for N in gl(v);
  * directions one factor of a product cannot see (head sizes above d_model, or stacks of
    heads): for the unrotated product A B^T, A = [W_Q^h; b_Q^h]_{h in g} restricted to the
    unrotated columns and B = W_K^g on them, rows of dA in ker B and rows of dB in ker A; for
    W_V^g [W_O^h]_{h in g}, rows of dW_V (and db_V) in the left kernel of the stacked W_O, and
    columns of dW_O^h in ker W_V^g, with the constant c = sum_g b_V^g S_g + b_O,
    S_g = sum_{h in g} W_O^h, restored by db_O or, without b_O, by a value-bias change;
  * key bias on the unrotated dims (constant along keys inside the softmax);
  * value bias: (db_V^g = e, db_O = -e S_g) with b_O; without b_O the e with sum_g e_g S_g = 0.
The generators are not independent in general (GL acts with a stabiliser when head sizes exceed
d_model), so dim V is the numerical rank of V: it must equal the count, and J V must vanish
(||J Q|| <= RANK_RTOL sigma_max for an orthonormal basis Q of V). Directions outside it (a random
one; a generic non-commuting M under RoPE; a group element given to one head of a KV group only)
must not: ||J v|| > RANK_RTOL sigma_max ||v||.

Certificate method (:func:`certify`, large P, e.g. d = 64, 8 heads, P = 16,384): no SVD of J.
(1) Q = orthonormal basis of V, m = rank V; J Q by vmapped JVPs gives the upper bound
rank J <= P - m (numerically: ||J Q|| / sigma_max at rounding level). (2) Pick m coordinates S
by LU with partial pivoting of Q, so that Q[S, :] is invertible (its condition number is
reported) and no null direction lies in the span of the other coordinates. rank J >= rank
J[:, S^c], and J[:, S^c] has full column rank P - m iff A = J[:, S^c]^T J[:, S^c] is positive
definite. A is accumulated in float64 from row blocks of J (per-sequence jacrev, never all of J
at once), lower block triangle only (half the flops of a full product). (3) A Cholesky
factorisation of A - delta I, delta = (CERT_RTOL sigma_max)^2 with CERT_RTOL = 1e-5, succeeds
only if lambda_min(A) > delta up to rounding; the backward error of Cholesky and of forming A is
~ n eps ||A|| <= 2e-12 sigma_max^2 for n = 15,360, fifty times below delta. Success certifies
sigma_min(J[:, S^c]) >= ~CERT_RTOL sigma_max, hence rank J >= P - m, and with (1), P - rank J = m.
sigma_kept is then estimated by inverse iteration with the factor (it is sigma_min(J[:, S^c]), a
lower bound of the smallest kept singular value of J, by interlacing). The Gram squares singular
values, so the certificate cannot resolve sigma below ~sqrt(n eps) ~ 1e-6 sigma_max: it is meant
for specs whose smallest kept singular value is above CERT_RTOL (no RoPE, or RoPE with few
planes; the default-base RoPE with many planes can fall below it); the dense method has no such
floor. Cost: rows P^2 for A (rows ~ 1.25 P) and P^3 / 3 for Cholesky, memory one n x n matrix.

    >>> from attnid import AttentionSpec
    >>> verify(AttentionSpec(8, 2, biases="qkvo"))["passed"]
    True
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from dataclasses import dataclass

import torch
from torch.func import jacrev, jvp, vjp, vmap

from .attention import attention
from .counting import count
from .layout import Layout
from .spec import AttentionSpec

RANK_RTOL = 1e-10  # relative singular-value threshold of the dense rank (module docstring)
DENSE_MAX_PARAMS = 6000  # above this, the certificate (a dense float64 SVD of 3P x P takes minutes)
CERT_RTOL = 1e-5  # relative singular value certified by the shifted Cholesky (module docstring)
DTYPE = torch.float64


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sizing:
    """How many random tokens the measurement uses (rule in the module docstring)."""

    info_per_token: int  # min(d, H d_v + 1, H (T - 1) [/2 if causal]): equations one token's output can carry
    tokens: int  # N = ceil(oversample * P / info)
    seq_len: int  # T = max(min_seq_len, p + 2, ceil(d / H [x2 if causal]) + 1)
    batch: int  # B = max(2, ceil(N / T)) sequences (two at least, so that half the batch is a batch)


def input_sizing(spec: AttentionSpec, oversample: float = 3.0, min_seq_len: int = 3) -> Sizing:
    """Tokens and sequence length by information per token (rule in the module docstring)."""
    if oversample <= 0:
        raise ValueError(f"oversample must be positive, got {oversample}")
    P, d, H = Layout(spec).size, spec.d_model, spec.n_heads
    causal = 2 if spec.causal else 1  # a causal query sees (T - 1) / 2 other keys on average
    seq_len = max(min_seq_len, spec.rope_dims + 2, math.ceil(causal * d / H) + 1)
    info = min(d, H * spec.d_head_v + 1, H * (seq_len - 1) // causal)
    tokens = math.ceil(oversample * P / info)
    return Sizing(info, tokens, seq_len, max(2, math.ceil(tokens / seq_len)))


def random_point(spec: AttentionSpec, sizing: Sizing, seed: int, device=None, dtype=DTYPE):
    """(theta (P,), X (B, T, d)): Layout.init weights and standard Gaussian inputs from one seed."""
    gen = torch.Generator().manual_seed(int(seed))
    theta = Layout(spec).init(gen, dtype=dtype, device=device)
    x = torch.randn(sizing.batch, sizing.seq_len, spec.d_model, generator=gen, dtype=dtype).to(device)
    return theta, x


# --------------------------------------------------------------------------------------------
# Jacobian, rank, products
# --------------------------------------------------------------------------------------------


def jacobian_rows(spec: AttentionSpec, theta: torch.Tensor, x: torch.Tensor, max_bytes: float = 2**28) -> torch.Tensor:
    """J (B T d, P): rows ordered by sequence, then token, then output coordinate.

    Per sequence, jacrev of Y (T, d) w.r.t. theta, vmapped over sequences in chunks of at most
    `max_bytes` of Jacobian.
    """
    layout = Layout(spec)
    B, T, d = x.shape

    def one_sequence(th, xs):  # (P,), (T, d) -> (T, d)
        return attention(th, xs, spec, layout)

    per_seq = T * d * layout.size * x.element_size()
    chunk = max(1, int(max_bytes // per_seq))
    jac = vmap(jacrev(one_sequence), in_dims=(None, 0), chunk_size=chunk)(theta, x)  # (B, T, d, P)
    return jac.reshape(B * T * d, layout.size)


def numerical_rank(sigma: torch.Tensor, rtol: float = RANK_RTOL) -> dict:
    """Rank of singular values `sigma` (any order): count of sigma_i > rtol * max, with the margins.

    Returns rank, sigma_kept (smallest kept / max), sigma_dropped (largest dropped / max, 0 if none)
    and gap = log10(sigma_kept / sigma_dropped) in decades (inf if nothing is dropped).
    """
    s = torch.sort(sigma.detach().abs().to(torch.float64).cpu(), descending=True).values
    if s.numel() == 0 or s[0] == 0:
        return {
            "rank": 0,
            "sigma_kept": float("nan"),
            "sigma_dropped": 0.0 if s.numel() else float("nan"),
            "gap": float("nan"),
        }
    rel = s / s[0]
    rank = int((rel > rtol).sum())
    kept = float(rel[rank - 1])
    dropped = float(rel[rank]) if rank < rel.numel() else 0.0
    gap = math.log10(kept / dropped) if dropped > 0 else float("inf")
    return {"rank": rank, "sigma_kept": kept, "sigma_dropped": dropped, "gap": gap}


def _output(spec, layout, x):
    return lambda th: attention(th, x, spec, layout)


def jvps(
    spec: AttentionSpec, theta: torch.Tensor, x: torch.Tensor, tangents: torch.Tensor, chunk: int = 256
) -> torch.Tensor:
    """J u for each row u of tangents (n, P): (n, B T d), vmapped forward-mode products in chunks."""
    f = _output(spec, Layout(spec), x)
    push = vmap(lambda u: jvp(f, (theta,), (u,))[1].reshape(-1))
    return torch.cat([push(tangents[i : i + chunk]) for i in range(0, tangents.shape[0], chunk)])


def gauss_newton(spec: AttentionSpec, theta: torch.Tensor, x: torch.Tensor, chunk: int = 256):
    """A function U (n, P) -> (J^T J U^T)^T (n, P): one JVP then one VJP per row, vmapped in chunks."""
    f = _output(spec, Layout(spec), x)
    _, pull = vjp(f, theta)

    def product(u):
        return pull(jvp(f, (theta,), (u,))[1])[0]

    batched = vmap(product)
    return lambda U: torch.cat([batched(U[i : i + chunk]) for i in range(0, U.shape[0], chunk)])


def sigma_max(spec, theta, x, iters: int = 30, seed: int = 0) -> float:
    """Largest singular value of J by power iteration on J^T J (Gauss-Newton products)."""
    gn = gauss_newton(spec, theta, x)
    gen = torch.Generator().manual_seed(seed)
    u = torch.randn(1, theta.numel(), generator=gen, dtype=theta.dtype).to(theta.device)
    lam = 0.0
    for _ in range(iters):
        u = u / u.norm()
        w = gn(u)
        lam = float((u * w).sum())
        u = w
    return math.sqrt(max(lam, 0.0))


# --------------------------------------------------------------------------------------------
# Predicted null space: symmetry directions
# --------------------------------------------------------------------------------------------


def commutant_basis(spec: AttentionSpec, dtype=DTYPE, device=None) -> torch.Tensor:
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


def _kernel(mat: torch.Tensor, rtol: float = 1e-10) -> torch.Tensor:
    """Orthonormal basis (n, n - rank) of the right kernel of mat (m, n), by SVD."""
    _, s, vh = torch.linalg.svd(mat, full_matrices=True)
    rank = int((s > rtol * s.max()).sum()) if s.numel() and s.max() > 0 else 0
    return vh[rank:].mT


class _Directions:
    """Accumulates directions as (n, P) rows, written through named block views."""

    def __init__(self, layout: Layout, theta: torch.Tensor):
        self.layout, self.theta, self.rows = layout, theta, []

    def new(self, n: int):
        D = self.theta.new_zeros(n, self.layout.size)
        self.rows.append(D)
        return D, self.layout.unflatten(D)

    def matrix(self) -> torch.Tensor:
        return torch.cat(self.rows) if self.rows else self.theta.new_zeros(0, self.layout.size)


def query_key_directions(spec: AttentionSpec, theta: torch.Tensor, mats: torch.Tensor, heads=None) -> torch.Tensor:
    """(n, P): for each M in mats (n, k, k), per group, (W_Q^h M, b_Q^h M, -W_K^g M^T, -b_K^g M^T).

    `heads` restricts the query side to those heads (None = all): giving one head of a shared
    group its own M is not a symmetry (used as an outside direction). mats may also hold one
    matrix per group, shape (n, G, k, k).
    """
    layout = Layout(spec)
    w = layout.unflatten(theta)
    acc = _Directions(layout, theta)
    D, dw = acc.new(mats.shape[0])
    if mats.dim() == 3:
        mats = mats[:, None].expand(-1, spec.G, -1, -1)  # (n, G, k, k)
    per_head = mats[:, torch.arange(spec.H, device=theta.device) // spec.group_size]  # (n, H, k, k)
    mask = torch.ones(spec.H, dtype=theta.dtype, device=theta.device)
    if heads is not None:
        mask = torch.zeros_like(mask)
        mask[list(heads)] = 1.0
    dw["W_Q"][:] = torch.einsum("hdk,nhkl,h->nhdl", w["W_Q"], per_head, mask)
    dw["W_K"][:] = -torch.einsum("gdk,nglk->ngdl", w["W_K"], mats)
    if "b_Q" in w:
        dw["b_Q"][:] = torch.einsum("hk,nhkl,h->nhl", w["b_Q"], per_head, mask)
    if "b_K" in w:
        dw["b_K"][:] = -torch.einsum("gk,nglk->ngl", w["b_K"], mats)
    return D


def _value_constant_fix(spec, w, dw, dc, group_sums):
    """Cancel a change dc (n, d) of the constant c: with db_O, or (no b_O) by value-bias changes.

    Returns a bool mask (n,) of the directions that could be fixed (all, generically).
    """
    if "b_O" in dw:
        dw["b_O"][:] -= dc
        return torch.ones(dc.shape[0], dtype=torch.bool)
    if "b_V" not in dw:
        return (dc.abs().amax(dim=1) == 0).cpu()
    S_all = group_sums.reshape(-1, spec.d)  # (G v, d): c depends on b_V through e S_all
    e = -dc @ torch.linalg.pinv(S_all)  # (n, G v) min-norm solution of e S_all = -dc
    dw["b_V"][:] += e.reshape(-1, spec.G, spec.d_head_v)
    resid = (e @ S_all + dc).norm(dim=1)
    return (resid <= 1e-9 * (1 + dc.norm(dim=1))).cpu()


def symmetry_directions(spec: AttentionSpec, theta: torch.Tensor) -> torch.Tensor:
    """V (n, P): the predicted null-space generators at theta (module docstring); rows may be dependent."""
    layout = Layout(spec)
    w = layout.unflatten(theta)
    d, G, r, k, v, p = spec.d, spec.G, spec.group_size, spec.d_head_qk, spec.d_head_v, spec.rope_dims
    u = k - p
    acc = _Directions(layout, theta)
    basis = commutant_basis(spec, theta.dtype, theta.device)  # (n, k, k)
    for g in range(G):  # one commutant element per KV group
        mats = basis.new_zeros(basis.shape[0], G, k, k)
        mats[:, g] = basis
        acc.rows.append(query_key_directions(spec, theta, mats))

    # value-output: (W_V N, b_V N, -N W_O) for N in gl(v), per group
    eye_v = torch.eye(v, dtype=theta.dtype, device=theta.device)
    units = (eye_v[:, None, :, None] * eye_v[None, :, None, :]).reshape(v * v, v, v)  # E_ab
    heads_of = [list(range(g * r, (g + 1) * r)) for g in range(G)]
    for g in range(G):
        D, dw = acc.new(v * v)
        dw["W_V"][:, g] = w["W_V"][g] @ units
        if "b_V" in w:
            dw["b_V"][:, g] = w["b_V"][g] @ units
        dw["W_O"][:, heads_of[g]] = -torch.einsum("nab,hbd->nhad", units, w["W_O"][heads_of[g]])

    group_sums = w["W_O"].reshape(G, r, v, d).sum(dim=1)  # S_g (G, v, d)
    for g in range(G):
        hs = heads_of[g]
        # query-key dead directions on the unrotated columns
        if u > 0:
            A = w["W_Q"][hs][..., p:].reshape(-1, u)  # (r d, u)
            if "b_Q" in w:
                A = torch.cat((A, w["b_Q"][hs][:, p:]))  # + r rows
            rows, head_of_row = torch.arange(r * d), g * r + torch.arange(r * d) // d
            for n in _kernel(w["W_K"][g][:, p:]).mT:  # rows of dA in ker B
                D, dw = acc.new(r * (d + ("b_Q" in w)))
                dw["W_Q"][rows, head_of_row, rows % d, p:] = n
                if "b_Q" in w:
                    dw["b_Q"][r * d + torch.arange(r), g * r + torch.arange(r), p:] = n
            for n in _kernel(A).mT:  # rows of dB in ker A
                D, dw = acc.new(d)
                dw["W_K"][torch.arange(d), g, torch.arange(d), p:] = n
            if "b_K" in w:  # key bias on unrotated dims: constant along keys
                D, dw = acc.new(u)
                dw["b_K"][torch.arange(u), g, p + torch.arange(u)] = 1.0
        # value-output dead directions
        O_stack = w["W_O"][hs].permute(1, 0, 2).reshape(v, r * d)  # [W_O^h]_h (v, r d)
        for n in _kernel(O_stack.mT).mT:  # n^T W_O^h = 0 for all h in g: rows of dW_V (and db_V)
            D, dw = acc.new(d + ("b_V" in w))
            dw["W_V"][torch.arange(d), g, torch.arange(d)] = n
            if "b_V" in w:
                dw["b_V"][d, g] = n
        for n in _kernel(w["W_V"][g]).mT:  # W_V^g n = 0: columns of dW_O^h
            D, dw = acc.new(r * d)
            idx = torch.arange(r * d)
            dw["W_O"][idx, g * r + idx // d, :, idx % d] = n
            dc = torch.zeros(r * d, d, dtype=theta.dtype, device=theta.device)
            if "b_V" in w:
                dc[idx, idx % d] = w["b_V"][g] @ n
            ok = _value_constant_fix(spec, w, dw, dc, group_sums)
            acc.rows[-1] = D[ok.to(D.device)]
    # value bias
    if "b_V" in w:
        if "b_O" in w:
            D, dw = acc.new(G * v)
            idx = torch.arange(G * v)
            dw["b_V"].reshape(-1, G * v)[idx, idx] = 1.0
            dw["b_O"][:] = -group_sums.reshape(G * v, d)
        else:
            E = _kernel(group_sums.reshape(G * v, d).mT).mT  # e with e S_all = 0
            D, dw = acc.new(E.shape[0])
            dw["b_V"][:] = E.reshape(-1, G, v)
    return acc.matrix()


def outside_directions(spec: AttentionSpec, theta: torch.Tensor, seed: int = 0) -> dict:
    """Directions that must NOT be in the null space: name -> (P,).

    random: a Gaussian direction; noncommuting (RoPE only): (W_Q M, -W_K M^T) for a generic M minus
    its commutant part; unshared (GQA/MQA only): a commuting M given to the first query head of a
    group only (its key is shared with the other heads).
    """
    from .symmetry import commutant  # projection onto the RoPE commutant

    gen = torch.Generator().manual_seed(seed + 7919)
    k = spec.d_head_qk
    out = {"random": torch.randn(theta.numel(), generator=gen, dtype=theta.dtype).to(theta.device)}
    M = torch.randn(1, k, k, generator=gen, dtype=theta.dtype).to(theta.device)
    if spec.rope_dims:
        out["noncommuting"] = query_key_directions(spec, theta, M - commutant(spec, M))[0]
    if spec.group_size > 1:
        out["unshared"] = query_key_directions(spec, theta, commutant(spec, M), heads=[0])[0]
    return out


def orthonormal_basis(V: torch.Tensor, rtol: float = RANK_RTOL) -> torch.Tensor:
    """Q (P, rank V): orthonormal basis of the row span of V (n, P), rank by relative singular values."""
    if V.shape[0] == 0:
        return V.new_zeros(V.shape[1], 0)
    V = V / V.norm(dim=1, keepdim=True).clamp_min(torch.finfo(V.dtype).tiny)
    U, s, _ = torch.linalg.svd(V.mT, full_matrices=False)
    return U[:, : numerical_rank(s, rtol)["rank"]]


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------


def spec_row(spec: AttentionSpec) -> dict:
    return {
        "label": spec.label,
        "d_model": spec.d_model,
        "n_heads": spec.n_heads,
        "n_kv_heads": spec.n_kv_heads,
        "d_head_qk": spec.d_head_qk,
        "d_head_v": spec.d_head_v,
        "rope_dims": spec.rope_dims,
        "biases": spec.biases or "none",
        "causal": spec.causal,
    }


def measure(
    spec: AttentionSpec,
    seed: int = 0,
    oversample: float = 3.0,
    device=None,
    rtol: float = RANK_RTOL,
    half: bool = False,
    dtype=DTYPE,
):
    """Dense measurement at one random point: (result dict, J, theta, x, relative singular values).

    result: rank, measured = P - rank, sigma_kept, sigma_dropped, gap, sigma_max, tokens, seq_len;
    with half=True also measured_half, from the first half of the sequences (same theta).
    """
    sizing = input_sizing(spec, oversample)
    theta, x = random_point(spec, sizing, seed, device, dtype)
    J = jacobian_rows(spec, theta, x)  # (B T d, P)
    sigma = torch.linalg.svdvals(J)
    rank = numerical_rank(sigma, rtol)
    P = J.shape[1]
    result = {
        **rank,
        "measured": P - rank["rank"],
        "sigma_max": float(sigma.max()),
        "tokens": sizing.batch * sizing.seq_len,
        "seq_len": sizing.seq_len,
    }
    if half:
        rows = (sizing.batch // 2) * sizing.seq_len * spec.d_model
        result["measured_half"] = P - numerical_rank(torch.linalg.svdvals(J[:rows]), rtol)["rank"]
    return result, J, theta, x, (sigma / sigma.max()).cpu()


def direction_checks(
    spec: AttentionSpec, theta: torch.Tensor, apply_J, sigma_max_value: float, seed: int = 0, rtol: float = RANK_RTOL
) -> dict:
    """Predicted directions in the null space, others not. apply_J: U (n, P) -> J U^T as (n, rows).

    symmetry_rank: rank of the generators; symmetry_residual: ||J Q||_F / sigma_max for an
    orthonormal basis Q (an upper bound of the largest singular value of J on span Q); outside_min:
    min over outside directions of ||J v|| / (sigma_max ||v||).
    """
    Q = orthonormal_basis(symmetry_directions(spec, theta), rtol)  # (P, m)
    JQ = apply_J(Q.mT) if Q.shape[1] else Q.new_zeros(0, 1)  # (m, rows)
    resid = float(torch.linalg.matrix_norm(JQ)) / sigma_max_value if Q.shape[1] else 0.0
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


def verify(
    spec: AttentionSpec, seed: int = 0, oversample: float = 3.0, device=None, rtol: float = RANK_RTOL, other_seeds=(1,), half_batch: bool = True,
    directions: bool = True, dtype=DTYPE,
) -> dict:  # fmt: skip
    """Predicted vs measured unidentified dimension of one spec (dense method), with all checks.

    passed = measured == predicted and (invariance: the same on half the batch and at every seed of
    `other_seeds`) and (directions: rank V == predicted, J V ~ 0, and every outside direction is seen).
    """
    start = time.perf_counter()
    counts = count(spec)
    res, J, theta, x, sigma = measure(spec, seed, oversample, device, rtol, half=half_batch, dtype=dtype)
    row = {**spec_row(spec), "total": counts.total, "predicted": counts.unidentified, "measured": res["measured"]}
    row.update({key: res[key] for key in ("sigma_kept", "sigma_dropped", "gap", "tokens", "seq_len")})
    row["agree"] = res["measured"] == counts.unidentified
    checks = [row["agree"]]
    if half_batch or other_seeds:
        values = [res["measured"]]
        if half_batch:
            row["measured_half"] = res["measured_half"]
            values.append(res["measured_half"])
        if other_seeds:
            others = [measure(spec, s, oversample, device, rtol, dtype=dtype)[0]["measured"] for s in other_seeds]
            row["measured_other_seeds"] = ";".join(map(str, others))
            values += others
        row["invariant"] = len(set(values)) == 1
        checks.append(row["invariant"])
    if directions:
        dirs = direction_checks(spec, theta, lambda U: U @ J.mT, res["sigma_max"], seed, rtol)
        dirs.pop("_Q")
        row.update(dirs)
        row["directions_ok"] = (
            dirs["symmetry_rank"] == counts.unidentified
            and dirs["symmetry_residual"] <= rtol
            and dirs["outside_min"] > rtol
        )
        checks.append(row["directions_ok"])
    row["passed"] = bool(all(checks))
    row["method"] = "dense"
    row["seconds"] = time.perf_counter() - start
    return row


def singular_values(
    spec: AttentionSpec, seed: int = 0, oversample: float = 3.0, device=None, dtype=DTYPE
) -> torch.Tensor:
    """All P singular values of J / sigma_max, descending (for the spectrum figure)."""
    return measure(spec, seed, oversample, device, dtype=dtype)[4]


def verify_auto(
    spec: AttentionSpec,
    seed: int = 0,
    oversample: float = 3.0,
    device=None,
    dtype=DTYPE,
    rtol: float = RANK_RTOL,
    **dense_options,
) -> dict:
    """verify() (dense) up to DENSE_MAX_PARAMS parameters, certify() above (with its own oversampling)."""
    if Layout(spec).size <= DENSE_MAX_PARAMS:
        return verify(spec, seed, oversample, device, rtol, dtype=dtype, **dense_options)
    return certify(spec, seed, device=device, dtype=dtype, rtol=rtol, log=lambda *a: None)


# --------------------------------------------------------------------------------------------
# Certificate for large specs
# --------------------------------------------------------------------------------------------


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


def _pivot_coordinates(Q: torch.Tensor) -> torch.Tensor:
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


def certify(
    spec: AttentionSpec, seed: int = 0, oversample: float = 1.25, device=None, rtol: float = RANK_RTOL, cert_rtol: float = CERT_RTOL,
    chunk: int = 256, block: int = 2048, row_chunk_bytes: float = 2**28, log=print, dtype=DTYPE,
) -> dict:  # fmt: skip
    """Certified P - rank J for a large spec without forming J (method in the module docstring)."""
    start = time.perf_counter()
    reset_peak_memory()
    if torch.device(device or "cpu").type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    counts = count(spec)
    sizing = input_sizing(spec, oversample)
    theta, x = random_point(spec, sizing, seed, device, dtype)
    P = theta.numel()
    timings = {}

    def lap(name, t0):
        timings[f"seconds_{name}"] = time.perf_counter() - t0
        log(f"[{spec.label}] {name}: {timings[f'seconds_{name}']:.1f} s, peak {peak_memory_bytes() / 2**30:.2f} GiB")

    t0 = time.perf_counter()
    smax = sigma_max(spec, theta, x)
    apply_J = lambda U: jvps(spec, theta, x, U, chunk)  # noqa: E731
    dirs = direction_checks(spec, theta, apply_J, smax, seed, rtol)
    Q = dirs.pop("_Q")
    m = Q.shape[1]
    lap("directions", t0)

    t0 = time.perf_counter()
    S = _pivot_coordinates(Q)
    keep = torch.ones(P, dtype=torch.bool)
    keep[S] = False
    rest = torch.nonzero(keep).squeeze(1).to(theta.device)  # S^c, P - m coordinates
    pivot_cond = float(torch.linalg.cond(Q[S.to(Q.device)])) if m else 1.0
    n = rest.numel()
    A = torch.zeros(n, n, dtype=theta.dtype, device=theta.device)  # lower triangle of J[:, S^c]^T J[:, S^c]
    per_chunk = max(1, int(row_chunk_bytes // (sizing.seq_len * spec.d_model * P * theta.element_size())))
    for i in range(0, x.shape[0], per_chunk):
        rows = jacobian_rows(spec, theta, x[i : i + per_chunk])[:, rest]  # (rows_c, n)
        accumulate_gram(A, rows, block)
        del rows
    lap("gram", t0)

    t0 = time.perf_counter()
    delta = (cert_rtol * smax) ** 2
    A.diagonal().sub_(delta)
    info = torch.empty((), dtype=torch.int32, device=A.device)
    L, _ = torch.linalg.cholesky_ex(A, out=(A, info))  # in place: lower triangle of A becomes L
    certified = int(info) == 0
    sigma_kept = float("nan")
    if certified:  # inverse iteration for lambda_min(A - delta I) with the factor
        gen = torch.Generator().manual_seed(seed)
        y = torch.randn(n, 1, generator=gen, dtype=theta.dtype).to(theta.device)
        lam = float("nan")
        for _ in range(20):
            y = y / y.norm()
            z = torch.cholesky_solve(y, L)
            lam = 1.0 / float((y * z).sum())
            y = z
        sigma_kept = math.sqrt(lam + delta) / smax
    del L
    lap("cholesky", t0)

    measured = m if certified and dirs["symmetry_residual"] <= rtol else None
    sigma_dropped = dirs["symmetry_residual"]
    row = {**spec_row(spec), "total": counts.total, "predicted": counts.unidentified, "measured": measured}
    row.update(
        {
            "sigma_kept": sigma_kept,
            "sigma_dropped": sigma_dropped,
            "gap": math.log10(sigma_kept / sigma_dropped) if certified and sigma_dropped > 0 else float("nan"),
            "tokens": sizing.batch * sizing.seq_len,
            "seq_len": sizing.seq_len,
            "certified": certified,
            "cert_rtol": cert_rtol,
            "pivot_condition": pivot_cond,
            **dirs,
        }
    )
    row["agree"] = measured == counts.unidentified
    row["directions_ok"] = (
        dirs["symmetry_rank"] == counts.unidentified
        and dirs["symmetry_residual"] <= rtol
        and dirs["outside_min"] > rtol
    )
    row["passed"] = bool(row["agree"] and row["directions_ok"])
    row["method"] = "certificate"
    row.update(timings)
    row["seconds"] = time.perf_counter() - start
    row["peak_memory_bytes"] = peak_memory_bytes()  # host (VmHWM)
    if theta.device.type == "cuda":
        row["peak_gpu_memory_bytes"] = torch.cuda.max_memory_allocated(theta.device)
    row["threads"] = torch.get_num_threads()
    return row


# --------------------------------------------------------------------------------------------
# Command line: python -m attnid verify <spec flags> [--seed ...]
# --------------------------------------------------------------------------------------------


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    """Extra flags of `python -m attnid verify` (the spec flags are those of `count`)."""
    parser.add_argument("--seed", type=int, default=0, help="seed of the random point and inputs (default 0)")
    parser.add_argument(
        "--oversample", type=float, default=None, help="tokens x info per token / P (default 3 dense, 1.25 certificate)"
    )
    parser.add_argument(
        "--method",
        choices=("auto", "dense", "certificate"),
        default="auto",
        help="dense J + SVD, or the Cholesky certificate (auto: dense up to --dense-max-params)",
    )
    parser.add_argument(
        "--dense-max-params",
        type=int,
        default=DENSE_MAX_PARAMS,
        help=f"largest P measured densely by --method auto (default {DENSE_MAX_PARAMS})",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument(
        "--no-invariance", action="store_true", help="skip the half-batch and second-seed re-measurements"
    )


def verify_cli(spec: AttentionSpec, args: argparse.Namespace) -> dict:
    """`python -m attnid verify`: predicted, measured, gap, passed, seconds (and the other checks)."""
    from .device import resolve_device

    if getattr(args, "threads", None):
        torch.set_num_threads(args.threads)
    device = resolve_device(getattr(args, "device", "cpu"))
    method = getattr(args, "method", "auto")
    if method == "auto":
        method = "dense" if Layout(spec).size <= getattr(args, "dense_max_params", DENSE_MAX_PARAMS) else "certificate"
    seed, oversample = getattr(args, "seed", 0), getattr(args, "oversample", None)
    if method == "dense":
        invariance = not getattr(args, "no_invariance", False)
        row = verify(
            spec, seed, oversample or 3.0, device, other_seeds=(seed + 1,) if invariance else (), half_batch=invariance
        )
    else:
        row = certify(spec, seed, oversample or 1.25, device, log=lambda *a: None)
    return {
        key: (value if not isinstance(value, float) or math.isfinite(value) else str(value))
        for key, value in row.items()
    }
