"""Decoders of Llama's shape (q/k/v/o_proj, RoPE, pre-LN RMSNorm blocks, SwiGLU MLPs) whose MLPs are routed in
some or all blocks; the routers and experts are read in `experts`. What each class fixes in code rather than its
config (`transformers` 5.24, models/<type>/modular_<type>.py; keys a config leaves out take the class defaults):

    qwen2_moe      Qwen2MoeAttention: q/k/v biased by qkv_bias (default true), o_proj never; windows only with
                   use_sliding_window, from max_window_layers (28) on; routed where i not in mlp_only_layers
                   and (i + 1) % decoder_sparse_step == 0, else a dense SwiGLU of intermediate_size
    olmoe          OlmoeAttention: attention_bias on all four; RMSNorm across all heads on q and on k (q_norm of
                   hidden_size, k_norm of the key width) before RoPE; clip_qkv clamps q/k/v (the count assumes no
                   entry reaches it); every block routed; eps default 1e-5
    flex_olmo      Olmo2Attention (q/k norms across all heads) and OLMoE's experts, but OLMo-2's blocks:
                   h + Norm(Attn(h)), h + Norm(MLP(h)) with no norm before the sublayers (FlexOlmoDecoderLayer):
                   recorded as not modelled, its attention layers are exact
    granitemoe     LlamaAttention (attention_bias on all four) scaled by attention_multiplier; the experts are
    granitemoeshared  intermediate_size wide (MixtralExperts); embedding_multiplier, residual_multiplier and
                   logits_scaling are constant factors (on E, on every sublayer's output, on the logits): the
                   count is unchanged by them; every block routed
    granitemoe_swa GraniteMoeShared's blocks with GraniteSWAAttention: one sink logit per head on every layer (its
                   eager path scales the output by sigmoid(logsumexp - sink): the softmax with the sink's logit
                   in the denominator), the window on layer_types' sliding layers (default: full where i % 4 == 0),
                   RoPE of layer_rope_theta[i] per layer (0: none)
    ernie4_5_moe   Ernie4_5_MoeAttention: use_bias on all four, interleaved RoPE on the whole head; routed where
                   (i + 1) % moe_layer_interval == 0 and moe_layer_start_index <= i <= moe_layer_end_index,
                   else a dense SwiGLU (biased by use_bias); eps default 1e-5, tied by default
    glm4_moe       Glm4MoeAttention: q/k/v biased by attention_bias, o_proj never; per-head q/k RMSNorm before
    sarvam_moe     RoPE with use_qk_norm; partial rotary (Glm4Moe's default 0.5, Sarvam's 1.0); the first
                   first_k_dense_replace (1) blocks dense (sarvam_moe is built as Glm4MoeForCausalLM)
    solar_open     SolarOpenAttention (Llama's, o_proj without bias); every block routed (Glm4MoeMoE)
    dots1          Dots1Attention (Qwen3's: attention_bias on all four, per-head q/k RMSNorm); windows on
                   layer_types, by default from max_window_layers (62) on; dense before first_k_dense_replace (0)
    exaone_moe     Exaone4Attention: no biases, per-head q/k RMSNorm, RoPE only on the sliding layers when
                   sliding_window is set (the full layers have none); routed per mlp_layer_types (dense before
                   first_k_dense_replace, 1)
    mimo_v2_flash  MiMoV2FlashAttention (Qwen2's, q/k/v biased by attention_bias): head_dim (192) for q and k,
                   v_head_dim (128) for v, values times attention_value_scale (a constant: the count is unchanged);
                   layer_types by default full at layer 0 and every sixth, sliding (window sliding_window) else,
                   and a sliding layer has twice the key/value heads and one sink logit per head; RoPE per
                   layer type from rope_parameters[type] (theta, partial_rotary_factor 0.334); dense blocks by
                   mlp_layer_types (default: the first only)
    flint          FlintAttention (Qwen3-MoE's: attention_bias on all four, per-head q/k RMSNorm) with one sink logit
                   per head on every layer and RoPE on the sliding layers only; layer_types by default full for
                   i < 2, i % 4 == 1 and the last; Qwen2-MoE's routed blocks, mlp_only_layers default [0, 1]
    minimax_m2     MiniMaxM2Attention (FlexOlmo's without biases: q/k RMSNorm across all heads), the rotated
                   share rotary_dim / head_dim (MiniMaxM2Config), every block routed, experts intermediate_size
                   wide (MixtralExperts)
    hunyuan_v1_moe HunYuanMoEV1Attention: attention_bias on all four, per-head q/k RMSNorm with one gain each applied
                   after RoPE (rms_head_rotated: the gain does not commute with the rotation, so of the commutant
                   only the product of the two gains is seen); every block routed (num_experts, moe_topk as ints),
                   a shared SwiGLU of intermediate_size without a gate; eps default 1e-5
    aria_text      AriaTextAttention (Llama's, attention_bias on all four); every block routed, experts
                   intermediate_size wide (AriaExperts), a shared SwiGLU beside them (AriaTextMoELayer)
    mellum         MellumAttention (Qwen3-MoE's: attention_bias on all four, per-head q/k RMSNorm), the window on
                   layer_types' sliding layers, RoPE per layer type from rope_parameters[type] (full: theta 500000,
                   sliding: 10000; LagunaRotaryEmbedding); routed per mlp_layer_types (default: every block), else a
                   dense SwiGLU of intermediate_size (LagunaDecoderLayer)
    kolibri1       Kolibri1Attention (EXAONE-4's: no biases, per-head q/k RMSNorm, RoPE only on the sliding layers when
                   sliding_window is set), layer_types by default full every fifth; GLM-4's blocks (Glm4DecoderLayer:
                   a norm before and after each sublayer); every block routed
    hy_v3          HYV3Attention (Apertus's: attention_bias on all four, per-head q/k RMSNorm before RoPE); routed per
                   mlp_layer_types (HYV3Config's default: the first block dense), eps default 1e-5
    phimoe         LlamaAttention (attention_bias on all four), the window on every layer (MixtralModel's
                   mask), LayerNorms with a bias of eps rms_norm_eps, an lm_head biased by lm_head_bias;
                   experts intermediate_size wide; its sparsemixer router is recorded as not modelled
"""

