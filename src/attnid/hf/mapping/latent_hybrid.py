"""Hybrid decoders whose softmax-attention layers are DeepSeek's multi-head latent attention (`transformers` 5.24,
models/<type>/modular_<type>.py): only those layers are described (one block per latent-attention layer, in
order); the linear-attention layers between them are named in `not_modelled` (layers only, as
attnid.hf.mapping.hybrid). Each type:

    kimi_linear     Kimi Delta Attention (KimiLinearDeltaAttention: linear) layers; KimiLinearAttention
                    (DeepseekV3Attention's projections, q_proj or the query latent by q_lora_rank, default none) on
                    full_attention layers, "with NoPE, but the part of the keys where RoPE is applied is still
                    shared": the qk_rope_head_dim shared key dims are unrotated (KimiLinearModel builds no rotary
                    embedding), counted as latent attention's shared key GL(s) (attnid.layer.counting_variants).
                    Layer kinds: layer_types, else linear_attn_config's 1-indexed full_attn_layers and kda_layers,
                    else full where i > 0 and i % 4 == 0 (KimiLinearConfig.__post_init__)
    bailing_hybrid  linear delta-attention layers (BailingHybridDeltaAttention); BailingHybridAttention
                    (DeepseekV3Attention with interleaved RoPE on the shared key, rope_parameters' theta, default
                    6e6) with a sigmoid gate per head (g_proj (H, d) on X) on the last layer of every
                    layer_group_size (6) (BailingHybridConfig.__post_init__)

attention_bias biases the latent down-projections and o_proj (DeepseekV3Attention): refused by the latent count.
The latent norms take the class default eps 1e-6 (KimiLinearRMSNorm(kv_lora_rank), BailingHybridRMSNorm).
"""

from __future__ import annotations

from ...errors import SpecError
from ...layer.spec import AttentionSpec
from ...model.blocks import LayerSpec, MLPSpec
from .keys import read_flag, read_float, read_int, read_section, rope

OTHER_LAYERS = {
    "kimi_linear": "Kimi Delta Attention (linear) layers with short convolutions, experts",
    "bailing_hybrid": "linear delta-attention layers with short convolutions, experts",
}
LINEAR_KINDS = ("linear_attention",)


def layer_kinds(cfg: dict, mt: str) -> list[str]:
    """'full_attention' (latent attention) or 'linear_attention' for every layer (module docstring)."""
    n_layers = read_int(cfg, "num_hidden_layers")
    kinds = cfg.get("layer_types")
    linear = read_section(cfg, "linear_attn_config")
    if kinds is None and mt == "kimi_linear" and "full_attn_layers" in linear and "kda_layers" in linear:
        full = linear["full_attn_layers"]
        if not isinstance(full, list) or not all(isinstance(i, int) and 1 <= i <= n_layers for i in full):
            raise SpecError("linear_attn_config.full_attn_layers", f"must list layers 1..{n_layers}, got {full!r}")
        kinds = ["full_attention" if i + 1 in full else "linear_attention" for i in range(n_layers)]
    if kinds is None and mt == "kimi_linear":
        kinds = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n_layers)]
    if kinds is None:
        group = read_int(cfg, "layer_group_size", default=6)
        kinds = ["full_attention" if (i + 1) % group == 0 else "linear_attention" for i in range(n_layers)]
    if not isinstance(kinds, list) or len(kinds) != n_layers or not set(kinds) <= {"full_attention", *LINEAR_KINDS}:
        raise SpecError("layer_types", f"must list full_attention or linear_attention for each of {n_layers} layers")
    return list(kinds)


def _attention(cfg: dict, mt: str) -> AttentionSpec:
    d, H = read_int(cfg, "hidden_size"), read_int(cfg, "num_attention_heads")
    nope, shared = read_int(cfg, "qk_nope_head_dim"), read_int(cfg, "qk_rope_head_dim", minimum=0)
    if read_flag(cfg, "attention_bias", False):
        raise SpecError("attention_bias", "true biases the latent down-projections and o_proj: not modelled")
    if mt == "kimi_linear":
        where = {"shared_key_dims": shared}
    else:
        theta = rope(cfg) if read_section(cfg, "rope_parameters") else read_float(cfg, "rope_theta", default=6e6)
        where = {"rope_dims": shared, "rope_base": theta, "output_gate": "head"}
    return AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=H, d_head_qk=nope + shared, d_head_v=read_int(cfg, "v_head_dim"),
        causal=True, kv_lora_rank=read_int(cfg, "kv_lora_rank"),
        q_lora_rank=read_int(cfg, "q_lora_rank", default=0, minimum=0), norm_eps=1e-6, **where,
    )  # fmt: skip


def latent_hybrid(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(the latent-attention layers' blocks, the ModelSpec fields): layers only."""
    kinds = layer_kinds(cfg, mt)
    if "full_attention" not in kinds:
        raise SpecError("layer_types", "names no softmax-attention layer: nothing to count")
    attention = _attention(cfg, mt)
    mlp = MLPSpec(read_int(cfg, "intermediate_size"), "swiglu", False)  # not modelled (below)
    eps = read_float(cfg, "rms_norm_eps", default=1e-5 if mt == "kimi_linear" else 1e-6)
    fields = {
        "positions": "none" if mt == "kimi_linear" else "rope", "norm": "rmsnorm", "norm_bias": False,
        "norm_eps": eps, "tied": read_flag(cfg, "tie_word_embeddings", False),
        "not_modelled": (("layer_types", f"hybrid: {OTHER_LAYERS[mt]}; these and every block's MLP are not"
                                         " modelled (the latent-attention layers are counted alone)"),),
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * kinds.count("full_attention"), fields


def tiny_layers(cfg: dict, mt: str) -> dict:
    """A tiny model of this type: one linear-attention layer, then one latent-attention layer (dense MLPs), its linear
    layers at a small size (read by attnid.hf.tiny in place of its own choice of layers)."""
    small = {"linear_head_dim": 4, "linear_num_heads": 2}  # Bailing's class derives them, a config's keys win
    if mt == "kimi_linear" and isinstance(cfg.get("linear_attn_config"), dict):
        small["linear_attn_config"] = {**cfg["linear_attn_config"], "head_dim": 4, "num_heads": 2,
                                       "full_attn_layers": [2], "kda_layers": [1]}  # fmt: skip
    return {**small, "num_hidden_layers": 2, "layer_types": ["linear_attention", "full_attention"],
            "mlp_layer_types": ["dense", "dense"]}  # fmt: skip


MAPPERS = dict.fromkeys(OTHER_LAYERS, latent_hybrid)
TINY_LAYERS = dict.fromkeys(OTHER_LAYERS, tiny_layers)
