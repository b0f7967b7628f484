r"""Generators of the residual stream of a pre-LN model, its rotations aside (sources `residual_scale`,
`parallel_constants`, `constant_offsets`, `head_bias_constants`, `embeddings`, `unread_positions`; counted by
`attnid.model.counting.residual`, `.raw_head` and `.embeddings`; the rotations are `.rotations`).

    scale      every writer dX = X: the norms are scale invariant (weakly identified for eps > 0); with no
               final norm the unembedding takes dU = -U; a tied head E^T takes the final norm's gain (and beta)
               dg = -g; sublayer output norms make their input's scale free too (dW_O = W_O, dW_down = W_down)
    constants  a constant written into the stream (b_O, a down bias, a value bias whose constant is 1) trades
               with another writer's, with a shift of E or the positions along 1, or with a head bias
    positions  learned positions and untied E enter only through their sum; rows beyond seq_len are unread
"""

from __future__ import annotations

import torch

from ...model.counting.residual import Stream
from ..group import Group
from ..point import DTYPE, Point, rows_update


def ones_complement(d: int) -> torch.Tensor:
    """Q (d, d - 1): an orthonormal basis of 1^perp (QR of the centring matrix's first d - 1 columns)."""
    C = torch.eye(d, dtype=DTYPE) - 1.0 / d
    return torch.linalg.qr(C[:, : d - 1]).Q


def stream_writers(point: Point) -> list[str]:
    """Every block writing into the stream (embeddings side first), for the rotations and the scale."""
    spec = point.spec
    out = list(point.embedding_writers())
    for i in range(spec.n_layers):
        if spec.output_norms:
            out += [n for n in (f"layers.{i}.out_norm_1.gain", f"layers.{i}.out_norm_1.bias",
                                f"layers.{i}.out_norm_2.gain", f"layers.{i}.out_norm_2.bias") if n in point.layout]  # fmt: skip
        else:
            out += point.block_writers(i)
    return out


def centred_writers(point: Point) -> list[str]:
    """Writers whose rows may move along 1 when every reader is a LayerNorm (E untied, positions, block writers)."""
    spec = point.spec
    out = [] if spec.tied or spec.embedding_norm else ["embed"]
    out += ["pos"] if "pos" in point.layout and not spec.embedding_norm else []
    for i in range(spec.n_layers):
        out += point.block_writers(i)
    return out


def scale_groups(point: Point, stream: Stream) -> list[Group]:
    """The stream's scale (and the sublayer output norms' input scales): module docstring."""
    spec = point.spec
    weak = spec.norm_eps > 0
    writers = stream_writers(point)
    out = []
    if not (spec.tied and not spec.final_norm and not spec.embedding_norm):

        def fn(c):
            res = {}
            for name in writers:
                res[name] = rows_update(point, name, c[..., :1, None] * point.writer_rows(name))
            if not spec.final_norm and not spec.tied:
                res["unembed"] = -c[..., :1, None] * point.w["unembed"]
            if spec.tied and spec.final_norm and not spec.embedding_norm:  # E^T in the head: the final gain takes 1/c
                res["final_norm.gain"] = -c[..., :1] * point.gain("final_norm")
                if point.beta("final_norm") is not None:
                    res["final_norm.bias"] = -c[..., :1] * point.beta("final_norm")
            return res

        blocks = tuple(writers) + (("unembed",) if not spec.final_norm and not spec.tied else ())
        if spec.tied and spec.final_norm and not spec.embedding_norm:
            blocks += tuple(n for n in ("final_norm.gain", "final_norm.bias") if n in point.layout)
        out.append(Group("residual_scale", "stream.scale", 1, fn, blocks, weak=weak))
    if spec.embedding_norm and spec.tied and spec.final_norm:  # the head's own scale: E / s, g_f s, beta_f s

        def head(c):
            res = {"embed": -c[..., :1, None] * point.w["embed"], "final_norm.gain": c[..., :1] * point.gain("final_norm")}
            if point.beta("final_norm") is not None:
                res["final_norm.bias"] = c[..., :1] * point.beta("final_norm")
            return res

        blocks = tuple(n for n in ("embed", "final_norm.gain", "final_norm.bias") if n in point.layout)
        out.append(Group("residual_scale", "head.scale", 1, head, blocks, weak=weak))
    if spec.output_norms:  # each output norm's input: the sublayer's writers scale together
        for i in range(spec.n_layers):
            names = point.block_writers(i)
            for part, chosen in (("attn", [n for n in names if ".attn." in n]), ("mlp", [n for n in names if ".mlp." in n])):

                def sub(c, chosen=chosen):
                    return {n: c[..., :1].reshape(*c.shape[:-1], *([1] * point.w[n].dim())) * point.w[n] for n in chosen}

                out.append(Group("residual_scale", f"layers.{i}.{part}.output_scale", 1, sub, tuple(chosen), weak=weak))
    return out


