"""DeepSeek-V2/V3: multi-head latent attention; the first `first_k_dense_replace` blocks have a dense MLP,
the others a mixture of experts (`experts`). The latent RMSNorms take the class default eps 1e-6, not
rms_norm_eps (DeepseekV3Attention builds them with the default). GLM-4.7-Flash (glm4_moe_lite) is DeepSeek-V3's
attention (Glm4MoeLiteAttention) with GLM-4.5's experts, its dense blocks by mlp_layer_types (default: the
first only)."""

from __future__ import annotations

from ...model.blocks import LayerSpec, MLPSpec
from ...spec import AttentionSpec
from .experts import experts
from .keys import mlp_kind, read_flag, read_float, read_int, read_str, rope, routed_layers

MODEL_TYPES = ("deepseek_v2", "deepseek_v3", "glm4_moe_lite")


def deepseek(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H = read_int(cfg, "hidden_size"), read_int(cfg, "num_attention_heads")
    n_layers = read_int(cfg, "num_hidden_layers")
    nope, p = read_int(cfg, "qk_nope_head_dim"), read_int(cfg, "qk_rope_head_dim", minimum=0)
    attention = AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=H, d_head_qk=nope + p, d_head_v=read_int(cfg, "v_head_dim"),
        rope_dims=p, biases="qkvo" if read_flag(cfg, "attention_bias", False) else "", causal=True,
        rope_base=rope(cfg), kv_lora_rank=read_int(cfg, "kv_lora_rank"),
        q_lora_rank=read_int(cfg, "q_lora_rank", default=0, minimum=0), norm_eps=1e-6,
    )  # fmt: skip
    activation = read_str(cfg, "hidden_act", default="silu")
    dense = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(activation, True))
    n_experts, top_k = read_int(cfg, "n_routed_experts"), read_int(cfg, "num_experts_per_tok")
    not_modelled: list = []
    routed = experts(cfg, mt, n_experts, top_k, read_int(cfg, "moe_intermediate_size"), activation, not_modelled)
    if mt == "glm4_moe_lite":
        sparse = routed_layers(cfg, n_layers, 1) if cfg.get("mlp_layer_types") else [i > 0 for i in range(n_layers)]
    else:
        sparse = routed_layers({k: v for k, v in cfg.items() if k != "mlp_layer_types"}, n_layers, 0)
    layers = [LayerSpec(attention, routed if moe else dense) for moe in sparse]
    fields = {
        "positions": "rope", "norm": "rmsnorm", "norm_bias": False, "norm_eps": read_float(cfg, "rms_norm_eps", default=1e-5 if mt == "glm4_moe_lite" else 1e-6),
        "tied": read_flag(cfg, "tie_word_embeddings", False), "not_modelled": tuple(not_modelled),
    }  # fmt: skip
    return layers, fields


MAPPERS = dict.fromkeys(MODEL_TYPES, deepseek)
