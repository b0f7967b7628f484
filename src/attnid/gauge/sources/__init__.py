r"""Every whole-model counting rule as generators at a point: one module per rule, named as the module of
`attnid.model.counting` that counts it, each docstring stating the symmetry whose tangent it writes down.

    source (breakdown key)                               count and generators (same module name)
    attention                                            .attention (per block: GL, RoPE commutant, GQA,
                                                         biases, q/k norms; latent attention in .latent)
    norm_gain, norm_bias, centring_readers/_writers      .norms
    residual_scale, residual_rotations,
    parallel_constants, constant_offsets                 .residual (the rotations' closed forms in .rotations)
    mlp_hidden, moe_hidden_units, moe_router             .mlp
    embeddings, unread_positions, pad_row, token_types,
    tied_shift, embedding_norm                           .embeddings
    latent_token_points, qk_norm_token_points,
    first_mlp_table                                      .token_points (the table's factorisation in .first_table)
    head_bias_constants                                  .raw_head
    post-LN models (their norms, scales, offsets)        .post_ln

.writers says who writes into the stream (shared by the stream's rules). :func:`generators` returns the groups of
a point; a range whose generators are not written down raises NotImplementedError naming it (the count refuses
what the rules do not cover; this refuses what the generators do not cover yet).
"""

from __future__ import annotations

from ...model.counting.limits import check_countable
from ...model.counting.residual import Stream
from ..group import Group
from ..point import Point
from .attention import AttentionBlock
from .embeddings import embedding_norm, pad_row, position_shift, tied_shift, unread_positions
from .mlp import hidden_units, router_shift
from .norms import centring_readers, centring_writers, norm_bias, norm_gain
from .post_ln import post_ln_groups
from .raw_head import raw_head_bias
from .residual import constant_offsets, parallel_constants, rotation_group, scale_groups
from .token_points import first_mlp_table, latent_token_points, qk_norm_token_points
from .writers import centred_writers

__all__ = ["generators"]


def generators(point: Point) -> list[Group]:
    """Every generator group of the model at `point` (exact and weak; fallback groups marked)."""
    spec = point.spec
    check_countable(spec)
    for missing, why in (
        (not spec.input_norms, "blocks without input norms (OLMo-2)"),
        (not spec.norm_gain, "norms without a gain (OLMo, NanoChat)"),
        (spec.positions == "sinusoidal", "the stream rotations that fix a sinusoidal table"),
    ):
        if missing:
            raise NotImplementedError(f"generators of {why}")
    groups = pre_ln_groups(point) if spec.norm_position == "pre" else post_ln_groups(point)
    return [g for g in groups if g.n]


def pre_ln_groups(point: Point) -> list[Group]:
    spec = point.spec
    stream = Stream.of(spec)
    if spec.embedding_norm and not spec.tied:
        raise NotImplementedError("an embedding norm before pre-LN blocks with an untied head")
    readers = point.norm_readers()
    groups: list[Group] = []
    for i, x in enumerate(spec.layer_specs):
        if x.attention.has_bias("o"):
            sink = f"layers.{i}.attn.b_O"
        elif spec.parallel and x.mlp.bias:
            sink = f"layers.{i}.mlp.down_bias"
        else:
            sink = None
        ones_sink = ("pos" if spec.tied else "embed") if stream.offset else None  # counting.residual.constant_offsets
        groups += AttentionBlock(point, i, True, f"layers.{i}.norm_1", sink, stream.d_const, ones_sink).groups()
        groups += hidden_units(point, i) + router_shift(point, i)
    groups = latent_token_points(point, groups) + qk_norm_token_points(point)
    groups += parallel_constants(point, stream) + constant_offsets(point, stream) + raw_head_bias(point, stream)
    for norm, rs in readers.items():
        if norm == "final_norm" and spec.tied:  # the head sees its gain; a head bias takes beta E^T
            if spec.lm_head_bias and point.beta(norm) is not None:
                groups.append(norm_bias(point, norm, rs))
            continue
        groups.append(norm_gain(point, norm, rs))
        if point.beta(norm) is not None:
            groups.append(norm_bias(point, norm, rs))
        groups += centring_readers(point, norm, rs)
    if point.layernorm and spec.final_norm:
        groups += centring_writers(point, centred_writers(point))
    rot = rotation_group(point, stream, readers)
    groups += ([rot] if rot is not None else []) + scale_groups(point, stream)
    groups += position_shift(point, stream) + unread_positions(point) + tied_shift(point) + pad_row(point)
    groups += embedding_norm(point) + first_mlp_table(point, stream)
    return groups
