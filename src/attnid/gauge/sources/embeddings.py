r"""Generators of the embedding side and the head (sources `embeddings`, `unread_positions`, `pad_row`,
`token_types`, `tied_shift`, `embedding_norm`; counted by `attnid.model.counting.embeddings`, the same rule's count).

    embeddings        learned positions and untied E enter only through their sum: dE = 1 w^T, dpos = -1 w^T
    unread_positions  position rows that nothing reads (beyond seq_len, but for a pad's own row)
    pad_row           a pad's own row P_p (RoBERTa): the pad's shift E_pad + u, P_p - s u (untied: u free, but
                      along 1 where the rows' ones are counted; tied: u = a / g_h, the pad's head bias taking
                      -a beta_h . 1/g_h), and behind an embedding norm its scale, P_p + c x_p
    token_types       row 0 trades with the positions; rows 1.. are never read
    tied_shift        a tied head after a LayerNorm with learned positions: E_t + a / g_h, positions - a / g_h,
                      the head bias absorbs -a beta_h . (1 / g_h)
    embedding_norm    BLOOM (tied, a final LayerNorm): beta_e's ones component
"""

from __future__ import annotations

import torch

from ...model.counting.embeddings import raw_ones_seen, tied_shift_applies
from ...model.counting.residual import Stream
from ..group import Group
from ..point import DTYPE, Point, rows_update
from .writers import ones_complement


def position_shift(point: Point, stream: Stream) -> list[Group]:
    """Learned positions and untied E enter only through their sum: dE = 1 w^T, dpos = -1 w^T."""
    spec, d = point.spec, point.d
    if spec.positions != "learned" or spec.tied:
        return []
    basis = ones_complement(d).mT if stream.d_out < d else torch.eye(d, dtype=DTYPE)
    V, T = spec.vocab_size, len(spec.position_rows)

    def fn(c):
        w = c @ basis  # (..., d)
        return {"embed": w[..., None, :].expand(*w.shape[:-1], V, d),
                "pos": rows_update(point, "pos", -w[..., None, :].expand(*w.shape[:-1], T, d))}  # fmt: skip

    return [Group("embeddings", "embeddings.position_shift", basis.shape[0], fn, ("embed", "pos"))]


def unread_positions(point: Point) -> list[Group]:
    """Position rows that nothing reads (beyond seq_len, but for a pad's own row): d free entries each."""
    spec, d = point.spec, point.d
    unread = sorted(set(range(spec.max_positions)) - set(spec.position_rows))
    if spec.positions != "learned" or not unread:
        return []

    def fn(c):
        out = torch.zeros(*c.shape[:-1], spec.max_positions, d, dtype=DTYPE)
        out[..., unread, :] = c.unflatten(-1, (len(unread), d))
        return {"pos": out}

    return [Group("unread_positions", "embeddings.unread_positions", len(unread) * d, fn, ("pos",))]


def head_norm(spec) -> str:
    """The norm the head reads: the MLM head's own, else the last block's second norm."""
    return "mlm_norm" if spec.mlm_head else f"layers.{spec.n_layers - 1}.norm_2"


def token_types(point: Point) -> list[Group]:
    """Row 0 of the token types trades with the positions (d); rows 1.. are never read."""
    spec, d = point.spec, point.d
    n_types = spec.token_types
    if not n_types:
        return []
    T = len(spec.position_rows)

    def fn(c):
        w = c[..., :d]
        out = torch.zeros(*c.shape[:-1], n_types, d, dtype=DTYPE)
        out[..., 0, :] = w
        out[..., 1:, :] = c[..., d:].unflatten(-1, (n_types - 1, d))
        return {"token_type": out, "pos": rows_update(point, "pos", -w[..., None, :].expand(*w.shape[:-1], T, d))}

    return [Group("token_types", "embeddings.token_types", n_types * d, fn, ("token_type", "pos"))]


