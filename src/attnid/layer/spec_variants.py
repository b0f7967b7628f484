"""The modern-attention variant fields of :class:`attnid.layer.spec.AttentionSpec`: defaults, label parts,
checks and the extra parameter blocks (torch-free; the spec calls these, nothing else should).

Modern variants (each counted in `attnid.layer.counting`, run by `attnid.layer.forward` via
`attnid.layer.variants`): q/k norms (`qk_norm`: RMSNorm per head with one gain shared by all heads,
Qwen3 and Gemma-3; RMSNorm across all heads, OLMo-2; LayerNorm per head, Phi; LayerNorm per head with
every head's own gain and no shift, StableLM and Cohere; the per-head RMSNorm with one gain applied after
RoPE, HunYuan; RMSNorm per head without a gain, NanoChat), with their `norm_eps`; an RMSNorm with a gain
across all heads on the attention's output before W_O (`sub_norm`, BitNet's attn_sub_norm); a sigmoid gate on
the heads' output before W_O (`output_gate`: per element, Qwen3-Next and Qwen3.5; per head, LFM3); attention sinks (one logit per head in every softmax, GPT-OSS); logit softcapping
(Gemma-2); sliding windows; ALiBi (BLOOM, Falcon); multi-head latent attention (DeepSeek-V2/V3:
`kv_lora_rank`, `q_lora_rank`, a decoupled RoPE key of rope_dims shared by all heads, or Kimi's unrotated one, and
DeepSeek's sparse-attention indexer: `attnid.layer.spec_latent`); an RMSNorm without a gain
on every value head (`v_norm`, Gemma-4); causal attention within chunks of positions (`attention_chunk`, Llama-4);
a fixed query scale per position (`temperature_floor`, `temperature_scale`: Llama-4's NoPE layers); cross-attention
(`d_cross`: keys and values read the encoder's states, of that width; the decoders of BART, Whisper, ...), modelled
as plain attention without a mask or positions.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

from ..errors import SpecError
from .spec_gates import GATE_DEFAULTS, GATE_LABEL, checked_gates, gated_block_shapes
from .spec_latent import LATENT_DEFAULTS, LATENT_LABEL, checked_latent, indexer_block_shapes

QK_NORMS = ("none", "rms_head", "rms_all", "layernorm_head", "layernorm_heads", "rms_head_rotated", "rms_plain")
OUTPUT_GATES = ("none", "element", "head")
QK_NORMS_AFTER_ROPE = ("rms_head_rotated", "rms_plain")  # applied to the rotated queries and keys
# Variant fields and their defaults: the label, to_row and from_row mention them only when set.
VARIANT_DEFAULTS = {
    "qk_norm": "none",
    "norm_eps": 1e-6,
    "sinks": False,
    "softcap": 0.0,
    "sliding_window": 0,
    "alibi": False,
    "kv_lora_rank": 0,
    "q_lora_rank": 0,
    "sub_norm": False,
    "output_gate": "none",
    "v_norm": False,
    "attention_chunk": 0,
    "temperature_floor": 0,
    "temperature_scale": 0.1,
    **GATE_DEFAULTS,
    "d_cross": 0,
    **LATENT_DEFAULTS,
}

# Label part of each variant field (only set fields appear; norm_eps only matters next to a norm).
VARIANT_LABEL = {
    "qk_norm": lambda v: f"qk{v.replace('_', '')}",
    "norm_eps": lambda v: f"eps{v:g}",
    "sinks": lambda v: "sinks",
    "softcap": lambda v: f"cap{v:g}",
    "sliding_window": lambda v: f"w{v}",
    "alibi": lambda v: "alibi",
    "kv_lora_rank": lambda v: f"mla{v}",
    "q_lora_rank": lambda v: f"q{v}",
    "sub_norm": lambda v: "subnorm",
    "output_gate": lambda v: f"gate{v}",
    "v_norm": lambda v: "vnorm",
    "attention_chunk": lambda v: f"chunk{v}",
    "temperature_floor": lambda v: f"temp{v}",
    "temperature_scale": lambda v: f"tscale{v:g}",
    **GATE_LABEL,
    "d_cross": lambda v: f"cross{v}",
    **LATENT_LABEL,
}


def checked_variants(spec) -> dict:
    """The variant fields normalised (float, bool, int), name -> value; SpecError names a bad field
    or a combination the counting does not model."""
    out = {}
    if spec.qk_norm not in QK_NORMS:
        raise SpecError("qk_norm", f"must be one of {', '.join(QK_NORMS)}, got {spec.qk_norm!r}")
    for name in ("norm_eps", "softcap"):
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < 0:
            raise SpecError(name, f"must be a finite number >= 0, got {value!r}")
        out[name] = float(value)
    for name in ("sinks", "alibi", "sub_norm"):
        value = getattr(spec, name)
        if type(value).__name__ == "bool_":
            out[name] = bool(value)
        elif not isinstance(value, bool):
            raise SpecError(name, f"must be true or false, got {value!r}")
    for name in ("sliding_window", "kv_lora_rank", "q_lora_rank"):
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
            raise SpecError(name, f"must be an integer >= 0, got {value!r}")
        out[name] = int(value)
    if spec.sliding_window == 1:
        raise SpecError("sliding_window", "1 leaves each query only itself (softmax of one key); use 0 or >= 2")
    if spec.sliding_window and not spec.causal:
        raise SpecError("sliding_window", "a sliding window is modelled for causal attention only")
    if spec.alibi and spec.rope_dims:
        raise SpecError("alibi", "ALiBi together with RoPE is not modelled")
    if spec.qk_norm != "none" and spec.d_head_qk > spec.d_model:
        raise SpecError("qk_norm", f"q/k norms are modelled for d_head_qk <= d_model, got {spec.d_head_qk}")
    if spec.sub_norm:
        for name, ok, why in (
            ("sinks", not spec.sinks, "a norm on the heads' output is modelled without sinks"),
            ("kv_lora_rank", not spec.kv_lora_rank, "a norm on the heads' output is modelled without latents"),
            ("d_head_v", spec.d_head_v <= spec.d_model, "a norm on the heads' output needs d_head_v <= d_model"),
        ):
            if not ok:
                raise SpecError(name, why)
    if spec.output_gate not in OUTPUT_GATES:
        raise SpecError("output_gate", f"must be one of {', '.join(OUTPUT_GATES)}, got {spec.output_gate!r}")
    if spec.output_gate != "none":
        for name, ok, why in (
            ("sub_norm", not spec.sub_norm, "an output gate is modelled without a norm on the heads' output"),
        ):
            if not ok:
                raise SpecError(name, why)
    out |= checked_llama4_gemma4(spec)
    out |= checked_latent(spec)  # latent attention, its shared key and indexer (attnid.layer.spec_latent)
    out |= checked_gates(spec)  # gate function, gate bias, differential attention (attnid.layer.spec_gates)
    return out | checked_cross(spec)


def checked_cross(spec) -> dict:
    """d_cross normalised; SpecError when it is not an integer >= 0, or when a cross-attention spec has a mask,
    positions or another variant (cross-attention is modelled as plain attention with biases)."""
    value = spec.d_cross
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
        raise SpecError("d_cross", f"must be an integer >= 0 (0: self-attention), got {value!r}")
    if value:
        if spec.causal:
            raise SpecError("causal", "cross-attention has no causal mask: every query sees every encoder state")
        if spec.rope_dims:
            raise SpecError("rope_dims", "cross-attention is modelled without RoPE (queries, keys share no positions)")
        others = [n for n, v in VARIANT_DEFAULTS.items() if n not in ("d_cross", "norm_eps") and getattr(spec, n) != v]
        if others:
            raise SpecError(others[0], "cross-attention is modelled as plain attention (biases only), not with it")
    return {"d_cross": int(value)}


def checked_llama4_gemma4(spec) -> dict:
    """v_norm (Gemma-4), attention_chunk and the query temperature (Llama-4), normalised; SpecError names a bad
    field or a combination the count does not model."""
    out = {}
    if type(spec.v_norm).__name__ == "bool_":
        out["v_norm"] = bool(spec.v_norm)
    elif not isinstance(spec.v_norm, bool):
        raise SpecError("v_norm", f"must be true or false, got {spec.v_norm!r}")
    for name in ("attention_chunk", "temperature_floor"):
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
            raise SpecError(name, f"must be an integer >= 0, got {value!r}")
        out[name] = int(value)
    scale = spec.temperature_scale
    if isinstance(scale, bool) or not isinstance(scale, Real) or not math.isfinite(scale) or scale <= 0:
        raise SpecError("temperature_scale", f"must be a finite number > 0, got {scale!r}")
    out["temperature_scale"] = float(scale)
    if out["temperature_scale"] != VARIANT_DEFAULTS["temperature_scale"] and not out["temperature_floor"]:
        raise SpecError("temperature_scale", "has no effect without temperature_floor > 0; leave it at 0.1")
    if spec.v_norm:
        for name, ok, why in (
            ("d_head_v", 2 <= spec.d_head_v <= spec.d_model, "a norm on the value heads is modelled for 2 <= d_head_v"
             " <= d_model (on one dim it is the sign of the value)"),
            ("sub_norm", not spec.sub_norm, "a norm on the value heads is modelled without a norm on their output"),
            ("output_gate", spec.output_gate == "none", "a norm on the value heads is modelled without output gates"),
            ("kv_lora_rank", not spec.kv_lora_rank, "a norm on the value heads is modelled without latents"),
        ):
            if not ok:
                raise SpecError(name, why)
    chunk = out["attention_chunk"]
    if chunk == 1:
        raise SpecError("attention_chunk", "1 leaves each query only itself (softmax of one key); use 0 or >= 2")
    if chunk and not spec.causal:
        raise SpecError("attention_chunk", "chunked attention is modelled for causal attention only")
    if chunk and spec.sliding_window:
        raise SpecError("attention_chunk", "a chunk mask together with a sliding window is not modelled")
    if (chunk or out["temperature_floor"]) and spec.kv_lora_rank:
        raise SpecError("kv_lora_rank", "chunks and the query temperature are modelled without latent attention")
    return out


def variant_block_shapes(spec) -> dict[str, tuple[int, ...]]:
    """q/k norm gains (and LayerNorm shifts), sink logits, gates, a sparse-attention indexer: after the plain blocks."""
    H, G, k = spec.n_heads, spec.n_kv_heads, spec.d_head_qk
    extra = {}
    if spec.qk_norm in ("rms_head", "layernorm_head", "rms_head_rotated"):
        extra |= {"gain_Q": (k,), "gain_K": (k,)}
    if spec.qk_norm == "layernorm_head":
        extra |= {"shift_Q": (k,), "shift_K": (k,)}
    if spec.qk_norm in ("rms_all", "layernorm_heads"):
        extra |= {"gain_Q": (H, k), "gain_K": (G, k)}
    if spec.sinks:
        extra["sink"] = (H,)
    if spec.sub_norm:
        extra["gain_O"] = (H, spec.d_head_v)
    if spec.output_gate == "element":
        extra["W_G"] = (H, spec.d_model, spec.d_head_v)
    if spec.output_gate == "head":
        extra["W_G"] = (H, spec.d_model)
    return extra | gated_block_shapes(spec) | indexer_block_shapes(spec)