def parallel_constants(point: Point, stream: Stream) -> list[Group]:
    """A parallel block's b_O and MLP down bias land at the same point: db_O = y, db_down = -y (y in the
    d_const dims the model sees: 1^perp when the ones component is invisible)."""
    spec, d = point.spec, point.d
    if not spec.parallel:
        return []
    basis = ones_complement(d).mT if stream.d_const < d else torch.eye(d, dtype=DTYPE)
    out = []
    for i, x in enumerate(spec.layer_specs):
        if x.mlp.bias and x.attention.has_bias("o"):
            o, down = f"layers.{i}.attn.b_O", f"layers.{i}.mlp.down_bias"

            def fn(c, o=o, down=down):
                y = c @ basis
                return {o: y, down: -y}

            out.append(Group("parallel_constants", f"layers.{i}.constants", basis.shape[0], fn, (o, down)))
    return out


def _head_of_raw_stream(point: Point):
    """(v (d,) -> the V-vector v U a raw-stream head adds to every position's logits), or None without a head
    bias reading the raw stream (U = E^T when tied)."""
    from ...model.counting.raw_head import absorbs_constants

    if not absorbs_constants(point.spec):
        return None
    U = point.w["embed"].mT if point.spec.tied else point.w["unembed"]  # (d, V)
    return lambda v: v @ U


def _value_ones(point: Point, layer: int):
    """(block, value) realising a value bias y* whose constant sum_g y*_g S_g is the ones vector, or None when
    the layer cannot write one (no effective value bias, or 1 outside the row space of the stacked S_g)."""
    from .attention import AttentionBlock

    block = AttentionBlock(point, layer, True, f"layers.{layer}.norm_1", None, point.d)
    a = block.a
    own = block.has("b_V")
    if (not own and block.beta is None) or a.kv_lora_rank or a.sinks:
        return None
    S = block.value_sums().reshape(-1, point.d)  # (G v, d)
    ones = torch.ones(point.d, dtype=DTYPE)
    y = torch.linalg.lstsq(S.mT, ones).solution  # (G v,)
    if float((y @ S - ones).norm()) > 1e-8 * float(S.norm()) * float(y.norm()) + 1e-12:
        return None  # generically: G v < d, no solution
    y = y.reshape(a.n_kv_heads, a.d_head_v)
    if own:
        return block.name("b_V"), y
    col = block.inv_gain / (block.beta @ block.inv_gain)
    return block.name("W_V"), col[:, None, None] * y[None]  # (d, G, v) -> W_V (G, d, v) below