def tied_shift(point: Point) -> list[Group]:
    """A tied head after a LayerNorm with learned positions: E_t + a / g_h, positions - a / g_h (module docstring)."""
    spec = point.spec
    if not tied_shift_applies(spec):
        return []
    hn = "final_norm" if spec.final_norm else head_norm(spec)
    inv = 1.0 / point.gain(hn)
    beta = point.beta(hn)
    V, T = spec.vocab_size, len(spec.position_rows)

    def fn(c):
        a = c[..., :1] * inv  # (..., d)
        res = {"embed": a[..., None, :].expand(*a.shape[:-1], V, point.d),
               "pos": rows_update(point, "pos", -a[..., None, :].expand(*a.shape[:-1], T, point.d))}  # fmt: skip
        if beta is not None and spec.lm_head_bias:
            res["unembed_bias"] = -(c[..., :1] * (beta @ inv)).expand(*c.shape[:-1], V)
        return res

    blocks = ("embed", "pos") + (("unembed_bias",) if spec.lm_head_bias else ())
    return [Group("tied_shift", "embeddings.tied_shift", 1, fn, blocks)]


def embedding_norm(point: Point) -> list[Group]:
    """BLOOM (tied, a final LayerNorm): beta_e's ones component is invisible to every LayerNorm reading the stream."""
    spec = point.spec
    if not spec.embedding_norm or point.beta("embed_norm") is None:
        return []
    ones = torch.ones(point.d, dtype=DTYPE)

    def fn(c):
        return {"embed_norm.bias": c[..., :1] * ones}

    return [Group("embedding_norm", "embed_norm.bias_ones", 1, fn, ("embed_norm.bias",))]


def pad_row(point: Point) -> list[Group]:
    """A pad's own position row (module docstring): its shift, and its scale behind an embedding norm."""
    spec, d = point.spec, point.d
    if spec.pad_row is None:
        return []
    t, p, s = spec.pad_token, spec.pad_row, spec.embed_scale
    V, T = spec.vocab_size, spec.max_positions
    groups = []
    if spec.tied and tied_shift_applies(spec):
        hn = "final_norm" if spec.final_norm else head_norm(spec)
        basis = (1.0 / point.gain(hn))[None]  # (1, d)
        beta = point.beta(hn)
    elif not spec.tied:
        basis = torch.eye(d, dtype=DTYPE) if raw_ones_seen(spec) else ones_complement(d).mT
        beta = None
    else:
        basis = torch.zeros(0, d, dtype=DTYPE)

    def shift(c):
        u = c @ basis  # (..., d)
        embed = torch.zeros(*c.shape[:-1], V, d, dtype=DTYPE)
        embed[..., t, :] = u
        pos = torch.zeros(*c.shape[:-1], T, d, dtype=DTYPE)
        pos[..., p, :] = -s * u
        res = {"embed": embed, "pos": pos}
        if beta is not None and spec.lm_head_bias:
            bias = torch.zeros(*c.shape[:-1], V, dtype=DTYPE)
            bias[..., t] = -(u @ beta)
            res["unembed_bias"] = bias
        return res

    blocks = ("embed", "pos") + (("unembed_bias",) if spec.tied and spec.lm_head_bias else ())
    groups.append(Group("pad_row", "embeddings.pad_shift", basis.shape[0], shift, blocks))
    if spec.embedding_norm:
        x = s * point.w["embed"][t] + point.w["pos"][p]  # (d,): what the embedding norm reads at the pad
        if "token_type" in point.w:
            x = x + point.w["token_type"][0]

        def scale(c):
            pos = torch.zeros(*c.shape[:-1], T, d, dtype=DTYPE)
            pos[..., p, :] = c[..., :1] * x
            return {"pos": pos}

        groups.append(Group("pad_row", "embeddings.pad_scale", 1, scale, ("pos",), weak=spec.norm_eps > 0))
    return groups