from __future__ import annotations

import math

from ...errors import SpecError
from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .experts import experts
from .llama import llama_names
from .names import attention_linear, head_names, linear, norm, permuted, rope_perm, same
from .keys import (
    head_sizes,
    layer_types,
    mlp_kind,
    partial_factor,
    read_flag,
    read_float,
    read_int,
    read_section,
    read_str,
    rope,
    routed_layers,
)  # fmt: skip

# model type -> (rms_norm_eps, tie_word_embeddings, partial_rotary_factor) class defaults
DEFAULTS = {
    "qwen2_moe": (1e-6, False, 1.0), "olmoe": (1e-5, False, 1.0), "flex_olmo": (1e-6, False, 1.0),
    "granitemoe": (1e-6, False, 1.0), "granitemoeshared": (1e-6, False, 1.0), "granitemoe_swa": (1e-6, False, 1.0),
    "ernie4_5_moe": (1e-5, True, 1.0),
    "glm4_moe": (1e-5, False, 0.5), "sarvam_moe": (1e-6, False, 1.0), "solar_open": (1e-5, False, 1.0),
    "dots1": (1e-6, False, 1.0), "exaone_moe": (1e-5, False, 1.0), "phimoe": (1e-5, False, 1.0),
    "minimax_m2": (1e-6, False, 1.0), "mimo_v2_flash": (1e-5, False, 0.334), "flint": (1e-6, False, 1.0),
    "hunyuan_v1_moe": (1e-5, False, 1.0), "aria_text": (1e-6, False, 1.0), "mellum": (1e-6, False, 1.0),
    "hy_v3": (1e-5, False, 1.0), "kolibri1": (1e-6, False, 1.0),
}  # fmt: skip
HEAD_DIM_DEFAULTS = {
    "solar_open": 128, "sarvam_moe": 64, "minimax_m2": 128, "mimo_v2_flash": 192, "flint": 128, "mellum": 128,
    "hy_v3": 128, "kolibri1": 128,
}  # fmt: skip
# the experts' width: moe_intermediate_size, else intermediate_size (MixtralExperts: OLMoE, FlexOlmo, Granite, PhiMoE)
MOE_WIDTH = (
    "qwen2_moe", "ernie4_5_moe", "glm4_moe", "sarvam_moe", "solar_open", "dots1", "exaone_moe", "mimo_v2_flash", "flint",
    "mellum", "hy_v3", "kolibri1",
)  # fmt: skip
QK_NORM = {
    "olmoe": "rms_all", "flex_olmo": "rms_all", "minimax_m2": "rms_all", "dots1": "rms_head", "exaone_moe": "rms_head",
    "flint": "rms_head", "hunyuan_v1_moe": "rms_head_rotated", "mellum": "rms_head", "hy_v3": "rms_head",
    "kolibri1": "rms_head",
}  # fmt: skip


