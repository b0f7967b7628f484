"""GPT-2 (GPT2LMHeadModel): learned positions, pre-LN LayerNorm blocks, Conv1D c_attn and c_proj with biases
on all four projections, a GELU MLP with biases, tied embeddings by default."""

from __future__ import annotations

from ...model.blocks import LayerSpec, MLPSpec
from ...spec import AttentionSpec
from .keys import mlp_kind, read_flag, read_float, read_int, read_str, refuse_if

MODEL_TYPES = ("gpt2",)


def gpt2(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    refuse_if(cfg, "add_cross_attention", bool, "cross-attention is not self-attention")
    d, H, n_layers = read_int(cfg, "n_embd", "hidden_size"), read_int(cfg, "n_head"), read_int(cfg, "n_layer")
    attention = AttentionSpec(d_model=d, n_heads=H, biases="qkvo", causal=True)
    activation = read_str(cfg, "activation_function", default="gelu_new")
    mlp = MLPSpec(read_int(cfg, "n_inner", default=4 * d), mlp_kind(activation, False, "activation_function"), True)
    fields = {
        "positions": "learned", "norm": "layernorm", "norm_bias": True,
        "norm_eps": read_float(cfg, "layer_norm_epsilon", default=1e-5), "tied": read_flag(cfg, "tie_word_embeddings", True),
        "max_positions_default": 1024,
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * n_layers, fields


MAPPERS = dict.fromkeys(MODEL_TYPES, gpt2)
