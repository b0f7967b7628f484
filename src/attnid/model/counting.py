r"""Exact whole-model counts: how many parameters of a language model its function leaves free.

The model (``attnid.model.spec``) is counted as a chain of reparametrisations. Every read of the
residual stream through a norm sees only an affine image of a normalised vector, every write is
a linear map into the stream, and the stream itself has a gauge. So the fibre (the set of
parameter points with the same logits, at a generic point) splits into sources, each a
symmetry or a blind spot, whose dimensions add because they act on different coordinates
(d = d_model, V = vocab, m = d_ff, T = positions; n_X = output width of a map X reading a norm;
[b] = 1 if bias b exists; d_c = d - 1 for a LayerNorm (its output is centred), d for RMSNorm):

1. norm gain <-> rows of the maps it feeds: diag(g) W = diag(g s) diag(s)^-1 W: d per norm whose
   readers are linear maps only (pre-LN norms, a final norm, the last post-LN norm).
2. LayerNorm centring, reading side: a LayerNorm's output minus its bias is orthogonal to 1/g,
   so W -> W + (1/g) u^T adds only the constant (beta . 1/g) u, which a bias of W (or beta itself)
   absorbs: n_X (1 + [b_X] - [beta or b_X]) per reader X; a pre-LN beta is absorbed by those
   rank-one terms or by the readers' biases: d more.
3. Attention, effective: the layer reading a d_in-dimensional affine image of its input
   (d_in = d_c after a norm, d raw) and writing into a d_out-dimensional stream (d - 1 when every
   reader of the stream is a LayerNorm): the attention counts of `attnid.counting` with d -> d_in
   on the reading side and d_out on the writing side, and a bias for Q, K, V whenever the norm has
   a beta or the map has a bias (the offset beta W is a bias); an output bias whenever something
   else adds a constant at the same point (a parallel block's MLP down bias).
4. Residual centring, writing side: when every reader of the stream is a LayerNorm, the stream's
   component along 1 is invisible, so each row of every map writing into it (E, positions in use,
   W_O, b_O, W_down, b_down) has one free entry. Learned position rows beyond seq_len: d each.
5. Residual gauge: the stream h -> c h R with R orthogonal on what the norms read (O(d - 1) on the
   centred stream for LayerNorm, O(d) for RMSNorm), writers multiplied by c R, readers by
   (c R)^-1 after the gains. Without a final norm (the unembedding reads the raw stream) the
   LayerNorm gauge also shears the stream along 1: h -> h + (h . v) 1 and scales that direction,
   d more. A tied unembedding (U = E^T) leaves only the part that maps E^T correctly: the scale
   with a final norm, the rotations without one. Without a final norm the stream's ones component
   reaches the logits as one sum, so a uniform shift along 1 of E (untied) or of the learned
   positions trades with the ones component of every constant writer (b_O, b_down): 1 each; tied
   without learned positions nothing absorbs the sum: the writers' 1-components trade among themselves,
   one fewer than the writers that can move theirs (a value bias through W_O, b_O, b_down).
6. Scale symmetries that rest on a norm's scale invariance: the residual scale c (pre-LN), and in a
   post-LN model one scale per sublayer (x -> c x for the stream segment feeding each norm).
   With eps > 0 they are weakly identified (their own class); the rest stays exact.
7. MLP hidden units: a positive scaling per unit for ReLU (x -> relu(c x) / c) and for the gated
   SwiGLU/GeGLU (up column c, down row 1/c): m per layer; GELU has none.
8. Embeddings: learned positions and token embeddings enter only through their sum: E + 1 w^T,
   pos - 1 w^T (d_out dims; none when tied, the unembedding sees E). A post-LN model's raw
   embeddings also carry the shear h -> h + (h . v) 1 (d, untied only).
9. Finite inputs: a parallel block's MLP at layer 0 without learned positions reads only the V
   points Norm(E[t]) and writes a V x d_out table added to E[t] (`attnid.model.parallel_first`):
   max(0, reach + k - V d_out) more, reach = the MLP's effective parameters (+ V row scales of E,
   untied), k = the point maps layer 0's readers absorb (+ a shift of the table against b_O).

10. Post-LN blocks (x -> Norm(x + f(x))): see :func:`_post_ln`; the stream between norms carries
   the norms' gains and biases through the skip, so they are seen except for beta's ones
   component, its trade with the next sublayer's own constant, one scale per sublayer, the shear
   of raw embeddings, a uniform shift of the raw embeddings that the first attention's biases
   absorb, and, with a single block, one rotation pair around the skip map.
11. Embedding norm before pre-LN blocks (`attnid.model.embeddings`, BLOOM): the blocks see V points
   n(E_t) diag(g_e) + beta_e, blind to each row's scale and ones shift. Tied: [beta] (beta_e . 1) + a
   second scale (the head's). Untied: max(k + rot, V + [beta] + 1) in place of the rotations
   (k = d (1 + [beta]), rot = d_c (d_c - 1) / 2); eps > 0: k + rot exact, the excess row scales weak.
12. Token types (ids all 0): row 0 trades with the learned positions, the other rows are unread: d per row.
13. Heads: BERT's MLM transform reads the last norm: its gain, beta and centring (rules 1, 2) move there,
   d (2 + [beta]); a tied head after a LayerNorm with learned positions: E + 1 (a/g)^T, pos - 1 (a/g)^T,
   seen only through a beta . (1/g): 1 when a head bias absorbs it or beta is absent.
14. Latent attention (`attnid.model.latent`): per block the layer's count, r (r + 1) / 2 per latent
   + H u^2 + p + H v^2 (1 + [r_q > 0] weak scales); the first block reads V token points, so each
   latent there admits W_D -> W_D A / kappa keeping |y_t A| on them: max(0, r (r + 1) / 2 + 1 - V) exact.
15. Mixture of experts (`attnid.model.moe`): the top-k choice is locally constant on finitely many inputs, so
   per block E m hidden units (GPT-OSS's (up + 1) needs its up bias) + the shared experts' units, and the
   router's common shift z -> z + x.v when the weights are a softmax: d_in + [b_r] per component of the
   chosen-together graph if renormalised over the chosen (1; n_group if topk_group = 1; E if k = 1), else once.
16. Sublayer output norms (Gemma-2/3: h + Norm(Attn(Norm h)), h + Norm(MLP(Norm h))): the scale of
   W_O and of W_down is invisible behind the norm (2 per block, weak for eps > 0); the norms' gains
   write into the stream, and diag(g) R is diagonal only for R = I: no residual rotations.
17. Head bias on the raw stream (`attnid.model.raw_head`, no final norm): it absorbs every constant the logits
   see: the last block's b_down (d, less its 1-component counted in 5) and, with LayerNorm, the 1-components' sum (+1).
18. Per-head q/k norms of the first block on V token points (`attnid.model.qk_points`): a projection of width w
   keeps each point's direction under x_t W' = lambda_t y_t: max(0, V - 1 - w (V - d_in)) each (weak for eps > 0).

Everything else (head sizes above d_model, GQA, RoPE, attention biases) enters through 3.
Blocks that differ (`ModelSpec.layers`: their own attention spec and MLP) add their own per-block
terms (3, 2's readers, 4's writers, 7, the constants of 3 and 5); the norms' gauge (1, 5, 6, 8) is
the model's, whatever each block holds.
Refused by name (`attnid.model.limits`): vocab_size <= d_model (the token rows do not span the stream).
ReLU units make a measurement depend on the draw (a unit active on few tokens hides directions):
the counts are generic; the judge's cases use GELU where a ReLU unit could starve.
"""

