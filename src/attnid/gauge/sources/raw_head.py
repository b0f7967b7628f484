r"""Generators of a head bias on the raw stream, logits = h U + c with no final norm (source
`head_bias_constants`; counted by `attnid.model.counting.raw_head`, the same rule's count).

    constants  the last block's MLP down bias y with dc = -y U (y in 1^perp where its ones component trades
               already, `.residual.constant_offsets`)
    shift      with learned positions or an untied E (`offset`): E or the positions along 1 with dc = -1 U
"""

from __future__ import annotations

import torch

from ...model.counting.raw_head import absorbs_constants
from ...model.counting.raw_head import raw_head_bias as count
from ...model.counting.residual import Stream
from ..group import Group
from ..point import DTYPE, Point, rows_update
from .writers import ones_complement


def head_of_raw_stream(point: Point):
    """(v (d,) -> the V-vector v U a raw-stream head adds to every position's logits), or None without a head
    bias reading the raw stream (U = E^T when tied)."""
    if not absorbs_constants(point.spec):
        return None
    U = point.w["embed"].mT if point.spec.tied else point.w["unembed"]  # (d, V)
    return lambda v: v @ U


def raw_head_bias(point: Point, stream: Stream) -> list[Group]:
    """A head bias c on the raw stream (module docstring): the last block's MLP down bias y with dc = -y U (y in
    1^perp where its ones component trades already), and, with a shift (`offset`), E or the positions along 1
    with dc = -1 U."""
    spec, d = point.spec, point.d
    head = head_of_raw_stream(point)
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
