"""CTRL (CTRLLMHeadModel; `transformers` 5.24, models/ctrl/modeling_ctrl.py): fixed sinusoidal positions
(positional_encoding: sines of t / 10000^(2 (i // 2) / d) on the even dims, cosines on the odd, concatenated: no
parameters), token embeddings times sqrt(d) (fixed in code), pre-LN blocks (EncoderLayer) whose LayerNorms take
eps 1e-6 (fixed) and a final layernorm of layer_norm_epsilon (default 1e-6), Wq / Wk / Wv / dense with biases, a
ReLU MLP of width dff with biases, an lm_head with a bias, tied by default. The whole model is recorded as not
modelled for its sinusoidal table (`attnid.hf.mapping.opt.SINUSOIDAL_FLOAT64`); its attention layers are exact."""

from __future__ import annotations

import math

from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .keys import read_flag, read_float, read_int
from .opt import SINUSOIDAL_FLOAT64

MODEL_TYPES = ("ctrl",)
BLOCK_EPS = 1e-6  # EncoderLayer's nn.LayerNorm(n_embd, eps=1e-6)


def ctrl(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H, n_layers = read_int(cfg, "n_embd", "hidden_size"), read_int(cfg, "n_head"), read_int(cfg, "n_layer")
    attention = AttentionSpec(d_model=d, n_heads=H, biases="qkvo", causal=True)
    not_modelled = [SINUSOIDAL_FLOAT64]
    if read_float(cfg, "layer_norm_epsilon", default=BLOCK_EPS) != BLOCK_EPS:
        not_modelled.append(("layer_norm_epsilon", "the final norm's eps differs from the blocks' 1e-6: one eps per model"))
    fields = {
        "positions": "sinusoidal", "norm": "layernorm", "norm_bias": True, "norm_eps": BLOCK_EPS,
        "embed_scale": math.sqrt(d), "tied": read_flag(cfg, "tie_word_embeddings", True), "lm_head_bias": True,
        "max_positions_default": 256, "not_modelled": tuple(not_modelled),
    }  # fmt: skip
    return [LayerSpec(attention, MLPSpec(read_int(cfg, "dff"), "relu", True))] * n_layers, fields


MAPPERS = dict.fromkeys(MODEL_TYPES, ctrl)
