"""The attention layers inside a whole model: what each block's attention leaves free (torch-free).

Notation of the package (`attnid.model.counting`): d = d_model; d_c = d - 1 after a LayerNorm (its
output is centred), d after an RMSNorm; [x] = 1 if x exists.
"""

from __future__ import annotations

import dataclasses

from ...layer.counting import count
from ...layer.counting_variants import fibre_of_product
from ...layer.spec import AttentionSpec


def attention_fibre(
    spec: AttentionSpec, d_in: int, d_out: int, biases: str, d_const: int | None = None
) -> tuple[int, int]:
    """(unidentified, weakly identified) of an attention layer reading a d_in-dim affine image of its input
    and writing into a d_out-dim stream, with effective biases `biases` (a subset of 'qkvo').

    Proposition (effective attention). After a norm the layer reads x = n diag(g) + beta, an affine image
    of a d_c-dim set, so its count is `attnid.layer.counting.count` at width d_in = d_c (d raw) on the reading
    side, with a bias on Q, K, V whenever the norm has a beta or the map has a bias (the offset beta W is a
    bias); on the writing side (unless a norm on the heads' output, BitNet's, keeps the layer's own count there) the value-output products W_V W_O^h land in d_out dims (d - 1 when every
    reader of the stream is a LayerNorm), and the value bias is seen through the constant it adds, of which
    the model can see d_const dims (default d_out). An output bias counts as present whenever something
    else adds a constant at the same point (a parallel block's MLP down bias).
    """
    d_const = d_out if d_const is None else d_const
    inner = count(dataclasses.replace(spec, d_model=d_in, biases=biases, seq_len=None))
    G, r, v = spec.n_kv_heads, spec.group_size, spec.d_head_v
    breakdown = dict(inner.breakdown)
    if spec.sub_norm:  # O(v) per group and the gains: the layer's own count (attnid.layer.counting_variants)
        return sum(breakdown.values()), inner.weakly_identified
    breakdown["value_output"] = G * fibre_of_product(d_in, r * d_out, v)
    if "v" not in biases:
        breakdown["value_bias"] = 0
    elif spec.sinks:  # rows sum to less than one: b_V seen except on the left kernel of the stacked W_O
        breakdown["value_bias"] = G * max(0, v - r * d_out)
    elif "o" in biases:
        breakdown["value_bias"] = G * v
    else:
        breakdown["value_bias"] = G * v - min(G * v, d_const)
    return sum(breakdown.values()), inner.weakly_identified


def latent_fibre(spec: AttentionSpec) -> tuple[int, int]:
    """(unidentified, weakly identified) of one multi-head latent attention block behind an RMSNorm.

    Proposition (latent attention in a model). The block reads and writes all d dims (an RMSNorm's output
    spans R^d), so its count is the layer's own (`attnid.layer.counting_variants`): r (r + 1) / 2 per latent of
    rank r (W_D -> W_D O, any gains, the up-projections compensating), GL(u) per head on the nope
    query/key (H u^2), one C^* per RoPE plane of the shared key (p), GL(v) per head on (W_UV, W_O) (H v^2),
    and the scale of each down-projection (weak for eps > 0): 1 + [r_q > 0]. The pre-attention gain
    against the rows of W_DQ (or W_Q), W_DKV, W_KR and the residual gauge on W_O and the down-projections
    are the model's own rules (norm gains, residual gauge).
    """
    inner = count(dataclasses.replace(spec, seq_len=None))
    return inner.unidentified, inner.weakly_identified


def attention_readers(a: AttentionSpec) -> list[tuple[int, bool]]:
    """(output width, has bias) of each linear map of an attention layer that reads its block's norm."""
    return [
        (a.n_heads * a.d_head_qk, a.has_bias("q")),
        (a.n_kv_heads * a.d_head_qk, a.has_bias("k")),
        (a.n_kv_heads * a.d_head_v, a.has_bias("v")),
    ]


def effective_biases(spec, a: AttentionSpec, normed: bool, extra_o: bool) -> str:
    """The biases the layer behaves as having: its own, q/k/v wherever a norm's beta feeds the map, and o
    when something else adds a constant where b_O does (extra_o)."""
    beta = normed and spec.norm_bias
    letters = "".join(x for x in "qkv" if a.has_bias(x) or beta)
    return letters + ("o" if a.has_bias("o") or extra_o else "")
