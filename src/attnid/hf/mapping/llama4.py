"""Llama-4's text model (`llama4_text`; the multimodal `llama4` maps through its text_config): its attention layers
only. What the classes fix in code (`transformers` 5.24, models/llama4/modeling_llama4.py, Llama4TextConfig):

    Llama4TextAttention   q/k/v/o_proj biased by attention_bias; RoPE (complex pairs (0,1), (2,3), ...: this
                          project's interleaved planes) on the whole head where no_rope_layers[i] is 1 (default:
                          every no_rope_layer_interval-th layer, 4, has none); in the RoPE layers with use_qk_norm a
                          gain-free RMSNorm on every query and key head after RoPE (Llama4TextL2Norm: x /
                          sqrt(mean(x^2) + rms_norm_eps)), qk_norm rms_plain; in the layers without RoPE, with
                          attn_temperature_tuning, the query at index i times 1 + attn_scale log(1 + floor((i + 1) /
                          floor_scale)) (temperature_floor, temperature_scale); scores scaled by head_dim^-0.5
    layer_types           chunked_attention (default: the RoPE layers, when attention_chunk_size is set): a query
                          sees the keys of its own chunk of attention_chunk_size positions, causally (attention_chunk)
    Llama4TextMoe         in moe_layers (default every interleave_moe_layer_step-th): a router whose top-k logits'
                          sigmoid scales the token before the experts (not their output), and a shared expert;
                          the other layers a SwiGLU of intermediate_size_mlp

The router's input scaling is no MoE kind of `attnid.model`, so the whole model is not counted (layers only).
"""

from __future__ import annotations

from ...errors import SpecError
from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .keys import head_sizes, read_flag, read_float, read_int, rope

MOE_WHY = (
    "Llama4TextMoe: a router whose top-k logits' sigmoid scales the token before the experts (not their output),"
    " beside a shared expert: not modelled (the attention layers are counted alone)"
)
NAMES_WHY = (
    "without experts: no name map of Llama4ForCausalLM's parameters (nor generators of its gain-free q/k norm) is"
    " written, so a whole-model certificate would be one-sided (the attention layers are counted alone)"
)


def _per_layer(cfg: dict, key: str, n_layers: int, default: list) -> list:
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, list) or len(value) != n_layers:
        raise SpecError(key, f"must list one entry for each of the {n_layers} layers, got {value!r}")
    return value


def llama4_family(cfg: dict, mt: str) -> tuple[list, dict]:
    """(every block, the ModelSpec fields) of a Llama-4 text config: layers only (module docstring)."""
    d, H, G, k = head_sizes(cfg, 128)
    n_layers = read_int(cfg, "num_hidden_layers")
    eps = read_float(cfg, "rms_norm_eps", default=1e-5)
    interval = read_int(cfg, "no_rope_layer_interval", default=4)
    uses_rope = _per_layer(cfg, "no_rope_layers", n_layers, [int((i + 1) % interval != 0) for i in range(n_layers)])
    chunk = cfg.get("attention_chunk_size", 8192)
    chunk = 0 if chunk is None else read_int(cfg, "attention_chunk_size", minimum=2)
    default_types = ["chunked_attention" if r and chunk else "full_attention" for r in uses_rope]
    types = _per_layer(cfg, "layer_types", n_layers, default_types)
    if any(t not in ("chunked_attention", "full_attention") for t in types):
        raise SpecError("layer_types", f"only chunked_attention and full_attention are modelled, got {types!r}")
    if "chunked_attention" in types and not chunk:
        raise SpecError("attention_chunk_size", "chunked_attention layers need a chunk size")
    qk_norm = read_flag(cfg, "use_qk_norm", True)
    tuning = read_flag(cfg, "attn_temperature_tuning", True)
    temperature = {
        "temperature_floor": read_int(cfg, "floor_scale", default=8192),
        "temperature_scale": read_float(cfg, "attn_scale", default=0.1, positive=True),
    }
    base = rope(cfg) if "rope_theta" in cfg or cfg.get("rope_parameters") else 500000.0  # Llama4TextConfig's default
    biases = "qkvo" if read_flag(cfg, "attention_bias", False) else ""
    mlp = MLPSpec(read_int(cfg, "intermediate_size_mlp", default=16384), "swiglu", False)
    layers = []
    for with_rope, kind in zip(uses_rope, types, strict=True):
        variant = {"qk_norm": "rms_plain", "norm_eps": eps} if with_rope and qk_norm else {}
        if tuning and not with_rope:
            variant |= temperature
        attention = AttentionSpec(
            d_model=d, n_heads=H, n_kv_heads=G, d_head_qk=k, rope_dims=k // 2 * 2 if with_rope else 0, rope_base=base,
            biases=biases, causal=True, attention_chunk=chunk if kind == "chunked_attention" else 0, **variant,
        )  # fmt: skip
        layers.append(LayerSpec(attention, mlp))
    step = read_int(cfg, "interleave_moe_layer_step", default=1)
    moe = cfg.get("moe_layers")
    moe = list(range(step - 1, n_layers, step)) if moe is None else moe
    why = ("moe_layers", MOE_WHY) if any(0 <= i < n_layers for i in moe) else ("model_type", NAMES_WHY)
    fields = {
        "positions": "rope" if any(uses_rope) else "none", "norm": "rmsnorm", "norm_bias": False, "norm_eps": eps,
        "tied": read_flag(cfg, "tie_word_embeddings", False), "not_modelled": (why,),
    }  # fmt: skip
    return layers, fields


def tiny_layers(cfg: dict, mt: str) -> dict:
    """The self-check's tiny model (read by attnid.hf.tiny): one layer with RoPE, its q/k norm and a chunk of 4
    positions, one without RoPE with the temperature turning from the second position on (floor_scale 2), a dense
    MLP of 16 units."""
    return {
        "num_hidden_layers": 2, "no_rope_layers": [1, 0], "layer_types": ["chunked_attention", "full_attention"],
        "attention_chunk_size": 4, "floor_scale": 2, "moe_layers": [0], "intermediate_size_mlp": 16,
    }  # fmt: skip


# llama4's registered causal LM is Llama4ForCausalLM, the text model: its config maps through text_config
MAPPERS = {"llama4_text": llama4_family, "llama4": llama4_family}
TINY_LAYERS = {"llama4_text": tiny_layers}