def constant_offsets(point: Point, stream: Stream) -> list[Group]:
    """No final LayerNorm: the stream's ones component reaches the logits only as one sum (counting.residual):
    E untied or positions learned (`offset`): each constant writer's ones component trades with a uniform
    shift of E (or of the positions) along 1; tied without learned positions (`pinned`): the writers' ones
    components (b_O, b_down, and a value bias whose constant is 1) trade among themselves, each alone when a
    head bias on the raw stream absorbs the sum."""
    spec, d = point.spec, point.d
    if not (stream.offset or stream.pinned):
        return []
    ones = torch.ones(d, dtype=DTYPE)
    writers = []  # (block, value (block-shaped) of the unit ones-component move)
    for i, x in enumerate(spec.layer_specs):
        if x.attention.has_bias("o"):
            writers.append((f"layers.{i}.attn.b_O", ones))
        if x.mlp.bias:
            writers.append((f"layers.{i}.mlp.down_bias", ones))
        if stream.pinned:
            if spec.parallel and x.mlp.bias and x.attention.has_bias("o"):
                raise NotImplementedError("constant offsets of parallel blocks with both constants, tied and pinned")
            vo = None if x.attention.has_bias("o") else _value_ones(point, i)  # with b_O: the value bias trades there
            if vo is not None:
                name, value = vo
                writers.append((name, value.permute(1, 0, 2) if name.endswith("W_V") else value))
    if not writers:
        return []
    head = _head_of_raw_stream(point)
    blocks = tuple(dict.fromkeys(n for n, _ in writers))
    if stream.offset:
        shift = "pos" if spec.tied else "embed"
        rows = point.writer_rows(shift).shape[0]

        def fn(c):
            out = {}
            for j, (name, value) in enumerate(writers):
                out[name] = out.get(name, 0) + c[..., j : j + 1].reshape(*c.shape[:-1], *([1] * value.dim())) * value
            total = c.sum(-1)[..., None, None] * ones
            out[shift] = rows_update(point, shift, -total.expand(*c.shape[:-1], rows, d))
            return out

        return [Group("constant_offsets", "stream.constant_offsets", len(writers), fn, blocks + (shift,))]
    if head is not None:  # each alone: the head bias takes the sum's change

        def fn(c):
            out = {}
            for j, (name, value) in enumerate(writers):
                out[name] = out.get(name, 0) + c[..., j : j + 1].reshape(*c.shape[:-1], *([1] * value.dim())) * value
            out["unembed_bias"] = -c.sum(-1, keepdim=True) * head(ones)
            return out

        return [Group("constant_offsets", "stream.constant_offsets", len(writers), fn, blocks + ("unembed_bias",))]
    n = len(writers) - 1

    def trades(c):  # writer j up, writer j + 1 down
        out = {}
        for j in range(n):
            for k, sign in ((j, 1.0), (j + 1, -1.0)):
                name, value = writers[k]
                out[name] = out.get(name, 0) + sign * c[..., j : j + 1].reshape(*c.shape[:-1], *([1] * value.dim())) * value
        return out

    return [Group("constant_offsets", "stream.constant_offsets", n, trades, blocks)] if n else []


def raw_head_bias(point: Point, stream: Stream) -> list[Group]:
    """A head bias c on the raw stream (counting.raw_head): the last block's MLP down bias y with dc = -y U (y in
    1^perp where its ones component trades already), and, with a shift (`offset`), E or the positions along 1
    with dc = -1 U."""
    from ...model.counting.raw_head import raw_head_bias as count

    spec, d = point.spec, point.d
    head = _head_of_raw_stream(point)
    if head is None or not count(spec, stream.offset or stream.pinned, stream.offset):
        return []
    if spec.parallel:
        raise NotImplementedError("a raw-stream head bias after parallel blocks")
    out = []
    last = spec.n_layers - 1
    if spec.layer_specs[-1].mlp.bias:
        basis = ones_complement(d).mT if (stream.offset or stream.pinned) else torch.eye(d, dtype=DTYPE)
        down = f"layers.{last}.mlp.down_bias"

        def fn(c):
            y = c @ basis
            return {down: y, "unembed_bias": -head(y)}

        out.append(Group("head_bias_constants", "head.down_bias", basis.shape[0], fn, (down, "unembed_bias")))
    if stream.offset:
        shift = "pos" if spec.tied else "embed"
        rows = point.writer_rows(shift).shape[0]
        ones = torch.ones(d, dtype=DTYPE)

        def shift_fn(c):
            return {shift: rows_update(point, shift, c[..., :1, None].expand(*c.shape[:-1], rows, d) * ones),
                    "unembed_bias": -c[..., :1] * head(ones)}  # fmt: skip

        out.append(Group("head_bias_constants", "head.shift", 1, shift_fn, (shift, "unembed_bias")))
    return out


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
