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
intermediate_size (hidden_act, default gelu), a final layer_norm, the output projection tied by default.

XGLM (XGLMForCausalLM; models/xglm/modeling_xglm.py), the same pre-LN decoder with fixed sinusoidal positions
(XGLMSinusoidalPositionalEmbedding: no parameters, rows read from an offset of 2) and embeddings times sqrt(d)
when scale_embedding (default true); LayerNorms with torch's default eps 1e-5; ffn_dim wide (activation_function,
default gelu); an lm_head without bias, tied by default. Its whole model is recorded as not modelled
(SINUSOIDAL_FLOAT64): its attention layers are exact."""

from __future__ import annotations

import math

from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .keys import head_sizes, mlp_kind, read_flag, read_int, read_str, refuse_if
from .names import attention_linear, head_names, mlp_linear, norm, rows, same

MODEL_TYPES = ("opt",)
POSITION_OFFSET = 2  # OPTLearnedPositionalEmbedding.offset
# Why a model with fixed sinusoidal positions is counted per layer only (attnid.model.counting.residual): the
# count, exact in exact arithmetic, keeps no stream rotation, but the table's rows are nearly dependent (XGLM's at
# d = 1024 over 2048 positions: 704 of its 1023 centred directions lie below 1e-10 of the largest, measured), so
# the rotations along them are identified below float64's resolution and a float64 Jacobian finds them free.
SINUSOIDAL_FLOAT64 = (
    "positions",
    (
        "fixed sinusoidal positions: their rows are nearly dependent in float64 (XGLM at d 1024, 2048 positions: 704"
        " of 1023 centred directions below 1e-10), so the stream rotations the count holds identified are not"
        " resolved by a float64 Jacobian: not modelled"
    ),
)


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


def xglm(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    refuse_if(cfg, "add_cross_attention", bool, "cross-attention is not self-attention")
    d, H = read_int(cfg, "d_model", "hidden_size"), read_int(cfg, "attention_heads", "num_attention_heads")
    attention = AttentionSpec(d_model=d, n_heads=H, biases="qkvo", causal=True)
    activation = read_str(cfg, "activation_function", default="gelu")
    mlp = MLPSpec(read_int(cfg, "ffn_dim"), mlp_kind(activation, False, "activation_function"), True)
    fields = {
        "positions": "sinusoidal", "norm": "layernorm", "norm_bias": True, "norm_eps": 1e-5,
        "embed_scale": math.sqrt(d) if read_flag(cfg, "scale_embedding", True) else 1.0,
        "tied": read_flag(cfg, "tie_word_embeddings", True), "max_positions_default": 2048,
        "not_modelled": (SINUSOIDAL_FLOAT64,),
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * read_int(cfg, "num_layers", "num_hidden_layers"), fields


MAPPERS = {**dict.fromkeys(MODEL_TYPES, opt), "biogpt": biogpt, "xglm": xglm}


def opt_names(spec, cfg: dict) -> list[tuple]:
    """The class's parameters <-> the layout (`.names`): embed_positions has 2 unread rows first (the offset):
    layout row t is the class's row t + 2."""
    n = spec.max_positions
    e = [same("model.decoder.embed_tokens.weight", "embed")]
    e.append(rows("model.decoder.embed_positions.weight", "pos", tuple((t + 2) % n for t in range(n))))
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"model.decoder.layers.{i}", f"layers.{i}", x.attention
        attention_linear(e, f"{hf}.self_attn", f"{fine}.attn", a, None, o="out_proj")
        norm(e, f"{hf}.self_attn_layer_norm", f"{fine}.norm_1", True)
        mlp_linear(e, hf, f"{fine}.mlp", x.mlp, up="fc1", down="fc2")
        norm(e, f"{hf}.final_layer_norm", f"{fine}.norm_2", True)
    if spec.final_norm:
        norm(e, "model.decoder.final_layer_norm", "final_norm", True)
    head_names(e, spec)
    return e


NAME_MAPS = {"opt": opt_names}

