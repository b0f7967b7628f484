"""Post-LN blocks (x -> Norm(x + f(x)), BERT, OPT-350m): the whole breakdown (torch-free)."""

from __future__ import annotations

from .attention import attention_fibre, attention_readers, effective_biases
from .embeddings import unread_positions
from .mlp import hidden_scalings
from .norms import centring_readers


def post_ln_terms(spec) -> tuple[dict, int, int]:
    """(breakdown, scale symmetries, the attention layers' weakly identified dims) of a post-LN model.

    Proposition (post-LN blocks). Every sublayer writes into a norm (centred output, d_c); the stream between
    norms is x = n diag(g) + beta, read by the next sublayer and carried by the skip, so a norm's gain and
    bias are seen, except: beta's ones component (the next norm ignores it, the readers' rank-one terms
    absorb it) and, when the next sublayer adds a constant of its own, beta's centred part up to that
    constant's dimension; one scale per sublayer (weak for eps > 0); raw embeddings read by the first layer
    admit the shear h -> h + (h . v) 1 (LayerNorm); a uniform shift of the raw embeddings (E untied, or the
    learned positions) that the first attention's biases absorb (b_Q the query offset, b_K or the softmax
    without RoPE the key offset, b_O the value offset and the skip); and with one block the skip map
    C diag(g) C admits one rotation pair (X on its input, Y on its output, X A - A Y in the gains' span:
    2 d_c (d_c - 1) / 2 + d + 1 unknowns against d_c^2 equations). Only the last norm, read by the head,
    has its gain and beta free against an untied unembedding (its readers are linear maps only).
    """
    d, V, L = spec.d_model, spec.vocab_size, spec.n_layers
    ln, beta, tied = spec.norm == "layernorm", spec.norm_bias, spec.tied
    learned = spec.positions == "learned"
    d_c = d - 1 if ln else d
    layers = spec.layer_specs
    b: dict[str, int] = {"attention": 0, "centring_readers": 0, "centring_writers": 0}
    first_normed = spec.embedding_norm
    weak = 0
    for i, x in enumerate(layers):
        a, normed = x.attention, i > 0 or first_normed  # layer 0 reads the raw embeddings unless normed
        attn, attn_weak = attention_fibre(a, d_c if normed else d, d_c, effective_biases(spec, a, normed, False))
        b["attention"] += attn
        weak += attn_weak
        b["centring_readers"] += centring_readers(spec, (attention_readers(a) if normed else []) + x.mlp.readers)
        b["centring_writers"] += a.n_heads * a.d_head_v + a.has_bias("o") + x.mlp.writes if ln else 0
    b["norm_gain"] = 0 if tied else d
    b["norm_bias"] = d * beta * (not tied or spec.lm_head_bias)
    b["centring_readers"] += 0 if tied else centring_readers(spec, [(V, spec.lm_head_bias)])
    if spec.embedding_norm and ln:
        b["centring_writers"] += (0 if tied else V) + len(spec.position_rows)
    b["mlp_hidden"] = sum(hidden_scalings(x.mlp) for x in layers)
    shift = (d_c if spec.embedding_norm else d) if learned else 0
    shear = d if ln and not spec.embedding_norm else 0
    b["embeddings"] = 0 if tied else shift + shear
    a = layers[0].attention
    absorbed = a.has_bias("o") and a.has_bias("q") and (a.has_bias("k") or a.rope_dims == 0)
    if absorbed and not spec.embedding_norm and (not tied or learned):
        b["embeddings"] += d
    b["unread_positions"] = unread_positions(spec)
    if ln and beta:  # norms followed by a sublayer: beta's ones component, and its trade with the sublayer's constant

        def value_constant(a):
            return d_c if a.has_bias("o") else min(a.n_kv_heads * a.d_head_v, d_c)

        followed = [value_constant(x.attention) for i, x in enumerate(layers) if i > 0 or first_normed]
        followed += [d_c if x.mlp.bias else 0 for x in layers]
        b["norm_bias_offsets"] = sum(1 + c for c in followed)
    b["skip_rotation"] = 1 if ln and L == 1 and not spec.embedding_norm and not tied else 0
    return b, 2 * L + spec.embedding_norm, weak
