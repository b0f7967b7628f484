r"""Generators of the residual stream of a pre-LN model (sources `residual_rotations`, `residual_scale`,
`parallel_constants`, `constant_offsets`, `embeddings`, `unread_positions`; counted by
`attnid.model.counting.residual` and `.embeddings`).

The stream h -> h (I + Xi): every writer X -> X (I + Xi); a norm reading the stream sees only its centred,
normalised part, which moves by the rotation A of Xi (A antisymmetric; on 1^perp after a LayerNorm, A 1 = 0),
so every map reading a norm takes D^-1 A^T D (D = diag(g)) and the norm's beta moves to beta D^-1 A D:

    rotations  dX = X A (writers), dW = -D^-1 A D W (readers of every norm), dbeta = beta D^-1 A D,
               and, with no final norm, the unembedding reading the raw stream dU = -Xi U; without a final
               LayerNorm Xi also shears the stream along 1: Xi = q 1^T / sqrt(d) (q in 1^perp) and 1 1^T / d
    scale      every writer dX = X: the norms are scale invariant (weakly identified for eps > 0); with no
               final norm the unembedding takes dU = -U; a tied head E^T takes the final norm's gain (and beta)
               dg = -g; sublayer output norms make their input's scale free too (dW_O = W_O, dW_down = W_down)

The basis of A is e_a e_b^T - e_b e_a^T (a < b), conjugated by an orthonormal basis Q of 1^perp after a
LayerNorm (A = Q E Q^T).
"""

from __future__ import annotations

import math

import torch

from ...model.counting.residual import Stream
from ..group import Group, along_input, along_output
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


