"""The residual stream of a pre-LN model: what its readers see, its gauge, and the constants written into it."""

from __future__ import annotations

from dataclasses import dataclass

from .attention import attention_fibre, effective_biases, latent_fibre


@dataclass(frozen=True)
class Stream:
    """What the readers of a pre-LN model's residual stream see (d = d_model)."""

    d_c: int  # dims a norm's output spans: d - 1 after a LayerNorm (centred), d after an RMSNorm
    d_out: int  # dims in which a writer's output is seen: d - 1 when every reader is a LayerNorm, else d
    d_const: int  # dims of a constant written into the stream that the model sees
    centred: bool  # every reader of the stream is a LayerNorm (a final LayerNorm reads it last)
    offset: bool  # LayerNorm without a final norm, untied or with learned positions: see constant_offsets
    pinned: bool  # LayerNorm without a final norm, tied, no learned positions: see constant_offsets

    @classmethod
    def of(cls, spec) -> Stream:
        d, ln = spec.d_model, spec.norm == "layernorm"
        centred = ln and spec.final_norm
        d_out = d - 1 if centred else d
        learned = spec.positions == "learned"
        offset = ln and not centred and (not spec.tied or learned)
        pinned = ln and not centred and spec.tied and not learned
        return cls(d - 1 if ln else d, d_out, d - 1 if offset else d_out, centred, offset, pinned)


def block_attention(spec, stream: Stream, x, d_const: int | None = None) -> tuple[int, int]:
    """(unidentified, weakly identified) of block x's attention in a pre-LN model (`attention_fibre` reading
    a norm; a parallel block's MLP bias lands where b_O does)."""
    a = x.attention
    if a.kv_lora_rank:
        return latent_fibre(a)
    eff = effective_biases(spec, a, True, spec.parallel and x.mlp.bias)
    return attention_fibre(a, stream.d_c, stream.d_out, eff, stream.d_const if d_const is None else d_const)


def parallel_constants(spec, stream: Stream) -> int:
    """d_const per parallel block whose attention has b_O and whose MLP has a down bias: the two constants
    land at the same point, so only their sum is seen."""
    return sum(stream.d_const for x in spec.layer_specs if spec.parallel and x.mlp.bias and x.attention.has_bias("o"))


def constant_offsets(spec, stream: Stream, absorbed: bool) -> int:
    """The 1-components of the constant writers that trade with each other, without a final LayerNorm.

    Proposition (constant offsets). Without a final norm the stream's 1-component reaches the logits only as
    one sum. When E is untied or positions are learned (`offset`), a uniform shift along 1 of E or of the
    positions adds to that sum, so every constant writer (b_O, b_down) has a free 1-component: 1 each.
    Tied without learned positions (`pinned`) nothing absorbs the sum: the writers' 1-components trade only
    among themselves, one fewer than the writers that can move theirs (a value bias through W_O, b_O,
    b_down), unless a head bias on the raw stream absorbs the sum (`absorbed`).
    """
    if not (stream.offset or stream.pinned):
        return 0
    total = 0
    for x in spec.layer_specs:
        a = x.attention
        total += a.has_bias("o") + x.mlp.bias
        if stream.pinned and not a.kv_lora_rank:  # the value bias's 1-component at the same point: one
            total += block_attention(spec, stream, x, spec.d_model - 1)[0] - block_attention(spec, stream, x)[0]
            total -= spec.parallel and x.mlp.bias and a.has_bias("o")
    if stream.pinned and not absorbed:  # the sum of the 1-components reaches the logits
        total = max(0, total - 1)
    return total


def residual_gauge(spec, stream: Stream) -> tuple[int, int]:
    """(rotations, scales) of the residual stream's gauge.

    Proposition (residual gauge). The stream h -> c h R, R orthogonal on what the norms read (O(d - 1) on
    the centred stream for LayerNorm, O(d) for RMSNorm), writers multiplied by c R, readers by (c R)^-1
    after the gains: d_c (d_c - 1) / 2 rotations and one scale c, which rests on the norms' scale
    invariance (weakly identified for eps > 0). Without a final norm the unembedding reads the raw stream:
    the LayerNorm gauge also shears the stream along 1, h -> h + (h . v) 1, and scales that direction (d
    more), and no norm makes c invisible. A tied unembedding (U = E^T) keeps only what maps E^T correctly:
    the scale with a final norm, the rotations without one.
    Proposition (fixed sinusoidal positions). The stream starts at s E_t + S_t with S fixed, so the gauge keeps
    only the c R that E can follow: c (s E_t + S_t) R = s E'_t + S_t at every position t in use, i.e. E' = c E R +
    v / s with v = S_t (c R - I) the same at every t (C: the centring of a LayerNorm, its 1-part unseen). So
    c = 1 and R fixes the differences C (S_t - S_0): the rotations of the d_c - r dims orthogonal to the
    r = min(T - 1, d_c) they span (generic: T distinct positions, d / 2 distinct frequencies), (d_c - r)(d_c - r - 1)
    / 2 of them, and no scale; none with a tied head (E' = E R + v / s must also read the final norm). Real
    models (T > d) keep none in exact arithmetic; in float64 the table's rows are nearly dependent (its low
    frequencies turn by little over T positions), which the mappings record (`attnid.hf.mapping.opt`).
    Proposition (sublayer output norms, Gemma-2/3). A norm on each sublayer's output makes the scale of
    W_O and of W_down invisible (2 per block, weak for eps > 0); their gains write into the stream, and
    diag(g) R is diagonal only for R = I: no rotation survives. Without input norms (OLMo-2) the sublayers'
    maps read the raw stream and take (c R)^-1 as any reader does: the same gauge.
    Proposition (norms without a gain). A tied head reads Norm_f(h) E^T: h -> h R with E -> E R keeps it
    (Norm_f(h R) R^T E^T), every rotation survives and no scale does (nothing takes c back from c E). A norm
    on the embeddings (NanoChat) fixes the stream's start Norm(E_t): its scale is seen, no c survives.
    """
    rotations = stream.d_c * (stream.d_c - 1) // 2
    if spec.positions == "sinusoidal":  # a final norm is required (limits): only the rotations fixing the table
        free = stream.d_c - min(spec.seq_len - 1, stream.d_c)
        rotations, scales = (0 if spec.tied else free * (free - 1) // 2), 0
    elif spec.tied:  # the scale survives behind a final norm with a gain; else every rotation does
        rotations, scales = (0, 1) if spec.final_norm and spec.norm_gain else (rotations, 0)
    else:
        rotations, scales = rotations + (0 if spec.final_norm or spec.norm != "layernorm" else spec.d_model), 1
    if spec.embedding_norm and not spec.norm_gain:
        scales = 0
    if spec.output_norms:
        rotations, scales = 0, scales + 2 * spec.n_layers
    return rotations, scales