def _biases(cfg: dict, mt: str) -> str:
    """Which of q, k, v, o_proj carry a bias (module docstring)."""
    if mt == "qwen2_moe":
        return "qkv" if read_flag(cfg, "qkv_bias", True) else ""
    if mt in ("exaone_moe", "minimax_m2", "kolibri1"):
        return ""
    if mt == "ernie4_5_moe":
        return "qkvo" if read_flag(cfg, "use_bias", False) else ""
    biased = read_flag(cfg, "attention_bias", False)
    return ("qkv" if mt in ("glm4_moe", "sarvam_moe", "solar_open", "mimo_v2_flash") else "qkvo") if biased else ""


def _windows(cfg: dict, mt: str, n_layers: int) -> list[str]:
    """'full_attention' / 'sliding_attention' per layer."""
    if "layer_types" in cfg or mt == "exaone_moe":
        return layer_types(cfg, n_layers)
    if mt == "mimo_v2_flash":
        return ["full_attention" if i == 0 or (i + 1) % 6 == 0 else "sliding_attention" for i in range(n_layers)]
    if mt == "granitemoe_swa":  # GraniteMoeSWAConfig.__post_init__
        return ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(n_layers)]
    if mt == "flint":  # FlintConfig.__post_init__
        full = [i < 2 or i % 4 == 1 or i == n_layers - 1 for i in range(n_layers)]
        return ["full_attention" if f else "sliding_attention" for f in full]
    window = read_int(cfg, "sliding_window", default=0, minimum=0)
    if mt == "qwen2_moe" and window and read_flag(cfg, "use_sliding_window", False):
        first = read_int(cfg, "max_window_layers", default=28, minimum=0)
    elif mt == "dots1" and window:
        first = read_int(cfg, "max_window_layers", default=62, minimum=0)
    else:
        first = n_layers if mt != "phimoe" else 0  # PhiMoE: the window (if any) on every layer
    return ["sliding_attention" if i >= first else "full_attention" for i in range(n_layers)]


def _layer_indices(cfg: dict, key: str) -> list[int]:
    value = cfg.get(key) or []
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise SpecError(key, f"must be a list of layer indices, got {value!r}")
    return value


