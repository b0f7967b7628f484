r"""Generators of the residual stream of a pre-LN model (sources `residual_scale`, `parallel_constants`,
`constant_offsets`, `residual_rotations`; counted by `attnid.model.counting.residual`, the same rule's count).

    scale      every writer dX = X: the norms are scale invariant (weakly identified for eps > 0); with no
               final norm the unembedding takes dU = -U; a tied head E^T takes the final norm's gain (and beta)
               dg = -g; sublayer output norms make their input's scale free too (dW_O = W_O, dW_down = W_down)
    constants  a constant written into the stream (b_O, a down bias, a value bias whose constant is 1) trades
               with another writer's, with a shift of E or the positions along 1, or with a head bias
    rotations  h -> h (I + Xi): :func:`rotation_group`, its closed-form Gram and action in `.rotations`
"""

from __future__ import annotations

import torch

from ...model.counting.residual import Stream
from ..group import Group
from ..point import DTYPE, Point, rows_update
from .raw_head import head_of_raw_stream
from .rotations import StreamRotations
from .writers import ones_complement, stream_writers


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
    head = head_of_raw_stream(point)
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


def rotation_group(point: Point, stream: Stream, readers: dict) -> Group | None:
    """The stream's rotations (and, raw head after LayerNorms, its shear): `.rotations`; None where the
    model fixes the stream's frame (a tied head after a final norm, output norms, an embedding norm)."""
    spec = point.spec
    if spec.tied and spec.final_norm or spec.output_norms or spec.embedding_norm:
        return None
    rot = StreamRotations(point, readers)
    meta = {"Q": rot.Q, "writers": rot.writers, "readers": readers, "head": rot.head}
    if not rot.shear:
        meta["action"], meta["adjoint"] = rot.action, rot.adjoint
    return Group("residual_rotations", "stream.rotations", rot.n, rot.tangent, rot.blocks(),
                 gram=None if rot.shear else rot.gram, meta=meta)  # fmt: skip
