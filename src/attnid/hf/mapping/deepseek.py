"""Multi-head latent attention: DeepSeek-V2/V3, whose first `first_k_dense_replace` blocks have a dense MLP and
the others a mixture of experts (`experts`), and the dense models built on their attention: Youtu
(YoutuAttention = DeepseekV3Attention in Llama blocks, a SwiGLU MLP, tied by default) and MiniCPM3
(MiniCPM3Attention: DeepseekV2Attention's projections, v_head_dim d / H by default, a SwiGLU MLP, tied by
default; scale_emb, scale_depth / sqrt(L) on every sublayer's output and hidden_size / dim_model_base on the
logits are nonzero constants: count-neutral). The latent RMSNorms take the class default eps 1e-6, not
rms_norm_eps (DeepseekV3Attention, MiniCPM3Attention build them with the default). GLM-4.7-Flash
(glm4_moe_lite) is DeepSeek-V3's attention (Glm4MoeLiteAttention) with GLM-4.5's experts, its dense blocks by
mlp_layer_types (default: the first only)."""

from __future__ import annotations

from ...errors import SpecError
from ...model.blocks import LayerSpec, MLPSpec
from ...spec import AttentionSpec
from .experts import experts
from .keys import mlp_kind, read_flag, read_float, read_int, read_str, rope, routed_layers

MODEL_TYPES = ("deepseek_v2", "deepseek_v3", "glm4_moe_lite")
DENSE_TYPES = ("youtu", "minicpm3")
TIED_DEFAULTS = ("youtu", "minicpm3")


def _latent_attention(cfg: dict, mt: str) -> AttentionSpec:
    d, H = read_int(cfg, "hidden_size"), read_int(cfg, "num_attention_heads")
    nope, p = read_int(cfg, "qk_nope_head_dim"), read_int(cfg, "qk_rope_head_dim", minimum=0)
    v = read_int(cfg, "v_head_dim", default=d // H if mt == "minicpm3" else None)
    return AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=H, d_head_qk=nope + p, d_head_v=v,
        rope_dims=p, biases="qkvo" if read_flag(cfg, "attention_bias", False) else "", causal=True,
        rope_base=rope(cfg), kv_lora_rank=read_int(cfg, "kv_lora_rank"),
        q_lora_rank=read_int(cfg, "q_lora_rank", default=0, minimum=0), norm_eps=1e-6,
    )  # fmt: skip


def _fields(cfg: dict, mt: str, not_modelled: list) -> dict:
    eps_default = 1e-5 if mt in ("minicpm3", "glm4_moe_lite") else 1e-6
    return {
        "positions": "rope", "norm": "rmsnorm", "norm_bias": False, "norm_eps": read_float(cfg, "rms_norm_eps", default=eps_default),
        "tied": read_flag(cfg, "tie_word_embeddings", mt in TIED_DEFAULTS), "not_modelled": tuple(not_modelled),
    }  # fmt: skip


def deepseek(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    attention = _latent_attention(cfg, mt)
    n_layers = read_int(cfg, "num_hidden_layers")
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
    return layers, _fields(cfg, mt, not_modelled)


def dense_latent(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """Youtu, MiniCPM3: latent attention and a dense SwiGLU MLP in every block."""
    for key in ("scale_emb", "scale_depth", "dim_model_base"):
        if read_float(cfg, key, default=1.0) == 0:
            raise SpecError(key, "0 makes the model constant: not modelled")
    attention = _latent_attention(cfg, mt)
    mlp = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(read_str(cfg, "hidden_act", default="silu"), True))
    return [LayerSpec(attention, mlp)] * read_int(cfg, "num_hidden_layers"), _fields(cfg, mt, [])


MAPPERS = {**dict.fromkeys(MODEL_TYPES, deepseek), **dict.fromkeys(DENSE_TYPES, dense_latent)}
