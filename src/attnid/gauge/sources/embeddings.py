r"""Generators of the embedding side and the head (sources `embeddings`, `unread_positions`, `token_types`,
`tied_shift`, `embedding_norm`; counted by `attnid.model.counting.embeddings`, the same rule's count).

    embeddings        learned positions and untied E enter only through their sum: dE = 1 w^T, dpos = -1 w^T
    unread_positions  position rows beyond seq_len are never read
    token_types       row 0 trades with the positions; rows 1.. are never read
    tied_shift        a tied head after a LayerNorm with learned positions: E_t + a / g_h, positions - a / g_h,
                      the head bias absorbs -a beta_h . (1 / g_h)
    embedding_norm    BLOOM (tied, a final LayerNorm): beta_e's ones component
"""

from __future__ import annotations

import torch

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
    V, T = spec.vocab_size, spec.seq_len

    def fn(c):
        w = c @ basis  # (..., d)
        return {"embed": w[..., None, :].expand(*w.shape[:-1], V, d),
                "pos": rows_update(point, "pos", -w[..., None, :].expand(*w.shape[:-1], T, d))}  # fmt: skip

    return [Group("embeddings", "embeddings.position_shift", basis.shape[0], fn, ("embed", "pos"))]


def unread_positions(point: Point) -> list[Group]:
    """Position rows beyond seq_len are never read: d free entries each."""
    spec, d = point.spec, point.d
    if spec.positions != "learned" or spec.seq_len == spec.max_positions:
        return []
    T, used = spec.max_positions, spec.seq_len

    def fn(c):
        out = torch.zeros(*c.shape[:-1], T, d, dtype=DTYPE)
        out[..., used:, :] = c.unflatten(-1, (T - used, d))
        return {"pos": out}

    return [Group("unread_positions", "embeddings.unread_positions", (T - used) * d, fn, ("pos",))]


def head_norm(spec) -> str:
    """The norm the head reads: the MLM head's own, else the last block's second norm."""
    return "mlm_norm" if spec.mlm_head else f"layers.{spec.n_layers - 1}.norm_2"


def token_types(point: Point) -> list[Group]:
    """Row 0 of the token types trades with the positions (d); rows 1.. are never read."""
    spec, d = point.spec, point.d
    n_types = spec.token_types
    if not n_types:
        return []
    T = spec.seq_len

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
    reads_norm = spec.final_norm or spec.norm_position == "post"
    if not (spec.tied and point.layernorm and reads_norm and spec.positions == "learned"):
        return []
    if not (spec.lm_head_bias or not spec.norm_bias):
        return []
    hn = "final_norm" if spec.final_norm else head_norm(spec)
    inv = 1.0 / point.gain(hn)
    beta = point.beta(hn)
    V, T = spec.vocab_size, spec.seq_len

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
