"""BLOOM (BloomForCausalLM): ALiBi instead of positions, a LayerNorm on the word embeddings
(word_embeddings_layernorm) before pre-LN LayerNorm blocks, biases on every projection and the MLP,
a GELU MLP of width 4 d (fixed in code), tied embeddings by default."""

from __future__ import annotations

from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .keys import read_flag, read_float, read_int
from .names import fused_per_head, head_names, mlp_linear, norm, same
from .real_attention import RealAttention

MODEL_TYPES = ("bloom",)


def bloom(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d = read_int(cfg, "hidden_size", "n_embed")
    H, n_layers = read_int(cfg, "n_head", "num_attention_heads"), read_int(cfg, "n_layer", "num_hidden_layers")
    attention = AttentionSpec(d_model=d, n_heads=H, biases="qkvo", causal=True, alibi=True)
    fields = {
        "positions": "none", "norm": "layernorm", "norm_bias": True, "norm_eps": read_float(cfg, "layer_norm_epsilon", default=1e-5),
        "tied": read_flag(cfg, "tie_word_embeddings", True), "embedding_norm": True,
    }  # fmt: skip
    return [LayerSpec(attention, MLPSpec(4 * d, "gelu", True))] * n_layers, fields


MAPPERS = dict.fromkeys(MODEL_TYPES, bloom)


def bloom_names(spec, cfg: dict) -> list[tuple]:
    """The class's parameters <-> the layout (`.names`): query_key_value rows per head, no rotation."""
    e = [same("transformer.word_embeddings.weight", "embed")]
    norm(e, "transformer.word_embeddings_layernorm", "embed_norm", True)
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"transformer.h.{i}", f"layers.{i}", x.attention
        norm(e, f"{hf}.input_layernorm", f"{fine}.norm_1", True)
        e += fused_per_head(f"{hf}.self_attention", f"{fine}.attn", a, tuple(range(a.d_head_qk)))
        norm(e, f"{hf}.post_attention_layernorm", f"{fine}.norm_2", True)
        mlp_linear(e, f"{hf}.mlp", f"{fine}.mlp", x.mlp, up="dense_h_to_4h", down="dense_4h_to_h")
    norm(e, "transformer.ln_f", "final_norm", True)
    head_names(e, spec)
    return e


NAME_MAPS = {"bloom": bloom_names}


# the attention module the module-level check builds (`.real_attention`): one fused query_key_value
REAL_ATTENTION = {"bloom": RealAttention("bloom", "BloomAttention", keys=("hidden_size", "n_head", "n_layer"), fused=True)}
