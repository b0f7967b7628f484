r"""Generators that exist because the first block reads finitely many inputs, the V token points (sources
`latent_token_points`, `first_mlp_table`; counted by `attnid.model.counting.token_points`).

Latents on token points. On the V points y_t = x_t W_D of the first block (x_t = Norm_1(E[t])) a latent
of rank r keeps its RMSNorm's output up to A when W_D -> W_D A / kappa with
|y_t A|^2 - |y_t|^2 = r eps (1 - kappa^2) for every t; the up-projections take D^-1 A^-1 D W_U back. To
first order, A = I + S (S symmetric: the skew part is the latent's orthogonal group) and kappa = 1 + k:

    y_t S y_t^T + r eps k = 0  (t = 1..V),   dW_D = W_D (S - k I),   dW_U = -D^-1 S D W_U,

a V x (r (r + 1) / 2 + 1) linear system whose null space (of dimension r (r + 1) / 2 + 1 - V at a generic
point: its rank is V, not decided by a threshold) holds the down-projection's scale (S = 0, k = 1 when
eps = 0), so that group replaces the latent's scale.

The first MLP's table (a parallel block at layer 0 without learned positions whose MLP reaches its V x d
output table) has no closed-form generators here: :func:`first_mlp_table` returns a fallback group that names
its coordinates (E, every block of layer 0, a tied head's final norm: the table W = E + M, the reading points
and the head they share). For a one-block model its directions are the kernel of the model's per-token
factorisation (`attnid.gauge.sources.first_table`, independent of the logits' Jacobian); otherwise the
certificate reads them off the kernel of the Jacobian restricted to those coordinates (tiny sizes only; the
two sides of the certificate are then not independent for this source).
"""

from __future__ import annotations

import torch

from ...model.counting.token_points import first_mlp_table as first_mlp_table_count
from ..group import Group
from ..point import DTYPE, Point


def first_block_points(point: Point) -> torch.Tensor:
    """x_t = Norm_1(E[t]) (V, d): what the first block reads at token t (no learned positions)."""
    from ...model.forward import norm

    h = point.w["embed"] * point.spec.embed_scale
    return norm(h, point.w, "layers.0.norm_1", point.spec)


def latent_token_points(point: Point, groups: list[Group]) -> list[Group]:
    """Replace the first block's latent scale groups by the token-point solutions where there are any."""
    spec = point.spec
    a = spec.layer_specs[0].attention
    if not a.kv_lora_rank or spec.positions == "learned":
        return groups
    V = spec.vocab_size
    x = first_block_points(point)
    prefix = "layers.0.attn."
    latents = {"W_DKV": ("gain_DKV", ("W_UK", "W_UV"), a.kv_lora_rank)}
    if a.q_lora_rank:
        latents["W_DQ"] = ("gain_DQ", ("W_UQ",), a.q_lora_rank)
    out = list(groups)
    for down, (gain, ups, r) in latents.items():
        n_sym = r * (r + 1) // 2
        if n_sym + 1 - V <= 0:
            continue
        WD, g = point.w[prefix + down], point.w[prefix + gain]
        y = x @ WD  # (V, r)
        iu = torch.triu_indices(r, r)
        factor = torch.where(iu[0] == iu[1], 1.0, 2.0).to(DTYPE)
        M = torch.cat((y[:, iu[0]] * y[:, iu[1]] * factor, torch.full((V, 1), r * a.norm_eps, dtype=DTYPE)), 1)
        _, _, Vh = torch.linalg.svd(M, full_matrices=True)
        basis = Vh[min(V, n_sym + 1) :]  # (n, n_sym + 1): the null space, of the generic dimension
        Ups = {prefix + b: point.w[prefix + b] for b in ups}

        def fn(c, basis=basis, iu=iu, r=r, WD=WD, g=g, Ups=Ups, down=down):
            z = c @ basis  # (..., n_sym + 1)
            S = torch.zeros(*c.shape[:-1], r, r, dtype=DTYPE)
            S[..., iu[0], iu[1]] = z[..., :-1]
            S = S + S.mT - torch.diag_embed(torch.diagonal(S, dim1=-2, dim2=-1))
            k = z[..., -1:, None]
            res = {prefix + down: WD @ (S - k * torch.eye(r, dtype=DTYPE))}
            L = -(S * g) / g[:, None]  # -D^-1 S D
            for b, t in Ups.items():
                res[b] = L[..., None, :, :] @ t
            return res

        blocks = (prefix + down,) + tuple(Ups)
        out = [grp for grp in out if grp.meta.get("latent") != down or not grp.name.startswith(prefix)]
        out.append(Group("latent_token_points", f"{prefix}{down}.token_points", basis.shape[0], fn, blocks))
    return out


