"""DeepSeek-V2/V3: multi-head latent attention; the first `first_k_dense_replace` blocks have a dense MLP,
the others a mixture of experts (`experts`). The latent RMSNorms take the class default eps 1e-6, not
rms_norm_eps (DeepseekV3Attention builds them with the default)."""

from __future__ import annotations

from ...model.blocks import LayerSpec, MLPSpec
from ...spec import AttentionSpec
from .experts import experts
from .keys import flag, integer, mlp_kind, number, rope, text

MODEL_TYPES = ("deepseek_v2", "deepseek_v3")


def deepseek(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H = integer(cfg, "hidden_size"), integer(cfg, "num_attention_heads")
    n_layers = integer(cfg, "num_hidden_layers")
    nope, p = integer(cfg, "qk_nope_head_dim"), integer(cfg, "qk_rope_head_dim", minimum=0)
    attention = AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=H, d_head_qk=nope + p, d_head_v=integer(cfg, "v_head_dim"),
        rope_dims=p, biases="qkvo" if flag(cfg, "attention_bias", False) else "", causal=True,
        rope_base=rope(cfg), kv_lora_rank=integer(cfg, "kv_lora_rank"),
        q_lora_rank=integer(cfg, "q_lora_rank", default=0, minimum=0), norm_eps=1e-6,
    )  # fmt: skip
    activation = text(cfg, "hidden_act", default="silu")
    dense = MLPSpec(integer(cfg, "intermediate_size"), mlp_kind(activation, True))
    n_experts, top_k = integer(cfg, "n_routed_experts"), integer(cfg, "num_experts_per_tok")
    not_modelled: list = []
    routed = experts(cfg, mt, n_experts, top_k, integer(cfg, "moe_intermediate_size"), activation, not_modelled)
    first_dense = integer(cfg, "first_k_dense_replace", default=0, minimum=0)
    layers = [LayerSpec(attention, dense if i < first_dense else routed) for i in range(n_layers)]
    fields = {
        "positions": "rope", "norm": "rmsnorm", "norm_bias": False, "norm_eps": number(cfg, "rms_norm_eps", default=1e-6),
        "tied": flag(cfg, "tie_word_embeddings", False), "not_modelled": tuple(not_modelled),
    }  # fmt: skip
    return layers, fields
