"""MosaicML's decoders: MPT and DBRX (`transformers` 5.24, models/mpt/modeling_mpt.py, models/dbrx/modeling_dbrx.py).

MPT (MptForCausalLM) fixes in code what its config names:

    attention    one fused Wqkv and out_proj, both without bias, whatever no_bias says (MptAttention); ALiBi
                 always (build_mpt_alibi_tensor: slopes 2^-(alibi_bias_max (h + 1) / H) for a power-of-two H,
                 interleaved otherwise; attn_config.alibi is not read), no positions; attn_config.softmax_scale
                 only rescales the scores; qk_ln, prefix_lm and attn_uses_sequence_id are not read
    clip_qkv     attn_config.clip_qkv clamps every q/k/v entry: the count assumes none reaches the clip (an
                 entry held at the clip would hide its directions)
    norms        LayerNorm with the bias removed (norm_1.bias = norm_2.bias = norm_f.bias = None), eps
                 layer_norm_epsilon; pre-LN, a final norm_f
    MLP          GELU (exact) of width 4 d without biases (MptMLP: expansion_ratio is not read)
    head         lm_head without bias, tied by default (tie_word_embeddings); logit_scale is not read

DBRX (DbrxForCausalLM) keeps MPT's fused Wqkv, out_proj (no biases) and clip_qkv, with RoPE on the whole head
and attn_config.kv_n_heads key/value heads (DbrxAttention); its LayerNorms have no bias and torch's default eps
1e-5 (nn.LayerNorm(d_model, bias=False)); every block routes to ffn_config's experts (`experts`: DbrxFFN,
SwiGLU experts of ffn_hidden_size, ffn_act_fn's name); the head is untied (the class refuses a tied one). The
rotary base is rope_parameters' (DbrxRotaryEmbedding reads config.rope_parameters, not attn_config.rope_theta).
"""

from __future__ import annotations

from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .experts import experts
from .keys import read_flag, read_float, read_int, read_section, read_str, rope

MODEL_TYPES = ("mpt",)


def mpt(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H = read_int(cfg, "d_model", "hidden_size"), read_int(cfg, "n_heads", "num_attention_heads")
    read_float(read_section(cfg, "attn_config"), "clip_qkv", default=0.0)  # a number or null
    attention = AttentionSpec(d_model=d, n_heads=H, causal=True, alibi=True)
    fields = {
        "positions": "none", "norm": "layernorm", "norm_bias": False,
        "norm_eps": read_float(cfg, "layer_norm_epsilon", default=1e-5), "tied": read_flag(cfg, "tie_word_embeddings", True),
        "max_positions_default": read_int(cfg, "max_seq_len", default=2048),
    }  # fmt: skip
    return [LayerSpec(attention, MLPSpec(4 * d, "gelu"))] * read_int(cfg, "n_layers", "num_hidden_layers"), fields


def dbrx(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    attn, ffn = read_section(cfg, "attn_config"), read_section(cfg, "ffn_config")
    d, H = read_int(cfg, "d_model", "hidden_size"), read_int(cfg, "n_heads", "num_attention_heads")
    read_float(attn, "clip_qkv", default=0.0)  # a number or null
    attention = AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=read_int(attn, "kv_n_heads", default=1), rope_dims="full", causal=True,
        rope_base=rope(cfg),
    )  # fmt: skip
    activation = read_str(read_section(ffn, "ffn_act_fn"), "name", default="silu")
    n_experts, top_k = read_int(ffn, "moe_num_experts", default=4), read_int(ffn, "moe_top_k", default=1)
    not_modelled: list = []
    moe = experts(ffn, mt, n_experts, top_k, read_int(ffn, "ffn_hidden_size", default=3584), activation, not_modelled)
    fields = {
        "positions": "rope", "norm": "layernorm", "norm_bias": False, "norm_eps": 1e-5, "tied": False,
        "max_positions_default": read_int(cfg, "max_seq_len", default=2048), "not_modelled": tuple(not_modelled),
    }  # fmt: skip
    return [LayerSpec(attention, moe)] * read_int(cfg, "n_layers", "num_hidden_layers"), fields


MAPPERS = {**dict.fromkeys(MODEL_TYPES, mpt), "dbrx": dbrx}


# Keys the config class leaves None though its model class needs them (transformers 5.24), filled so that the class
# builds (`attnid.hf.coverage.default_config`): DbrxAttention stores attn_config.rope_theta, which
# DbrxAttentionConfig's defaults do not set (models/dbrx/modeling_dbrx.py; the rotary tables read rope_parameters,
# so any value builds the same model; the published configs set 500000); DbrxAttention clamps q/k/v with
# clamp(min=-clip_qkv, max=clip_qkv), which raises when clip_qkv is None, the class's default (databricks/dbrx-base,
# config.json: attn_config.clip_qkv 8; the shrunk model's q/k/v stay far below it, so the clamp changes no count).
DEFAULT_GAPS = {"dbrx": {"attn_config": {"rope_theta": 500000.0, "clip_qkv": 8.0}}}
