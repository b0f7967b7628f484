r"""Generators of the first MLP's free table from the model's per-token factorisation (source `first_mlp_table`;
part of `.token_points`, which returns them).

A one-block parallel pre-LN model without learned positions reads, at a position holding token t, only the
token's row h_t = E[t] (times the embedding scale, after an embedding norm where there is one). Its logits at
position i of any sequence are

    z_i = n(h_1[i]) G^T + c,   h_1[i] = W[t_i] + Sum_h Sum_j a^h_ij VO^h[t_j],
    a^h_ij = softmax_j(rope(q^h[t_i]) . rope(k^g[t_j]) / sqrt(k))

with n the final norm without its gain and bias (n(h) = h / rms(h), centred first for a LayerNorm), and the
per-token quantities

    F = (W (V, d), q (H, V, k), k (G, V, k), VO (H, V, d), G (V, d), c (V))
    W[t] = h_t + MLP(Norm_2(h_t)) + b_O + Sum_h b_V^g W_O^h   (the value bias passes the softmax as a constant:
                                                               the weights sum to 1; with sinks it stays in VO)
    q^h[t], k^g[t] the projections of x_t = Norm_1(h_t) (their biases and q/k norms, before RoPE)
    VO^h[t] = x_t W_V^g W_O^h,   G = U^T diag(g_f) (tied: E diag(g_f)),   c = beta_f U + b_U

So the logits depend on theta only through F, and F changes that the rest of the map ignores keep them too:
the final norm's invariances acting on every h_1 (a rotation m of the stream, m skew and, for a LayerNorm,
inside the centred space: dW = W m, dVO = VO m, dG = G m; at eps = 0 a scale: dW = W, dVO = VO; for a
LayerNorm, a shift along 1 of each token's W, each head's VO and each G row), a constant added to a head's VO
and taken from W, and, without RoPE on them, a constant shift of each key group's k (the softmax drops it;
no sinks). Every (t, m) with dF t = A m (A: those changes, one column each) keeps every logit of every
sequence; the t parts are symmetry directions of the whole model, found without its Jacobian. Their span
holds the free table's directions (`attnid.model.counting.token_points.first_mlp_table`: the table's surplus,
the reading gauge, the shift) beside directions of other sources; the certificate takes the rank of all
generators together. The kernel of [dF, A] is read off its SVD at the relative threshold RANK_RTOL. dF has
V (2 d + 1 + (H + G) k + H d) rows and P columns: tiny sizes only (MAX_PARAMS); with more blocks after the
first the stream's invariances act through them too, which is not written here (the certificate then reads
the source off the Jacobian, as before).
"""

from __future__ import annotations

import torch

from ...jacobian import RANK_RTOL, numerical_rank
from ...layer.spec_variants import QK_NORMS_AFTER_ROPE
from ...layer.variants import latent_qkv, normalize_qk
from ..point import DTYPE, Point

MAX_PARAMS = 20_000  # columns of dF above which the kernel is not computed (a dense SVD of that width)
PARTS = ("W", "q", "k", "VO", "G", "c")


def _unsupported(point: Point) -> str:
    """Why the factorisation is not written for this model ('' when it is)."""
    spec = point.spec
    a = spec.layer_specs[0].attention
    if spec.n_layers != 1:
        return f"{spec.n_layers} blocks (the stream's invariances would act through the later ones)"
    if not spec.final_norm:
        return "no final norm"
    if a.qk_norm in QK_NORMS_AFTER_ROPE or a.qk_norm == "rms_all" or a.sub_norm:
        return f"qk_norm {a.qk_norm!r} / sub_norm"
    if spec.mlm_head or spec.norm_position != "pre" or not spec.parallel:
        return "not a parallel pre-LN block with a plain head"
    if point.layout.size > MAX_PARAMS:
        return f"{point.layout.size:,} parameters (the kernel is computed up to {MAX_PARAMS:,})"
    return ""


def per_token_parts(point: Point, w: dict) -> dict[str, torch.Tensor]:
    """F at the blocks w (module docstring): {part: tensor}."""
    from ...model.forward import mlp, norm

    spec = point.spec
    a = spec.layer_specs[0].attention
    prefix = "layers.0.attn."
    groups = torch.arange(a.n_heads) // a.group_size  # (H,) the KV group of each head
    h = w["embed"] * spec.embed_scale  # (V, d): the block's input at each token
    if "token_type" in w:
        h = h + w["token_type"][0]
    if spec.embedding_norm:
        h = norm(h, w, "embed_norm", spec)
    x = norm(h, w, "layers.0.norm_1", spec)
    m = x if spec.shared_norm else norm(h, w, "layers.0.norm_2", spec)
    att = {k[len(prefix) :]: v for k, v in w.items() if k.startswith(prefix)}
    table = h + mlp(m, w, "layers.0.mlp", spec.layer_specs[0].mlp, spec.norm_eps)  # (V, d)
    if a.kv_lora_rank:
        q, k, v, _ = latent_qkv(x[None], att, a)  # (1, H, V, k), (1, H, V, k), (1, H, V, v)
    else:
        q = torch.einsum("td,hdk->htk", x, att["W_Q"])[None]
        k = torch.einsum("td,gdk->gtk", x, att["W_K"])[None]
        v = torch.einsum("td,gdv->gtv", x, att["W_V"])[None]
        q = q + att["b_Q"][:, None, :] if "b_Q" in att else q
        k = k + att["b_K"][:, None, :] if "b_K" in att else k
        if "b_V" in att and a.sinks:  # weights summing to less than 1: the bias stays with the tokens
            v = v + att["b_V"][:, None, :]
        elif "b_V" in att:
            table = table + torch.einsum("hv,hvd->d", att["b_V"][groups], att["W_O"])
        v = v[:, groups]  # (1, H, V, v)
    q, k = normalize_qk(q, k, att, a)
    if "b_O" in att:
        table = table + att["b_O"]
    U = w["embed"].T if spec.tied else w["unembed"]  # (d, V)
    g = w.get("final_norm.gain")
    g = torch.ones(spec.d_model, dtype=DTYPE) if g is None else (1.0 + g if spec.gemma_gain else g)
    c = w["final_norm.bias"] @ U if "final_norm.bias" in w else torch.zeros(spec.vocab_size, dtype=DTYPE)
    c = c + w["unembed_bias"] if "unembed_bias" in w else c
    VO = torch.einsum("htv,hvd->htd", v[0], att["W_O"])  # (H, V, d)
    return {"W": table, "q": q[0], "k": k[0], "VO": VO, "G": U.T * g, "c": c}


