"""DiffLlama (DiffLlamaForCausalLM; `transformers` 5.24, models/diffllama/modular_diffllama.py): Llama's blocks
(pre-LN RMSNorm, a SwiGLU MLP of intermediate_size, RoPE on the whole head) with differential attention
(DiffLlamaAttention): q/k/v/o_proj with attention_bias on all four, queries and keys as Llama's; the value heads
split into halves c < G/2 and c + G/2, each half attended by both query halves h < H/2 and h + H/2, so differential
head h computes (A_h - lambda A_{h+H/2}) [V_c, V_{c+G/2}], lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 .
lambda_k2) + lambda_init, lambda_init = 0.8 - 0.6 exp(-0.3 i) in layer i (lambda_init_fn); then a gain-free
RMSNorm over its 2 head_dim dims (groupnorm, eps rms_norm_eps), times 1 - lambda_init, into o_proj
(`attnid.layer.differential`, `attnid.layer.spec_gates`). The class needs num_key_value_heads even.

Per layer exact (`attnid.layer.counting_gates`). Not modelled for the whole model: the whole-model count has no
differential attention (its norm on the heads' output, its lambda vectors): layers only.
"""

from __future__ import annotations

import math

from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .keys import head_sizes, mlp_kind, partial_factor, read_flag, read_float, read_int, read_str, rope

WHY = "differential attention: the whole-model count does not model it; the attention layers are counted alone"


def lambda_init(layer: int) -> float:
    """DiffLlama's lambda_init_fn: 0.8 - 0.6 exp(-0.3 i)."""
    return 0.8 - 0.6 * math.exp(-0.3 * layer)


def diffllama(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(every block, the ModelSpec fields) of a DiffLlama config: layers only."""
    d, H, G, k = head_sizes(cfg)
    eps = read_float(cfg, "rms_norm_eps", default=1e-5)
    p = min(k, 2 * math.ceil(int(k * partial_factor(cfg)) / 2))
    mlp = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(read_str(cfg, "hidden_act", default="silu"), True))
    biases = "qkvo" if read_flag(cfg, "attention_bias", False) else ""
    layers = [
        LayerSpec(
            AttentionSpec(d_model=d, n_heads=H, n_kv_heads=G, d_head_qk=k, rope_dims=p, rope_base=rope(cfg),
                          biases=biases, causal=True, norm_eps=eps, diff_lambda_init=lambda_init(i)),
            mlp,
        )
        for i in range(read_int(cfg, "num_hidden_layers"))
    ]  # fmt: skip
    fields = {
        "positions": "rope" if p else "none", "norm": "rmsnorm", "norm_bias": False, "norm_eps": eps,
        "tied": read_flag(cfg, "tie_word_embeddings", False), "not_modelled": (("model_type", WHY),),
    }  # fmt: skip
    return layers, fields


MAPPERS = {"diffllama": diffllama}
