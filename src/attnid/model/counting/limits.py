"""Ranges of a whole model that the counting rules do not cover, refused by name (torch-free).

A :class:`attnid.model.ModelSpec` describes more models than the rules are derived for; `count_model`
calls :func:`check_countable` first, so a caller gets a SpecError naming the field to change, never a
wrong number. The ranges:

* vocab_size <= d_model: the rules are generic-position arguments, and the token rows E_t reach the
  first block as V points whose affine hull is the whole stream only when V >= d + 1. With V <= d
  every map reading the stream is free on the complement and the Jacobian finds more free directions
  (measured, 2 layers, d_model 8, pre-LN, GELU, eps 0: V = 8 without learned positions, LayerNorm +7,
  RMSNorm +16, RoPE +7, tied +1; tied with learned positions +1; V = 6 without positions +55
  (LayerNorm) and +64 (RMSNorm); d_model 6, V = 6: +5; V = d + 1 and d + 2 agree in every one).
* token types without learned positions, a masked-LM head outside a post-LN model, an embedding norm
  before pre-LN blocks other than BLOOM's (LayerNorm, a final norm, no learned positions, sequential) or
  NanoChat's (RMSNorm without a gain);
* latent attention outside pre-LN sequential RMSNorm blocks with RoPE or no positions, or reading
  fewer tokens than its rank; with an unrotated shared key, a query reading the raw latent, an indexer, an output
  gate or sinks (attnid.layer.spec_latent): counted layer by layer only;
* mixtures of experts outside pre-LN sequential blocks, or with expert biases behind a LayerNorm (a parallel
  block, or a LayerNorm's centring, would meet the routed constants in ways not derived);
* fixed sinusoidal positions outside pre-LN blocks with input norms, gains and a final norm, or with an
  embedding norm or latent attention;
* sublayer output norms other than RMSNorm; a post-LN model with a final norm;
* norms without a gain outside sequential pre-LN blocks, with output norms, or tied behind a LayerNorm;
  blocks without input norms other than OLMo-2's (RMSNorm output norms with gains); a norm on the MLP's
  hidden units (BitNet) outside sequential pre-LN blocks;
* a gain-free norm on the value heads (Gemma-4's v_norm): counted layer by layer only (measured at d 8, 2 blocks,
  RoPE: 125 against the 165 the whole-model rules give with GL(v) per group; the layer's own O(v) count in their
  place agrees without biases, with b_V, b_O or b_Q b_K alone and behind LayerNorms, but not with all four
  biases behind RMSNorms: 131 measured against 129 at eps 0, not derived);
* whatever a description records in `ModelSpec.not_modelled` (a config feature the mapping could not
  describe exactly: the key and why).
"""

from __future__ import annotations

from ...layer.spec import SpecError
from ..blocks import MoESpec


def check_countable(spec) -> None:
    """Raise SpecError (naming the field) for a ModelSpec whose count the rules do not cover."""
    for field, why in spec.not_modelled:
        raise SpecError(field, why)
    _check_embedding_side(spec)
    _check_sinusoidal(spec)
    _check_latent(spec)
    _check_experts(spec)
    _check_norm_kinds(spec)
    if any(x.attention.v_norm for x in spec.layer_specs):
        raise SpecError("v_norm", "a gain-free norm on the value heads is counted layer by layer only")
    if spec.output_norms and spec.norm != "rmsnorm":
        raise SpecError("output_norms", "sublayer output norms are modelled for sequential pre-LN RMSNorm blocks only")
    if spec.norm_position == "post" and spec.final_norm:
        raise SpecError("final_norm", "a post-LN model ends with its last block's norm; set final_norm false")
    if spec.vocab_size <= spec.d_model:
        raise SpecError(
            "vocab_size",
            f"{spec.vocab_size} <= d_model={spec.d_model}: the token rows span at most a {spec.vocab_size}-dim"
            " subspace of the stream, beyond the counting rules (they need vocab_size > d_model)",
        )


def _check_embedding_side(spec) -> None:
    if spec.token_types and spec.positions != "learned":
        raise SpecError("token_types", "token types are modelled with learned positions only (row 0 trades with them)")
    if spec.mlm_head and spec.norm_position != "post":
        raise SpecError("mlm_head", "the masked-LM head is modelled on post-LN models only (BERT)")
    if spec.embedding_norm and spec.norm_position == "pre":
        for field, bad, why in (
            ("norm", spec.norm != ("layernorm" if spec.norm_gain else "rmsnorm"),
             "is modelled with LayerNorm (BLOOM) or RMSNorm without a gain (NanoChat) only"),
            ("final_norm", not spec.final_norm, "is modelled with a final norm only"),
            ("positions", spec.positions == "learned", "is modelled without learned positions (BLOOM: ALiBi)"),
            ("parallel", spec.parallel, "is modelled with sequential blocks only"),
        ):
            if bad:
                raise SpecError(field, f"an embedding norm before pre-LN blocks {why}")