from __future__ import annotations

import dataclasses

from ..counting import Counts, _fibre_of_product, count
from .embeddings import head_and_type_terms, pre_ln_embedding_norm
from .latent import latent_fibre, token_point_terms
from .limits import check_countable
from .moe import MoESpec, moe_terms
from .parallel_first import first_mlp_excess
from .qk_points import qk_norm_point_terms
from .raw_head import absorbs_constants, raw_head_bias_terms
from .spec import ModelSpec


def attention_fibre(spec, d_in: int, d_out: int, biases: str, d_const: int | None = None) -> tuple[int, int]:
    """(unidentified, weakly identified) of an attention layer reading d_in dims and writing d_out
    dims with effective biases `biases` (a subset of 'qkvo'): `attnid.counting.count` of the layer
    at width d_in, with the value side re-counted for d_out; d_const (default d_out): dims of the
    constant it adds that the model can see."""
    d_const = d_out if d_const is None else d_const
    inner = count(dataclasses.replace(spec, d_model=d_in, biases=biases, seq_len=None))
    G, r, v = spec.n_kv_heads, spec.group_size, spec.d_head_v
    breakdown = dict(inner.breakdown)
    breakdown["value_output"] = G * _fibre_of_product(d_in, r * d_out, v)
    if "v" not in biases:
        breakdown["value_bias"] = 0
    elif spec.sinks:  # rows sum to less than one: b_V seen except on the left kernel of the stacked W_O
        breakdown["value_bias"] = G * max(0, v - r * d_out)
    elif "o" in biases:
        breakdown["value_bias"] = G * v
    else:
        breakdown["value_bias"] = G * v - min(G * v, d_const)
    return sum(breakdown.values()), inner.weakly_identified


