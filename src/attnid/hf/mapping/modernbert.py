"""ModernBERT's decoder (ModernBertDecoderForCausalLM; `transformers` 5.24,
models/modernbert_decoder/modular_modernbert_decoder.py): q/k/v_proj and Wo with `attention_bias`, RoPE on the whole
head at the base of the layer's type (rope_parameters by layer type: global 160,000, local 10,000), a causal window
of local_attention // 2 keys on the sliding layers (every layer but each global_attn_every_n_layers-th, 3, from
layer 0), MHA with heads of d / H, a GeGLU MLP (Wi, split into input and gate; hidden_activation) with `mlp_bias`,
nn.LayerNorm with `norm_bias` (default false) everywhere.

Per layer exact. Not modelled for the whole model: layer 0 has no attn_norm (its attention reads the embeddings'
norm), and the head is ModernBertPredictionHead (dense, activation, LayerNorm) before the decoder with its bias.
"""

from __future__ import annotations

from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .keys import head_sizes, layer_types, mlp_kind, read_flag, read_float, read_int, read_str, rope

MODEL_TYPES = ("modernbert-decoder",)
WHY = "layer 0 reads the embedding norm without an attn_norm of its own: not modelled"


def modernbert_decoder(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H, _, k = head_sizes({**cfg, "head_dim": None, "num_key_value_heads": None})
    n_layers = read_int(cfg, "num_hidden_layers")
    every = read_int(cfg, "global_attn_every_n_layers", default=3)
    if "layer_types" in cfg:
        types = layer_types(cfg, n_layers)
    else:
        types = ["sliding_attention" if i % every else "full_attention" for i in range(n_layers)]
    window = read_int(cfg, "local_attention", default=128, minimum=0) // 2
    biases = "qkvo" if read_flag(cfg, "attention_bias", False) else ""
    activation = read_str(cfg, "hidden_activation", "hidden_act", default="gelu")
    mlp = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(activation, True), read_flag(cfg, "mlp_bias", False))
    layers = []
    for t in types:
        attention = AttentionSpec(
            d_model=d, n_heads=H, d_head_qk=k, rope_dims=k // 2 * 2, biases=biases, causal=True,
            rope_base=rope(cfg, t), sliding_window=window if t == "sliding_attention" else 0,
        )  # fmt: skip
        layers.append(LayerSpec(attention, mlp))
    norm_bias = read_flag(cfg, "norm_bias", False)
    head = ("classifier_bias", "the head's dense-activation-norm transform before the unembedding: not modelled")
    fields = {
        "positions": "rope", "norm": "layernorm", "norm_bias": norm_bias,
        "norm_eps": read_float(cfg, "norm_eps", default=1e-5), "embedding_norm": True,
        "tied": read_flag(cfg, "tie_word_embeddings", True), "lm_head_bias": read_flag(cfg, "decoder_bias", True),
        "not_modelled": (("num_hidden_layers", WHY), head),
    }  # fmt: skip
    return layers, fields


MAPPERS = dict.fromkeys(MODEL_TYPES, modernbert_decoder)