def first_mlp_table(point: Point, stream) -> list[Group]:
    """The fallback group of the first MLP's table (module docstring), or nothing where the count has none."""
    n = first_mlp_table_count(point.spec, stream.d_c, stream.d_out, stream.d_const)
    if not n:
        return []
    spec = point.spec
    names = ["embed"] + [b for b in point.layout.blocks if b.startswith("layers.0.")]
    names += [b for b in ("final_norm.gain", "final_norm.bias") if spec.tied and b in point.layout]
    from .first_table import table_directions

    group = Group("first_mlp_table", "layers.0.mlp.table", n, lambda c: {}, tuple(names), fallback=True)
    group.meta["directions"] = lambda: table_directions(point)
    return [group]


def qk_norm_token_points(point: Point) -> list[Group]:
    r"""The first block's q/k norms on the V token points (counting.token_points.qk_norm_token_points).

    A q/k RMSNorm sees a projection y_t = x_t W + b only through its direction. With X~ = [X, 1] (the points
    and, for a bias, a column of ones; its rank is d_in) and Y = X~ W~ (V, w), a change dW~ = X~^+ (lambda o Y)
    moves every y_t by lambda_t y_t (so keeps its direction) iff every column lambda o Y_j lies in range X~:
    (I - P_X) diag(Y_j) lambda = 0 for every j, a (w V) x V system whose null space holds lambda = 1 (the norm's
    own scale) and, on few tokens, V - 1 - w (V - d_in) more (its rank is taken from that count, not from a
    threshold). Per query head and key group (one each across heads for rms_all); weak for eps > 0.
    """
    spec = point.spec
    a = spec.layer_specs[0].attention
    if a.qk_norm == "none" or a.kv_lora_rank or spec.positions == "learned":
        return []
    if a.qk_norm == "layernorm_head":
        raise NotImplementedError("q/k LayerNorms on the first block's token points")
    V, d = spec.vocab_size, point.d
    beta = point.layernorm and spec.norm_bias
    d_c = d - 1 if point.layernorm else d
    X = first_block_points(point)  # (V, d)
    p = "layers.0.attn."
    H, G, k = a.n_heads, a.n_kv_heads, a.d_head_qk
    projections = []  # (weight block, bias block or None, heads: index list or None for all)
    for w_name, b_name, n in (("W_Q", "b_Q", H), ("W_K", "b_K", G)):
        bias = p + b_name if p + b_name in point.layout else None
        if a.qk_norm == "rms_all":
            projections.append((p + w_name, bias, list(range(n))))
        else:
            projections += [(p + w_name, bias, [i]) for i in range(n)]
    groups = []
    for w_name, b_name, heads in projections:
        own = b_name is not None
        d_in = d_c + (own or beta)
        Xt = torch.cat((X, torch.ones(V, 1, dtype=DTYPE)), 1) if own else X
        W = point.w[w_name][heads]  # (h, d, k)
        Y = torch.einsum("vd,hdk->vhk", X, W).reshape(V, -1)  # (V, w)
        if own:
            Y = Y + point.w[b_name][heads].reshape(-1)
        width = Y.shape[1]
        extra = V - 1 - width * (V - d_in)
        if extra <= 0:
            continue
        U, _, _ = torch.linalg.svd(Xt, full_matrices=True)
        outside = U[:, d_in:]  # (V, V - d_in): the complement of range X~
        A = torch.einsum("vo,vj->jov", outside, Y).reshape(-1, V)  # rows (I - P) diag(Y_j), in the complement's basis
        _, _, Vh = torch.linalg.svd(A, full_matrices=True)
        null = Vh[V - 1 - extra :]  # (extra + 1, V): rank V - 1 - extra (the count's), lambda = 1 among them
        null = null - null.mean(-1, keepdim=True)  # the norm's own scale (lambda = 1) is its own group
        basis = torch.linalg.qr(null.mT).Q.mT[:extra]  # (extra, V)
        pinv = torch.linalg.pinv(Xt)  # (d [+ 1], V)
        changes = torch.einsum("rv,nv,vj->nrj", pinv, basis, Y)  # (extra, d [+ 1], w): dW~ per basis lambda
        dW = changes[:, :d].reshape(extra, d, len(heads), k).permute(0, 2, 1, 3)  # (extra, h, d, k)
        db = changes[:, d].reshape(extra, len(heads), k) if own else None
        full_W = point.w[w_name].shape

        def fn(c, dW=dW, db=db, heads=heads, w_name=w_name, b_name=b_name, full_W=full_W):
            outW = torch.zeros(*c.shape[:-1], *full_W, dtype=DTYPE)
            outW[..., heads, :, :] = torch.einsum("...n,nhdk->...hdk", c, dW)
            out = {w_name: outW}
            if db is not None:
                outb = torch.zeros(*c.shape[:-1], full_W[0], full_W[-1], dtype=DTYPE)
                outb[..., heads, :] = torch.einsum("...n,nhk->...hk", c, db)
                out[b_name] = outb
            return out

        blocks = (w_name,) + ((b_name,) if own else ())
        groups.append(Group("qk_norm_token_points", f"{w_name}{heads}.token_points", extra, fn, blocks,
                            weak=a.norm_eps > 0))  # fmt: skip
    return groups