def _attention_readers(a) -> list[tuple[int, bool]]:
    """(output width, has bias) of each linear map of an attention layer reading a norm."""
    return [
        (a.n_heads * a.d_head_qk, a.has_bias("q")),
        (a.n_kv_heads * a.d_head_qk, a.has_bias("k")),
        (a.n_kv_heads * a.d_head_v, a.has_bias("v")),
    ]


def _centring_readers(spec: ModelSpec, readers) -> int:
    """Rule 2, per reader: n_X (1 + [b_X] - [beta or b_X]) (LayerNorm only)."""
    if spec.norm != "layernorm":
        return 0
    return sum(n * (1 + b - (spec.norm_bias or b)) for n, b in readers)


def _effective_biases(spec: ModelSpec, a, normed: bool, extra_o: bool) -> str:
    beta = normed and spec.norm_bias
    letters = "".join(x for x in "qkv" if a.has_bias(x) or beta)
    return letters + ("o" if a.has_bias("o") or extra_o else "")


def count_model(spec: ModelSpec) -> Counts:
    """Exact unidentified and weakly identified counts of the whole model (rules in the module docstring)."""
    check_countable(spec)  # ranges the rules do not cover (vocab_size <= d_model), refused by name
    d, V, L = spec.d_model, spec.vocab_size, spec.n_layers
    ln, beta, tied = spec.norm == "layernorm", spec.norm_bias, spec.tied
    learned = spec.positions == "learned"
    d_c = d - 1 if ln else d  # dims a norm's output spans
    layers = spec.layer_specs
    # rows writing into the stream, per block: W_O's rows, b_O, the MLP's down rows and bias
    writes = sum(x.attention.n_heads * x.attention.d_head_v + x.attention.has_bias("o") + x.mlp.writes for x in layers)
    head = [(spec.vocab_size, spec.lm_head_bias)]
    b: dict[str, int] = {}
    if spec.norm_position == "pre":
        centred = ln and spec.final_norm  # every reader of the stream is a LayerNorm
        d_out = d - 1 if centred else d
        # Without a final norm the stream's 1-component reaches the logits only as one sum, to which
        # a uniform shift along 1 of E (untied) or of the learned positions adds: every constant
        # writer has a free 1-component.
        offset = ln and not centred and (not tied or learned)
        # Tied without learned positions nothing absorbs that sum: it is seen, so the constant writers'
        # 1-components trade only among themselves (one fewer than the writers that can move theirs).
        pinned = ln and not centred and tied and not learned
        d_const = d - 1 if offset else d_out
        b["attention"] = b["parallel_constants"] = b["constant_offsets"] = readers = attn_weak = 0
        for x in layers:
            a = x.attention
            extra_o = spec.parallel and x.mlp.bias  # a parallel block's MLP bias lands where b_O does
            eff = _effective_biases(spec, a, True, extra_o)
            if a.kv_lora_rank:  # multi-head latent attention: rule 14
                attn, weak = latent_fibre(a)
            else:
                attn, weak = attention_fibre(a, d_c, d_out, eff, d_const)
            b["attention"] += attn
            attn_weak += weak
            b["parallel_constants"] += d_const if extra_o and a.has_bias("o") else 0
            b["constant_offsets"] += a.has_bias("o") + x.mlp.bias if offset or pinned else 0
            if pinned and not a.kv_lora_rank:  # the value bias's 1-component, b_O and b_down at one point: one
                b["constant_offsets"] += attention_fibre(a, d_c, d_out, eff, d - 1)[0] - attn
                b["constant_offsets"] -= extra_o and a.has_bias("o")
            readers += _centring_readers(spec, _attention_readers(a) + x.mlp.readers)
        if pinned and not absorbs_constants(spec):  # the sum of the 1-components reaches the logits
            b["constant_offsets"] = max(0, b["constant_offsets"] - 1)
        b["head_bias_constants"] = raw_head_bias_terms(spec, offset or pinned, offset)  # rule 17
        block_norms = L * (1 if spec.shared_norm else 2)
        head_norm = spec.final_norm and not tied  # the final norm's only reader is a free linear map
        b["norm_gain"] = d * (block_norms + head_norm)
        b["norm_bias"] = d * beta * (block_norms + head_norm + (spec.final_norm and tied and spec.lm_head_bias))
        b["centring_readers"] = readers + (_centring_readers(spec, head) if head_norm else 0)
        b["centring_writers"] = (0 if tied else V) + spec.seq_len * learned + writes if centred else 0
        rotations = d_c * (d_c - 1) // 2
        if tied:
            b["residual_rotations"], scales = (0, 1) if spec.final_norm else (rotations, 0)
        else:
            b["residual_rotations"], scales = rotations + (0 if spec.final_norm or not ln else d), 1
        if spec.output_norms:  # rule 16: the output norms' gains write into the stream, so no rotation follows them
            b["residual_rotations"], scales = 0, scales + 2 * L
        b["mlp_hidden"] = sum(x.mlp.hidden_scalings for x in layers if not isinstance(x.mlp, MoESpec))
        b.update(moe_terms(spec, d_c))  # rule 15
        b["latent_token_points"], weak_lost = token_point_terms(spec)  # rule 14: the first block reads V points
        attn_weak -= weak_lost
        b["qk_norm_token_points"], qk_weak = qk_norm_point_terms(spec)  # rule 18: q/k norms on V points
        attn_weak += qk_weak
        b["embeddings"] = d_out if learned and not tied else 0
        extra_scales, embed_weak = pre_ln_embedding_norm(spec, b)  # rule 11
        scales += extra_scales
        b["unread_positions"] = (spec.max_positions - spec.seq_len) * d if learned else 0
        b["first_mlp_table"] = first_mlp_excess(spec, d_c, d_out, d_const)  # rule 9
    else:
        b, scales, attn_weak = _post_ln(spec)
        embed_weak = 0
    b.update(head_and_type_terms(spec))  # rules 12, 13
    weak = scales if spec.norm_eps > 0 else 0
    b["residual_scale"] = scales - weak
    weak += attn_weak + embed_weak
    b = {k: v for k, v in b.items() if v}
    return Counts(total=spec.n_params, unidentified=sum(b.values()), breakdown=b, weakly_identified=weak)


