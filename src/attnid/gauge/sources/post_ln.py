r"""Generators of post-LN models, x -> Norm(x + f(x)) (BERT, OPT-350m; counted by
`attnid.model.counting.post_ln`, the same rule's count), and of the BERT head (`mlm_head`; `token_types` and
`tied_shift` are `.embeddings`').

Between norms the stream is x = n diag(g) + beta, read by the next sublayer f and carried by the skip:

    attention, centring  as in pre-LN blocks, each sublayer against the norm before it (layer 0 against the raw
                         embeddings, or the embedding norm)
    centring_writers     every sublayer writes into a LayerNorm: W_O, b_O, the down rows and bias along 1 (and E,
                         the positions behind an embedding norm)
    norm_bias_offsets    a norm followed by a sublayer: beta's ones component (dbeta = 1, the readers absorb
                         beta -> beta + 1), and beta's centred part traded with the sublayer's own constant
                         (dbeta = t, db_O = -t; or the value bias y with t = -sum y S_g)
    residual_scale       per sublayer: its input scales when the norm before it (gain and beta, or the raw
                         embeddings) scales, its readers take 1/c, its writers c (weak for eps > 0; a tied head
                         reading the last norm takes that norm's gain and beta back)
    embeddings           the E / position shift; the shear of the raw embeddings, h -> h + (h . v) 1 (layer 0's
                         readers take -v (1 W)); a shift of the raw embeddings the first attention's biases absorb
    token_types          row 0 trades with the positions; rows 1.. are never read
    pad_row              a pad's own position row (RoBERTa): its shift and scale (`.embeddings`)
    tied_shift           E_t + a / g_h, positions - a / g_h, the head bias absorbs -a beta_h . (1 / g_h)
    mlm_head             the last block norm's gain, beta and centring against BERT's dense map
"""

from __future__ import annotations

import torch

from ..group import Group, along_input, outer_input
from ..point import DTYPE, Point, Reader, rows_update
from .attention import AttentionBlock
from .mlp import hidden_units
from .norms import centring_readers, centring_writers, contract_input, norm_bias, norm_gain
from .embeddings import head_norm, pad_row, tied_shift, token_types, unread_positions
from .writers import ones_complement


def previous_norm(spec, layer: int) -> str | None:
    """The norm whose output block `layer`'s attention reads (None: the raw embeddings)."""
    if layer > 0:
        return f"layers.{layer - 1}.norm_2"
    return "embed_norm" if spec.embedding_norm else None


def _compensate(point: Point, readers: list[Reader], norm: str, t: torch.Tensor, out: dict) -> None:
    """Every reader of `norm` keeps x W + b when x shifts by t (..., d): db = -t W, or the rank-one dW."""
    g, beta = point.gain(norm), point.beta(norm)
    col = (1.0 / g) / (beta @ (1.0 / g))
    for r in readers:
        tW = contract_input(point.w[r.weight], t, r.axis)
        if r.bias is not None:
            out[r.bias] = out.get(r.bias, 0) - tW
        else:
            out[r.weight] = out.get(r.weight, 0) - outer_input(tW, col, point.w[r.weight].shape, r.axis)


def _raw_writers(point: Point) -> list[str]:
    return [n for n in ("embed", "pos", "token_type") if n in point.layout]


def post_ln_groups(point: Point) -> list[Group]:
    spec, d = point.spec, point.d
    if spec.norm != "layernorm":
        raise NotImplementedError("post-LN RMSNorm models")
    if spec.n_layers == 1 and not spec.embedding_norm and not spec.tied:
        raise NotImplementedError("the one-block skip rotation of post-LN models")
    ln, beta = point.layernorm, spec.norm_bias
    groups: list[Group] = []
    attn_readers = {i: point.attention_readers(i) for i in range(spec.n_layers)}
    mlp_readers = {i: point.mlp_readers(i) for i in range(spec.n_layers)}
    d_c = d - 1
    for i, x in enumerate(spec.layer_specs):
        prev = previous_norm(spec, i)
        sink = f"layers.{i}.attn.b_O" if x.attention.has_bias("o") else None
        groups += AttentionBlock(point, i, prev is not None, prev, sink, d_c).groups()
        if prev is not None:
            groups += centring_readers(point, prev, attn_readers[i])
        groups += centring_readers(point, f"layers.{i}.norm_1", mlp_readers[i])
        groups += hidden_units(point, i)
    writers = [w for i in range(spec.n_layers) for w in point.block_writers(i)]
    if spec.embedding_norm:
        writers = ([] if spec.tied else ["embed"]) + (["pos"] if "pos" in point.layout else []) + writers
    groups += centring_writers(point, writers)
    last = f"layers.{spec.n_layers - 1}.norm_2"
    if spec.mlm_head:
        dense = [Reader("mlm.dense", 0, "mlm.dense_bias", d)]
        groups.append(norm_gain(point, last, dense, "mlm_head"))
        groups += [norm_bias(point, last, dense, "mlm_head")] if beta else []
        groups += centring_readers(point, last, dense, "mlm_head")
    head, hn = point.head_reader() if not spec.mlm_head else _head_after_mlm(point), head_norm(spec)
    if not spec.tied:
        groups.append(norm_gain(point, hn, [head]))
        groups += centring_readers(point, hn, [head])
    if beta and (not spec.tied or spec.lm_head_bias):
        groups.append(norm_bias(point, hn, [head]))
    groups += _embedding_terms(point, attn_readers[0])
    groups += unread_positions(point)
    if ln and beta:
        groups += _bias_offsets(point, attn_readers, mlp_readers)
    groups += _scales(point, attn_readers, mlp_readers)
    groups += token_types(point) + tied_shift(point) + pad_row(point)
    return [g for g in groups if g.n]