def downstream_changes(point: Point, F: dict[str, torch.Tensor]) -> torch.Tensor:
    """A (rows of F, n): the changes of F the rest of the map ignores (module docstring), one unit column each."""
    spec = point.spec
    a = spec.layer_specs[0].attention
    d, V = spec.d_model, spec.vocab_size
    ln = spec.norm == "layernorm"
    cols = []

    def col(**parts):
        cols.append(torch.cat([parts.get(n, torch.zeros_like(F[n])).reshape(-1) for n in PARTS]))

    basis = torch.eye(d, dtype=DTYPE)
    if ln:  # the centred space: an orthonormal basis of 1-perp
        basis = torch.linalg.qr(torch.eye(d, dtype=DTYPE) - 1.0 / d).Q[:, : d - 1]
    n = basis.shape[1]
    for i in range(n):
        for j in range(i + 1, n):
            m = torch.outer(basis[:, i], basis[:, j]) - torch.outer(basis[:, j], basis[:, i])
            col(W=F["W"] @ m, VO=F["VO"] @ m, G=F["G"] @ m)
    if spec.norm_eps == 0:
        col(W=F["W"], VO=F["VO"])
    ones = torch.ones(d, dtype=DTYPE)
    if ln:
        for t in range(V):
            col(W=torch.zeros(V, d, dtype=DTYPE).index_fill(0, torch.tensor([t]), 1.0))
            col(G=torch.zeros(V, d, dtype=DTYPE).index_fill(0, torch.tensor([t]), 1.0))
            for hh in range(a.n_heads):
                delta = torch.zeros_like(F["VO"])
                delta[hh, t] = ones
                col(VO=delta)
    if not a.sinks:
        for hh in range(a.n_heads):
            for i in range(d):
                delta = torch.zeros_like(F["VO"])
                delta[hh, :, i] = 1.0
                col(VO=delta, W=-delta[hh])
        unrotated = range(a.rope_dims, F["k"].shape[-1])
        for g in range(F["k"].shape[0]):
            for i in unrotated:
                delta = torch.zeros_like(F["k"])
                delta[g, :, i] = 1.0
                col(k=delta)
    A = torch.stack(cols, 1) if cols else torch.zeros(sum(F[n].numel() for n in PARTS), 0, dtype=DTYPE)
    return A / A.norm(dim=0).clamp_min(torch.finfo(DTYPE).tiny)


def table_directions(point: Point) -> tuple[torch.Tensor, dict] | None:
    """(rows (m, P) in the layout's coordinates spanning the t parts of ker [dF, -A], the rank decision of
    [dF, -A]), or None where the factorisation is not written (`_unsupported`)."""
    if _unsupported(point):
        return None
    names = list(point.layout.blocks)
    shapes = [point.w[n].shape for n in names]
    sizes = [s.numel() for s in shapes]

    def F(theta):
        w = {n: x.view(s) for n, x, s in zip(names, theta.split(sizes), shapes, strict=True)}
        parts = per_token_parts(point, w)
        return torch.cat([parts[n].reshape(-1) for n in PARTS])

    theta = torch.cat([point.w[n].reshape(-1) for n in names])
    dF = torch.func.jacrev(F)(theta)  # (rows, P)
    A = downstream_changes(point, per_token_parts(point, point.w))  # (rows, n)
    M = torch.cat([dF / dF.norm(), -A / max(1.0, A.shape[1]) ** 0.5], 1)
    _, s, Vh = torch.linalg.svd(M, full_matrices=True)
    rank = numerical_rank(s, RANK_RTOL)
    null_t = Vh[rank["rank"] :, : theta.numel()]  # (k, P): the t parts
    out = torch.zeros(null_t.shape[0], point.layout.size, dtype=DTYPE)
    start = 0
    for n, size in zip(names, sizes, strict=True):
        out[:, point.layout.blocks[n].slice] = null_t[:, start : start + size]
        start += size
    return out, rank
