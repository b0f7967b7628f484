"""GPT-2 (GPT2LMHeadModel): learned positions, pre-LN LayerNorm blocks, Conv1D c_attn and c_proj with biases
on all four projections, a GELU MLP with biases, tied embeddings by default."""

from __future__ import annotations

from ...model.blocks import LayerSpec, MLPSpec
from ...spec import AttentionSpec
from .keys import flag, integer, mlp_kind, number, refuse_if, text

MODEL_TYPES = ("gpt2",)


def gpt2(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    refuse_if(cfg, "add_cross_attention", bool, "cross-attention is not self-attention")
    d, H, n_layers = integer(cfg, "n_embd", "hidden_size"), integer(cfg, "n_head"), integer(cfg, "n_layer")
    attention = AttentionSpec(d_model=d, n_heads=H, biases="qkvo", causal=True)
    activation = text(cfg, "activation_function", default="gelu_new")
    mlp = MLPSpec(integer(cfg, "n_inner", default=4 * d), mlp_kind(activation, False, "activation_function"), True)
    fields = {
        "positions": "learned", "norm": "layernorm", "norm_bias": True,
        "norm_eps": number(cfg, "layer_norm_epsilon", default=1e-5), "tied": flag(cfg, "tie_word_embeddings", True),
        "max_positions_default": 1024,
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * n_layers, fields