def _routed(cfg: dict, mt: str, n_layers: int) -> list[bool]:
    """Which blocks have the mixture of experts (the others a dense SwiGLU)."""
    if mt in ("qwen2_moe", "flint"):
        dense = _layer_indices(cfg, "mlp_only_layers") if cfg.get("mlp_only_layers") is not None else []
        dense = [0, 1] if mt == "flint" and cfg.get("mlp_only_layers") is None else dense  # FlintConfig's default
        step = read_int(cfg, "decoder_sparse_step", default=1)
        return [i not in dense and (i + 1) % step == 0 for i in range(n_layers)]
    if mt == "ernie4_5_moe":
        every = read_int(cfg, "moe_layer_interval", default=1)
        start = read_int(cfg, "moe_layer_start_index", default=1, minimum=0)
        end = read_int(cfg, "moe_layer_end_index", default=-1, minimum=-1)
        end = n_layers - 1 if end == -1 else end  # Ernie4_5_MoeConfig.__post_init__
        return [(i + 1) % every == 0 and start <= i <= end for i in range(n_layers)]
    if mt in ("exaone_moe", "hy_v3", "mellum"):  # mlp_layer_types (HYV3Config's default: the
        return routed_layers(cfg, n_layers, 0 if mt == "mellum" else 1)  # first block dense)
    if mt == "mimo_v2_flash":  # MiMoV2FlashConfig: mlp_layer_types, default the first block dense
        return routed_layers(cfg, n_layers, 1) if cfg.get("mlp_layer_types") else [i > 0 for i in range(n_layers)]
    dense_first = {"glm4_moe": 1, "sarvam_moe": 1, "dots1": 0}
    if mt in dense_first:  # DeepseekV3DecoderLayer's rule (mlp_layer_types is not read)
        return routed_layers({k: v for k, v in cfg.items() if k != "mlp_layer_types"}, n_layers, dense_first[mt])
    return [True] * n_layers