def _antisym_basis(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.triu_indices(n, n, 1)


def rotation_group(point: Point, stream: Stream, readers: dict) -> Group | None:
    """The stream's rotations (and, raw head after LayerNorms, its shear): module docstring."""
    spec, d = point.spec, point.d
    if spec.tied and spec.final_norm or spec.output_norms or spec.embedding_norm:
        return None
    ln = point.layernorm
    m = d - 1 if ln else d
    Q = ones_complement(d) if ln else torch.eye(d, dtype=DTYPE)
    iu = _antisym_basis(m)
    n_rot = m * (m - 1) // 2
    raw = not spec.final_norm and not spec.tied  # the unembedding reads the raw stream
    shear = raw and ln  # Xi also shears the stream along 1 (d more)
    n = n_rot + (d if shear else 0)
    writers = stream_writers(point)
    head = "unembed" if raw else None
    ones = torch.ones(d, dtype=DTYPE) / math.sqrt(d)

    def fn(c):
        lead = c.shape[:-1]
        B = torch.zeros(*lead, m, m, dtype=DTYPE)
        B[..., iu[0], iu[1]] = c[..., :n_rot]
        B = B - B.mT
        A = Q @ B @ Q.mT  # (..., d, d)
        Xi = A
        if shear:  # q_j 1^T / sqrt(d) for the columns q_j of Q, and 1 1^T / d
            v = c[..., n_rot : n_rot + d - 1] @ Q.mT  # (..., d)
            Xi = A + v[..., :, None] * ones + c[..., -1:, None] * (ones[:, None] * ones)
        out = {}
        for name in writers:
            out[name] = rows_update(point, name, along_output(point.writer_rows(name), Xi))
        for norm, rs in readers.items():
            g = point.gain(norm)
            L = -(A * g) / g[:, None]  # -D^-1 A D
            for r in rs:
                out[r.weight] = out.get(r.weight, 0) + along_input(point.w[r.weight], L, r.axis)
            beta = point.beta(norm)
            if beta is not None:
                out[f"{norm}.bias"] = (beta @ ((A * g) / g[:, None]))
        if head:
            out[head] = along_input(point.w[head], -Xi, 0)
        return out

    blocks = tuple(writers) + tuple(r.weight for rs in readers.values() for r in rs)
    blocks += tuple(f"{n}.bias" for n in readers if point.beta(n) is not None) + ((head,) if head else ())

    def gram() -> torch.Tensor:
        """Its Gram in closed form: every block's tangent is L A R-shaped, so <t_A, t_A'> = sum tr(A^T L A' R)."""
        terms = []  # (L, R) (d, d) pairs
        S = sum(point.writer_rows(w).mT @ point.writer_rows(w) for w in writers)  # writers: tr(A^T S A')
        if head:
            U = point.w[head]
            terms.append((torch.eye(d, dtype=DTYPE), U @ U.mT))
        terms.append((S, torch.eye(d, dtype=DTYPE)))
        for norm, rs in readers.items():
            g = point.gain(norm)
            M = sum(_input_gram(point.w[r.weight], r.axis) for r in rs)  # sum W W^T over the input axis
            terms.append((torch.diag(g**-2), g[:, None] * M * g))
            beta = point.beta(norm)
            if beta is not None:
                b = beta / g
                terms.append((b[:, None] * b, torch.diag(g**2)))
        return _skew_gram(terms, Q, iu)

    def act(w, c):  # R = exp(A): writers X R, readers D^-1 R^T D W, beta D^-1 R D, the raw head R^T U
        B = c.new_zeros(m, m).index_put((iu[0], iu[1]), c)
        R = torch.linalg.matrix_exp(Q @ (B - B.mT) @ Q.mT)
        out = {}
        for name in writers:
            X = w[name]
            rows = point.writer_rows(name).shape[0]
            flat = X.reshape(-1, d)
            out[name] = torch.cat((flat[:rows] @ R, flat[rows:])).reshape(X.shape)
        for norm, rs in readers.items():
            gw = w[f"{norm}.gain"]
            g = 1.0 + gw if point.spec.gemma_gain else gw
            for r in rs:
                out[r.weight] = along_input(w[r.weight], R.mT * g / g[:, None], r.axis)
            if f"{norm}.bias" in w and point.beta(norm) is not None:
                out[f"{norm}.bias"] = w[f"{norm}.bias"] @ (R * g / g[:, None])
        if head:
            out[head] = R.mT @ w[head]
        return out

    def adjoint(v):  # <A, M>, M = sum X^T V_X - D^-1 (V_W W^T) D + D^-1 beta^T v_beta D - V_U U^T; skew part in Q
        some = next(iter(v.values()))
        mm = some.shape[0]
        M = torch.zeros(mm, d, d, dtype=DTYPE)
        for name in writers:
            if name in v:
                rows = point.writer_rows(name)
                M = M + rows.mT @ v[name].reshape(mm, -1, d)[:, : rows.shape[0]]
        for norm, rs in readers.items():
            g = point.gain(norm)
            part = torch.zeros(mm, d, d, dtype=DTYPE)
            for r in rs:
                if r.weight in v:
                    W = point.w[r.weight].movedim(r.axis, 0).reshape(d, -1)
                    part = part - v[r.weight].movedim(r.axis + 1, 1).reshape(mm, d, -1) @ W.mT
            beta = point.beta(norm)
            if beta is not None and f"{norm}.bias" in v:
                part = part + beta[:, None] * v[f"{norm}.bias"][:, None, :]
            M = M + part * g / g[:, None]
        if head and head in v:
            M = M - v[head] @ point.w[head].mT
        Mq = Q.mT @ M @ Q
        return Mq[:, iu[0], iu[1]] - Mq[:, iu[1], iu[0]]

    meta = {"Q": Q, "writers": writers, "readers": readers, "head": head}
    if not shear:
        meta["action"], meta["adjoint"] = act, adjoint
    return Group("residual_rotations", "stream.rotations", n, fn, tuple(dict.fromkeys(blocks)),
                 gram=None if shear else gram, meta=meta)  # fmt: skip


def _input_gram(W: torch.Tensor, axis: int) -> torch.Tensor:
    """W W^T contracted over every axis but the input one: (d, d)."""
    Wm = W.movedim(axis, 0).reshape(W.shape[axis], -1)
    return Wm @ Wm.mT


def _skew_gram(terms, Q: torch.Tensor, iu) -> torch.Tensor:
    """K[(a,b),(c,d)] = sum over (L, R) of tr(E_ab^T L' E_cd R'), L' = Q^T L Q, R' = Q^T R Q, E_ab = e_a e_b^T - e_b e_a^T:
    with K4 = sum_t L'_t (x) R'_t (Kronecker, one product of (m^2, t) by (t, m^2)), K4[ab, cd] - K4[ab, dc] -
    K4[ba, cd] + K4[ba, dc] (L, R symmetric)."""
    a, b = iu
    Ls = torch.stack([(Q.mT @ L @ Q).reshape(-1) for L, _ in terms])  # (t, m^2): index a m + c
    Rs = torch.stack([(Q.mT @ R @ Q).reshape(-1) for _, R in terms])  # index b m + d
    m = Q.shape[1]
    K4 = (Ls.mT @ Rs).reshape(m, m, m, m).permute(0, 2, 1, 3).reshape(m * m, m * m)  # [(a, b), (c, d)]
    ab, ba = a * m + b, b * m + a
    return K4[ab][:, ab] - K4[ab][:, ba] - K4[ba][:, ab] + K4[ba][:, ba]


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
