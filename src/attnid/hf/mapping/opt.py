"""OPT (OPTForCausalLM; transformers models/opt/modeling_opt.py): learned positions read at an offset of 2
(OPTLearnedPositionalEmbedding has max_position_embeddings + 2 rows, rows 0 and 1 never read), LayerNorm blocks
pre-LN when do_layer_norm_before (every size but 350m) and post-LN otherwise, a final LayerNorm only pre-LN (and
not with the legacy _remove_final_layer_norm), biases on q/k/v/out_proj and fc1/fc2 when enable_bias (default
true), an ungated MLP (activation_function, default relu), tied embeddings by default, an lm_head without bias.
Not modelled: word_embed_proj_dim != hidden_size (OPT-350m's project_in / project_out maps) and norms without
gain and bias (layer_norm_elementwise_affine false).

BioGPT (BioGptForCausalLM; models/biogpt/modeling_biogpt.py), OPT's pre-LN decoder otherwise: positions read at
the same offset of 2 (BioGptLearnedPositionalEmbedding), token embeddings times sqrt(d) when scale_embedding
(default true, BioGptScaledWordEmbedding), every LayerNorm with torch's default eps 1e-5 (nn.LayerNorm(embed_dim):
the config's layer_norm_eps is not read), biases on q/k/v/out_proj and fc1/fc2 (fixed), an ungated MLP of
intermediate_size (hidden_act, default gelu), a final layer_norm, the output projection tied by default."""

from __future__ import annotations

import math

from ...model.blocks import LayerSpec, MLPSpec
from ...spec import AttentionSpec
from .keys import head_sizes, mlp_kind, read_flag, read_int, read_str

MODEL_TYPES = ("opt",)
POSITION_OFFSET = 2  # OPTLearnedPositionalEmbedding.offset


def opt(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H = read_int(cfg, "hidden_size"), read_int(cfg, "num_attention_heads")
    bias = read_flag(cfg, "enable_bias", True)
    pre = read_flag(cfg, "do_layer_norm_before", True)
    attention = AttentionSpec(d_model=d, n_heads=H, biases="qkvo" if bias else "", causal=True)
    activation = read_str(cfg, "activation_function", default="relu")
    mlp = MLPSpec(read_int(cfg, "ffn_dim"), mlp_kind(activation, False, "activation_function"), bias)
    not_modelled = []
    if read_int(cfg, "word_embed_proj_dim", default=d) != d:
        not_modelled.append(
            ("word_embed_proj_dim", "projections between the embeddings and the stream are not modelled")
        )
    if not read_flag(cfg, "layer_norm_elementwise_affine", True):
        not_modelled.append(("layer_norm_elementwise_affine", "false: norms without gain and bias are not modelled"))
    fields = {
        "positions": "learned", "norm": "layernorm", "norm_bias": True, "norm_eps": 1e-5,
        "norm_position": "pre" if pre else "post", "final_norm": pre and not read_flag(cfg, "_remove_final_layer_norm", False),
        "tied": read_flag(cfg, "tie_word_embeddings", True), "max_positions_default": 2048,
        "position_offset": POSITION_OFFSET, "not_modelled": tuple(not_modelled),
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * read_int(cfg, "num_hidden_layers"), fields


def biogpt(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H, _, _ = head_sizes(cfg)
    attention = AttentionSpec(d_model=d, n_heads=H, biases="qkvo", causal=True)
    activation = read_str(cfg, "hidden_act", default="gelu")
    mlp = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(activation, False), True)
    fields = {
        "positions": "learned", "norm": "layernorm", "norm_bias": True, "norm_eps": 1e-5,
        "embed_scale": math.sqrt(d) if read_flag(cfg, "scale_embedding", True) else 1.0,
        "tied": read_flag(cfg, "tie_word_embeddings", True), "max_positions_default": 1024,
        "position_offset": POSITION_OFFSET,
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * read_int(cfg, "num_hidden_layers"), fields


MAPPERS = {**dict.fromkeys(MODEL_TYPES, opt), "biogpt": biogpt}