def _head_after_mlm(point: Point) -> Reader:
    bias = "unembed_bias" if "unembed_bias" in point.layout else None
    return Reader("embed", 1, bias, point.spec.vocab_size) if point.spec.tied else Reader("unembed", 0, bias, point.spec.vocab_size)


def _embedding_terms(point: Point, first_readers: list[Reader]) -> list[Group]:
    spec, d = point.spec, point.d
    out = []
    if spec.positions == "learned" and not spec.tied:
        basis = ones_complement(d).mT if spec.embedding_norm else torch.eye(d, dtype=DTYPE)
        V, T = spec.vocab_size, len(spec.position_rows)

        def shift(c):
            w = c @ basis
            return {"embed": w[..., None, :].expand(*w.shape[:-1], V, d),
                    "pos": rows_update(point, "pos", -w[..., None, :].expand(*w.shape[:-1], T, d))}  # fmt: skip

        out.append(Group("embeddings", "embeddings.position_shift", basis.shape[0], shift, ("embed", "pos")))
    if spec.embedding_norm:
        return out
    raw = _raw_writers(point)
    if not spec.tied:  # the shear h -> h + (h . v) 1 of the raw embeddings, read by layer 0 and a LayerNorm

        def shear(c):  # (..., d): v
            res = {}
            for name in raw:
                rows = point.writer_rows(name)  # (rows, d)
                res[name] = rows_update(point, name, (rows @ c.unsqueeze(-1)) * torch.ones(d, dtype=DTYPE))
            L = -(c[..., :, None] * torch.ones(d, dtype=DTYPE))  # -v 1^T
            for r in first_readers:
                res[r.weight] = along_input(point.w[r.weight], L, r.axis)
            return res

        out.append(Group("embeddings", "embeddings.shear", d, shear, tuple(raw) + tuple(r.weight for r in first_readers)))
    a = spec.layer_specs[0].attention
    absorbed = a.has_bias("o") and a.has_bias("q") and (a.has_bias("k") or a.rope_dims == 0)
    if absorbed and (not spec.tied or spec.positions == "learned"):
        moved = "pos" if spec.tied else "embed"
        p = "layers.0.attn."
        W = {b: point.w[p + b] for b in ("W_Q", "W_K", "W_V")}
        S = AttentionBlock(point, 0, False, None, None, d).value_sums()  # (G, v, d)

        def absorb(c):  # the raw stream shifts by w; layer 0's attention outputs attn(h) - w
            rows = point.writer_rows(moved).shape[0]
            res = {moved: rows_update(point, moved, c[..., None, :].expand(*c.shape[:-1], rows, d))}
            res[p + "b_Q"] = -torch.einsum("...d,hdk->...hk", c, W["W_Q"])
            if a.has_bias("k"):
                res[p + "b_K"] = -torch.einsum("...d,gdk->...gk", c, W["W_K"])
            wv = torch.einsum("...d,gdv->...gv", c, W["W_V"])
            if a.has_bias("v"):
                res[p + "b_V"] = -wv
                res[p + "b_O"] = -c
            else:
                res[p + "b_O"] = -c - torch.einsum("...gv,gvd->...d", wv, S)
            return res

        blocks = (moved, p + "b_Q", p + "b_O") + ((p + "b_K",) if a.has_bias("k") else ()) + ((p + "b_V",) if a.has_bias("v") else ())
        out.append(Group("embeddings", "embeddings.absorbed_shift", d, absorb, blocks))
    return out