def _post_ln(spec: ModelSpec) -> tuple[dict, int, int]:
    """Post-LN blocks (x -> Norm(x + f(x))): the breakdown, the number of scale symmetries and the
    attention layers' weakly identified dims.

    Every sublayer writes into a norm (centred output, d_c); the stream between norms is
    x = n diag(g) + beta, read by the next sublayer and carried by the skip, so a norm's gain and
    bias are seen, except: beta's ones component (the next norm ignores it, the readers' rank-one
    terms absorb it) and, when the next sublayer adds a constant of its own, beta's centred part
    up to that constant's dimension; one scale per sublayer (weak for eps > 0); raw embeddings
    read by the first layer admit the shear h -> h + (h . v) 1 (LayerNorm); with one block the
    skip map C diag(g) C admits one rotation pair (X on its input, Y on its output, X A - A Y in
    the gains' span: 2 d_c (d_c - 1) / 2 + d + 1 unknowns against d_c^2 equations).
    """
    d, V, L = spec.d_model, spec.vocab_size, spec.n_layers
    ln, beta, tied = spec.norm == "layernorm", spec.norm_bias, spec.tied
    learned = spec.positions == "learned"
    d_c = d - 1 if ln else d
    head = [(spec.vocab_size, spec.lm_head_bias)]
    layers = spec.layer_specs
    b: dict[str, int] = {"attention": 0, "centring_readers": 0, "centring_writers": 0}
    first_normed = spec.embedding_norm
    weak = 0
    for i, x in enumerate(layers):
        a, normed = x.attention, i > 0 or first_normed  # layer 0 reads the raw embeddings unless normed
        attn, attn_weak = attention_fibre(a, d_c if normed else d, d_c, _effective_biases(spec, a, normed, False))
        b["attention"] += attn
        weak += attn_weak
        b["centring_readers"] += _centring_readers(spec, (_attention_readers(a) if normed else []) + x.mlp.readers)
        b["centring_writers"] += a.n_heads * a.d_head_v + a.has_bias("o") + x.mlp.writes if ln else 0
    b["norm_gain"] = 0 if tied else d
    b["norm_bias"] = d * beta * (not tied or spec.lm_head_bias)
    b["centring_readers"] += 0 if tied else _centring_readers(spec, head)
    if spec.embedding_norm and ln:
        b["centring_writers"] += (0 if tied else V) + spec.seq_len * learned
    b["mlp_hidden"] = sum(x.mlp.hidden_scalings for x in layers)
    shift = (d_c if spec.embedding_norm else d) if learned else 0
    shear = d if ln and not spec.embedding_norm else 0
    b["embeddings"] = 0 if tied else shift + shear
    # A uniform shift of the raw embeddings (E untied, or the learned positions) that the first
    # attention's biases absorb: b_Q the query offset, b_K (or the softmax, without RoPE) the key
    # offset, b_O the value offset and the skip.
    a = layers[0].attention
    absorbed = a.has_bias("o") and a.has_bias("q") and (a.has_bias("k") or a.rope_dims == 0)
    if absorbed and not spec.embedding_norm and (not tied or learned):
        b["embeddings"] += d
    b["unread_positions"] = (spec.max_positions - spec.seq_len) * d if learned else 0
    if ln and beta:  # norms followed by a sublayer: beta's ones component, and its trade with the sublayer's constant

        def v_const(a):
            return d_c if a.has_bias("o") else min(a.n_kv_heads * a.d_head_v, d_c)

        followed = [v_const(x.attention) for i, x in enumerate(layers) if i > 0 or first_normed]
        followed += [d_c if x.mlp.bias else 0 for x in layers]
        b["norm_bias_offsets"] = sum(1 + c for c in followed)
    b["skip_rotation"] = 1 if ln and L == 1 and not spec.embedding_norm and not tied else 0
    return b, 2 * L + spec.embedding_norm, weak