def _moe(cfg: dict, mt: str, activation: str, not_modelled: list):
    n_experts = read_int(cfg, "num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
    top_k = read_int(cfg, "num_experts_per_tok", "moe_k", "moe_topk")
    width_key = "moe_intermediate_size" if mt in MOE_WIDTH else "intermediate_size"
    return experts(cfg, mt, n_experts, top_k, read_int(cfg, width_key), activation, not_modelled)


def routed_family(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(every block, the ModelSpec fields) of a config of the family."""
    eps_default, tied_default, rotary_default = DEFAULTS[mt]
    head_default = HEAD_DIM_DEFAULTS.get(mt)
    if mt == "glm4_moe" and "head_dim" not in cfg:  # Glm4MoeAttention: getattr(config, "head_dim", d // H), floored
        head_default = read_int(cfg, "hidden_size") // read_int(cfg, "num_attention_heads")
    d, H, G, k = head_sizes(cfg, head_default)
    n_layers = read_int(cfg, "num_hidden_layers")
    eps = read_float(cfg, "rms_norm_eps", default=eps_default)
    qk = {"qk_norm": QK_NORM[mt], "norm_eps": eps} if mt in QK_NORM else {}
    if mt in ("glm4_moe", "sarvam_moe") and read_flag(cfg, "use_qk_norm", mt == "sarvam_moe"):
        qk = {"qk_norm": "rms_head", "norm_eps": eps}
    window = read_int(cfg, "sliding_window", default=0, minimum=0)
    if mt == "qwen2_moe" and not read_flag(cfg, "use_sliding_window", False):
        window = 0  # Qwen2MoeConfig: sliding_window = 0 unless use_sliding_window
    # Exaone4Attention: RoPE on the sliding layers only while sliding_window is set; FlintAttention: always
    nope_full = (mt in ("exaone_moe", "kolibri1") and window) or mt == "flint"
    activation = read_str(cfg, "hidden_act", default="silu")
    not_modelled: list = []
    routed = _moe(cfg, mt, activation, not_modelled)
    dense_bias = mt == "ernie4_5_moe" and read_flag(cfg, "use_bias", False)
    if dense_bias and routed.n_shared:
        not_modelled.append(("use_bias", "true: Ernie-4.5's shared experts then have biases, which are not modelled"))
    if mt == "flex_olmo":
        why = "FlexOlmo's blocks normalise each sublayer's output and read the raw stream (OLMo-2's): not modelled"
        not_modelled.append(("model_type", why))
    if mt == "mimo_v2_flash":  # MiMoV2FlashConfig: sliding_window (129), or the legacy sliding_window_size + 1
        given = cfg.get("sliding_window_size") is not None
        window = read_int(cfg, "sliding_window_size") + 1 if given else read_int(cfg, "sliding_window", default=129)
    layers = []
    if mt in ("granitemoe_swa", "flint") and "sliding_window" not in cfg:
        window = {"granitemoe_swa": 128, "flint": 513}[mt]  # the config classes' defaults
    kinds = _windows(cfg, mt, n_layers)
    thetas = _layer_thetas(cfg, n_layers) if mt == "granitemoe_swa" else [rope(cfg, t) for t in kinds]
    for kind, moe, theta in zip(kinds, _routed(cfg, mt, n_layers), thetas, strict=True):
        sliding = kind == "sliding_attention" and window > 0
        nope = (nope_full and not sliding) or not theta
        p = _rotated_dims(cfg, mt, k, kind, rotary_default)
        per_layer = {"n_kv_heads": G, "rope_dims": 0 if nope else p, "rope_base": theta or rope(cfg)}
        if mt == "mimo_v2_flash":
            per_layer = _mimo_layer(cfg, kind, G, k)
        if mt in ("granitemoe_swa", "flint"):
            per_layer["sinks"] = True
        attention = AttentionSpec(
            d_model=d, n_heads=H, d_head_qk=k, biases=_biases(cfg, mt), causal=True,
            sliding_window=window if sliding else 0, **per_layer, **qk,
        )  # fmt: skip
        mlp = routed if moe else MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(activation, True), dense_bias)
        layers.append(LayerSpec(attention, mlp))
    phimoe = mt == "phimoe"
    fields = {
        "positions": "rope" if any(x.attention.rope_dims for x in layers) else "none",
        "norm": "layernorm" if phimoe else "rmsnorm", "norm_bias": phimoe, "norm_eps": eps,
        "tied": read_flag(cfg, "tie_word_embeddings", tied_default),
        "lm_head_bias": phimoe and read_flag(cfg, "lm_head_bias", False), "not_modelled": tuple(not_modelled),
        "output_norms": mt == "kolibri1",
    }  # fmt: skip
    return layers, fields


def _rotated_dims(cfg: dict, mt: str, k: int, kind: str, default: float) -> int:
    """The rotated dims of a head of a layer of `kind`: the rotary classes take int(k f) dims and a frequency for every
    other one of them, then rotate two dims per frequency (an odd int(k f) rounds up); f by layer type where
    rope_parameters holds one section per type (Mellum's, LagunaRotaryEmbedding)."""
    factor = partial_factor(cfg, default=default, layer_type=kind)
    given = "partial_rotary_factor" in cfg or "partial_rotary_factor" in read_section(cfg, "rope_parameters")
    if mt == "minimax_m2" and cfg.get("rotary_dim") is not None and not given:
        factor = read_int(cfg, "rotary_dim") / k  # MiniMaxM2Config.convert_rope_params_to_dict
    return min(k, 2 * math.ceil(int(k * factor) / 2))


def _layer_thetas(cfg: dict, n_layers: int) -> list[float]:
    """GraniteMoeSWA's layer_rope_theta: one RoPE base per layer, 0 for none (default: rope_theta everywhere)."""
    thetas = cfg.get("layer_rope_theta")
    if thetas is None:
        return [rope(cfg)] * n_layers
    if not isinstance(thetas, list) or len(thetas) != n_layers:
        raise SpecError("layer_rope_theta", f"must list a RoPE base (0: none) for each of the {n_layers} layers")
    return [read_float({"theta": t}, "theta") for t in thetas]


# MiMoV2FlashConfig's rope_parameters when the config names none: per layer type (theta, partial_rotary_factor)
MIMO_ROPE = {"full_attention": (5_000_000.0, 0.334), "sliding_attention": (10_000.0, 0.334)}


def _mimo_layer(cfg: dict, kind: str, G: int, k: int) -> dict:
    """MiMoV2FlashAttention's per-layer fields: a sliding layer has 2 G key/value heads and sinks; RoPE from
    rope_parameters[kind] (MiMoV2FlashRotaryEmbedding); values v_head_dim wide."""
    theta, factor = MIMO_ROPE[kind]
    params = read_section(read_section(cfg, "rope_parameters"), kind)
    theta = read_float(params, "rope_theta", default=theta, positive=True)
    factor = read_float(params, "partial_rotary_factor", default=factor)
    if params.get("rope_type", "default") != "default":
        raise SpecError(f"rope_parameters.{kind}.rope_type", f"{params['rope_type']!r} is not modelled")
    sliding = kind == "sliding_attention"
    return {
        "n_kv_heads": 2 * G if sliding else G, "rope_dims": min(k, 2 * math.ceil(int(k * factor) / 2)),
        "rope_base": theta, "sinks": sliding, "d_head_v": read_int(cfg, "v_head_dim", default=128),
    }  # fmt: skip


def hunyuan_moe_names(spec, cfg: dict) -> list[tuple]:
    """HunYuanMoEV1ForCausalLM's parameters <-> the layout (`.names`): Llama's q/k/v/o with rotary pairs, the
    query/key_layernorm gains permuted alike, the router mlp.gate.wg, Mixtral's experts, the shared mlp.shared_mlp."""
    e = [same("model.embed_tokens.weight", "embed")]
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"model.layers.{i}", f"layers.{i}", x.attention
        perm = rope_perm(a.d_head_qk, a.rope_dims)
        attention_linear(e, f"{hf}.self_attn", f"{fine}.attn", a, perm)
        e += [permuted(f"{hf}.self_attn.query_layernorm.weight", f"{fine}.attn.gain_Q", perm),
              permuted(f"{hf}.self_attn.key_layernorm.weight", f"{fine}.attn.gain_K", perm)]  # fmt: skip
        e.append(linear(f"{hf}.mlp.gate.wg.weight", f"{fine}.mlp.router"))
        gate_up = (f"{fine}.mlp.gate", f"{fine}.mlp.up")
        e.append(("gate_up_rows", f"{hf}.mlp.experts.gate_up_proj", gate_up, x.mlp.d_expert))
        e.append(linear(f"{hf}.mlp.experts.down_proj", f"{fine}.mlp.down"))
        e += [linear(f"{hf}.mlp.shared_mlp.{n}_proj.weight", f"{fine}.mlp.shared_{n}") for n in ("gate", "up", "down")]
        norm(e, f"{hf}.input_layernorm", f"{fine}.norm_1")
        norm(e, f"{hf}.post_attention_layernorm", f"{fine}.norm_2")
    norm(e, "model.norm", "final_norm")
    head_names(e, spec)
    return e


MAPPERS = dict.fromkeys(DEFAULTS, routed_family)
# Llama's name map fits these routed classes too: each one's generators span its count and keep its logits
# (tests/test_gauge_every_type.py)
LLAMA_NAMED = ("mellum", "hy_v3", "aria_text", "kolibri1", "solar_open", "exaone_moe", "dots1", "glm4_moe",
               "sarvam_moe", "mimo_v2_flash", "olmoe", "minimax_m2", "flint")  # fmt: skip
NAME_MAPS = {"hunyuan_v1_moe": hunyuan_moe_names, **dict.fromkeys(LLAMA_NAMED, llama_names)}
# routed decoders examined and not mapped: what the description cannot express (modular_<type>.py)
REFUSED = {
    "jetmoe": "attention not counted: mixture of attention heads (JetMoeMoA): the attention heads themselves are"
    " routed experts",
}


# Keys the config class leaves None though its model class needs them (transformers 5.24), filled so that the class
# builds (`attnid.hf.coverage.default_config`): Dots1Config names no routed experts (rednote-hilab/dots.llm1.base,
# config.json: 128 routed, 6 chosen, 2 shared).
DEFAULT_GAPS = {"dots1": {"n_routed_experts": 128, "num_experts_per_tok": 6, "n_shared_experts": 2}}