def _bias_offsets(point: Point, attn_readers: dict, mlp_readers: dict) -> list[Group]:
    """norm_bias_offsets (module docstring): per norm followed by a sublayer, its ones and the trade."""
    spec, d = point.spec, point.d
    Q = ones_complement(d)  # (d, d - 1)
    out = []
    follows = []  # (norm, readers, sublayer kind, layer)
    for i in range(spec.n_layers):
        prev = previous_norm(spec, i)
        if prev is not None:
            follows.append((prev, attn_readers[i], "attn", i))
        follows.append((f"layers.{i}.norm_1", mlp_readers[i], "mlp", i))
    for norm, readers, kind, i in follows:

        def ones(c, norm=norm, readers=readers):
            t = c[..., :1] * torch.ones(d, dtype=DTYPE)
            res = {f"{norm}.bias": t}
            _compensate(point, readers, norm, t, res)
            return res

        blocks = (f"{norm}.bias",) + tuple(r.bias or r.weight for r in readers)
        out.append(Group("norm_bias_offsets", f"{norm}.bias_ones", 1, ones, blocks))
        x = spec.layer_specs[i]
        sink = None
        if kind == "attn" and x.attention.has_bias("o"):
            sink = f"layers.{i}.attn.b_O"
        elif kind == "mlp" and x.mlp.bias:
            sink = f"layers.{i}.mlp.down_bias"
        if sink is not None:

            def trade(c, norm=norm, readers=readers, sink=sink):
                t = c @ Q.mT  # (..., d), centred
                res = {f"{norm}.bias": t}
                _compensate(point, readers, norm, t, res)
                res[sink] = res.get(sink, 0) - t
                return res

            out.append(Group("norm_bias_offsets", f"{norm}.bias_trade", d - 1, trade, blocks + (sink,)))
        elif kind == "attn":  # the value bias: t = -sum_g y_g S_g
            block = AttentionBlock(point, i, True, norm, None, d - 1)
            a = x.attention
            S = block.value_sums()
            G, v = a.n_kv_heads, a.d_head_v
            own = block.has("b_V")
            col = None if own else block.inv_gain / (block.beta @ block.inv_gain)

            def via_value(c, norm=norm, readers=readers, S=S, block=block, own=own, col=col, G=G, v=v):
                y = c.unflatten(-1, (G, v))
                t = -torch.einsum("...gv,gvd->...d", y, S)
                res = {f"{norm}.bias": t}
                _compensate(point, readers, norm, t, res)
                if own:
                    res[block.name("b_V")] = res.get(block.name("b_V"), 0) + y
                else:
                    wv = block.name("W_V")
                    res[wv] = res.get(wv, 0) + outer_input(y, col, block.W("W_V").shape, 1)
                return res

            extra = (block.name("b_V") if own else block.name("W_V"),)
            out.append(Group("norm_bias_offsets", f"{norm}.bias_value_trade", G * v, via_value, blocks + extra))
    return out


def _scales(point: Point, attn_readers: dict, mlp_readers: dict) -> list[Group]:
    """One scale per sublayer and one for the embedding norm (module docstring)."""
    spec = point.spec
    weak = spec.norm_eps > 0
    raw = _raw_writers(point)
    hn = head_norm(spec)
    out = []

    def head_back(res, c):  # a tied head scaled with E: the norm it reads takes 1/c
        if spec.tied:
            res[f"{hn}.gain"] = res.get(f"{hn}.gain", 0) - c[..., :1] * point.gain(hn)
            if point.beta(hn) is not None:
                res[f"{hn}.bias"] = res.get(f"{hn}.bias", 0) - c[..., :1] * point.beta(hn)

    def scaled(name, c):
        t = point.w[name]
        return c[..., :1].reshape(*c.shape[:-1], *([1] * t.dim())) * t

    units = []  # (previous norm or None for raw, readers, writers)
    if spec.embedding_norm:
        units.append(("raw", [], []))
    for i in range(spec.n_layers):
        units.append((previous_norm(spec, i), attn_readers[i], [w for w in point.block_writers(i) if ".attn." in w]))
        units.append((f"layers.{i}.norm_1", mlp_readers[i], [w for w in point.block_writers(i) if ".mlp." in w]))
    for k, (prev, readers, writers) in enumerate(units):
        if prev == "raw":  # the embedding norm's input
            prev = None

        def fn(c, prev=prev, readers=readers, writers=writers):
            res = {}
            if prev is None:
                for name in raw:
                    res[name] = rows_update(point, name, c[..., :1, None] * point.writer_rows(name))
                if "embed" in raw:
                    head_back(res, c)
            else:
                res[f"{prev}.gain"] = c[..., :1] * point.gain(prev)
                if point.beta(prev) is not None:
                    res[f"{prev}.bias"] = c[..., :1] * point.beta(prev)
            for r in readers:
                res[r.weight] = -scaled(r.weight, c)
            for w in writers:
                res[w] = scaled(w, c)
            return res

        blocks = tuple(raw) if prev is None else (f"{prev}.gain", f"{prev}.bias")
        blocks += tuple(r.weight for r in readers) + tuple(writers)
        if prev is None and spec.tied:
            blocks += (f"{hn}.gain", f"{hn}.bias")
        blocks = tuple(b for b in dict.fromkeys(blocks) if b in point.layout)
        out.append(Group("residual_scale", f"post_ln.scale_{k}", 1, fn, blocks, weak=weak))
    return out