def _check_norm_kinds(spec) -> None:
    """Norms without a gain in sequential pre-LN blocks (OLMo, NanoChat), tied only with RMSNorm; blocks without
    input norms (OLMo-2) with RMSNorm output norms that have a gain."""
    if not spec.norm_gain:
        for field, bad, why in (
            ("norm_position", spec.norm_position != "pre", "in pre-LN blocks only"),
            ("parallel", spec.parallel, "in sequential blocks only"),
            ("output_norms", spec.output_norms, "without sublayer output norms only"),
            ("tied", spec.tied and spec.norm == "layernorm", "with a tied head behind RMSNorm only"),
        ):
            if bad:
                raise SpecError(field, f"norms without a gain are modelled {why}")
    if any(getattr(x.mlp, "sub_norm", False) for x in spec.layer_specs) and (
        spec.parallel or spec.norm_position != "pre"
    ):
        raise SpecError("mlp_sub_norm", "a norm on the MLP's hidden units is modelled in sequential pre-LN blocks only")
    if not spec.input_norms and (spec.norm != "rmsnorm" or not spec.norm_gain):
        raise SpecError("input_norms", "blocks without input norms are modelled with RMSNorm output norms only")


def _check_sinusoidal(spec) -> None:
    if spec.positions != "sinusoidal":
        return
    for field, bad, why in (
        ("norm_position", spec.norm_position != "pre", "are modelled in pre-LN blocks only"),
        ("final_norm", not spec.final_norm, "are modelled with a final norm only"),
        ("embedding_norm", spec.embedding_norm, "are modelled without an embedding norm"),
        ("kv_lora_rank", any(x.attention.kv_lora_rank for x in spec.layer_specs), "are modelled without latent attention"),
        ("norm_gain", not spec.norm_gain, "are modelled with norm gains only"),
        ("input_norms", not spec.input_norms, "are modelled with input norms only"),
    ):
        if bad:
            raise SpecError(field, f"fixed sinusoidal positions {why}")


def _check_latent(spec) -> None:
    latent = [(i, x.attention) for i, x in enumerate(spec.layer_specs) if x.attention.kv_lora_rank]
    if not latent:
        return
    i, a = latent[0]
    where = f"layer {i} has latent attention (kv_lora_rank={a.kv_lora_rank})"
    for field, ok, why in (
        ("norm", spec.norm == "rmsnorm", "modelled behind RMSNorm only"),
        ("norm_position", spec.norm_position == "pre", "modelled in pre-LN blocks only"),
        ("parallel", not spec.parallel, "modelled in sequential blocks only"),
        ("positions", spec.positions != "learned", "modelled with RoPE or no positions, not learned ones"),
        ("embedding_norm", not spec.embedding_norm, "modelled without an embedding norm"),
    ):
        if not ok:
            raise SpecError(field, f"{where}: {why}")
    for i, a in latent:  # attnid.layer.spec_latent's variants and gates beside the latents: per layer only
        for field, on in (("shared_key_dims", a.shared_key_dims), ("raw_latent_query", a.raw_latent_query),
                          ("index_topk", a.index_topk), ("output_gate", a.output_gate != "none"), ("sinks", a.sinks)):
            if on:
                raise SpecError(field, f"layer {i}: latent attention with {field} is counted layer by layer only")
    ranks = max(max(a.kv_lora_rank, a.q_lora_rank) for _, a in latent)
    if spec.vocab_size < ranks:
        raise SpecError("vocab_size", f"{spec.vocab_size} is below the latent rank {ranks}: not modelled")


def _check_experts(spec) -> None:
    experts = [x.mlp for x in spec.layer_specs if isinstance(x.mlp, MoESpec)]
    if not experts:
        return
    if spec.norm_position != "pre" or spec.parallel:
        raise SpecError("moe", "mixture-of-experts blocks are modelled in pre-LN sequential blocks only")
    if spec.norm == "layernorm" and any(m.expert_bias for m in experts):
        raise SpecError("moe", "experts with biases behind a LayerNorm are not modelled (their routed constants)")
