"""GPT-2 and the decoders built like it: learned positions, LayerNorm blocks with biases, an ungated MLP with
biases of width n_inner (default 4 d), tied embeddings by default (`transformers` 5.24, models/<type>/modeling_*.py):

    gpt2         GPT2LMHeadModel: pre-LN; Conv1D c_attn / c_proj, biases on all four projections
    gpt-sw3      GPT2Config and GPT2LMHeadModel (models/auto: the model type only names its tokenizer): GPT-2
    gpt_bigcode  GPTBigCodeForCausalLM: GPT-2 with nn.Linear c_attn / c_proj (biased), one key/value head when
                 multi_query (default true, GPTBigCodeAttention), every head its own otherwise; activation
                 default gelu_pytorch_tanh; scale_attn_weights only rescales the scores
    gpt_neo      GPTNeoForCausalLM: q/k/v_proj without bias, out_proj with (GPTNeoSelfAttention), no score
                 scaling (a constant on W_Q: the count is unchanged); `attention_types` expands to one
                 'global' or 'local' per layer, a local layer's query sees its last `window_size` keys (the
                 mask tril XOR tril(-window_size)); MLP width intermediate_size (default 4 d), gelu_new;
                 learned positions (max_position_embeddings, default 2048)
    openai-gpt   OpenAIGPTLMHeadModel (GPT-1): post-LN blocks n = LN_1(x + Attn x), h = LN_2(n + MLP n) (Block),
                 no final norm, Conv1D with biases, the MLP 4 d wide (fixed in code) with `afn` (gelu is
                 gelu_new, ACT_FNS; silu and swish have no gate: not modelled), n_positions (default 512)
"""

from __future__ import annotations

from ...errors import SpecError
from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .keys import mlp_kind, read_flag, read_float, read_int, read_str, refuse_if
from .names import head_names, norm, same
from .real_attention import GPT2_KEYS, RealAttention, gpt2_positions

MODEL_TYPES = ("gpt2", "gpt-sw3", "gpt_bigcode")
NEO_LAYER_KINDS = ("global", "local")


def _tied_fields(cfg: dict, positions_default: int) -> dict:
    return {
        "positions": "learned", "norm": "layernorm", "norm_bias": True,
        "norm_eps": read_float(cfg, "layer_norm_epsilon", default=1e-5), "tied": read_flag(cfg, "tie_word_embeddings", True),
        "max_positions_default": positions_default,
    }  # fmt: skip


def gpt2(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    refuse_if(cfg, "add_cross_attention", bool, "cross-attention is not self-attention")
    d, H, n_layers = read_int(cfg, "n_embd", "hidden_size"), read_int(cfg, "n_head"), read_int(cfg, "n_layer")
    G = 1 if mt == "gpt_bigcode" and read_flag(cfg, "multi_query", True) else H
    attention = AttentionSpec(d_model=d, n_heads=H, n_kv_heads=G, biases="qkvo", causal=True)
    default_act = "gelu_pytorch_tanh" if mt == "gpt_bigcode" else "gelu_new"
    activation = read_str(cfg, "activation_function", default=default_act)
    mlp = MLPSpec(read_int(cfg, "n_inner", default=4 * d), mlp_kind(activation, False, "activation_function"), True)
    return [LayerSpec(attention, mlp)] * n_layers, _tied_fields(cfg, 1024)


def _neo_layer_kinds(cfg: dict, n_layers: int) -> list[str]:
    """GPTNeoConfig.expand_attention_types_params: [[kinds, repeats], ...] -> one kind per layer."""
    types = cfg.get("attention_types")
    if types is None:  # the class default, whatever num_layers says
        types = [[list(NEO_LAYER_KINDS), 12]]
    kinds = []
    try:
        for group, repeats in types:
            if isinstance(repeats, bool) or not isinstance(repeats, int) or not all(k in NEO_LAYER_KINDS for k in group):
                raise ValueError
            kinds += list(group) * repeats
    except (TypeError, ValueError):
        raise SpecError("attention_types", f"must list [[kinds ('global' | 'local'), repeats], ...], got {types!r}")
    if len(kinds) != n_layers:
        raise SpecError("attention_types", f"expands to {len(kinds)} layers, num_layers is {n_layers}")
    return kinds


def gpt_neo(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H = read_int(cfg, "hidden_size"), read_int(cfg, "num_heads", "num_attention_heads")
    n_layers = read_int(cfg, "num_layers", "num_hidden_layers")
    window = read_int(cfg, "window_size", default=256)
    activation = read_str(cfg, "activation_function", default="gelu_new")
    mlp = MLPSpec(read_int(cfg, "intermediate_size", default=4 * d), mlp_kind(activation, False, "activation_function"), True)
    layers = []
    for kind in _neo_layer_kinds(cfg, n_layers):
        local = window if kind == "local" else 0
        attention = AttentionSpec(d_model=d, n_heads=H, biases="o", causal=True, sliding_window=local)
        layers.append(LayerSpec(attention, mlp))
    return layers, _tied_fields(cfg, 2048)


def openai_gpt(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H, n_layers = read_int(cfg, "n_embd", "hidden_size"), read_int(cfg, "n_head"), read_int(cfg, "n_layer")
    attention = AttentionSpec(d_model=d, n_heads=H, biases="qkvo", causal=True)
    mlp = MLPSpec(4 * d, mlp_kind(read_str(cfg, "afn", default="gelu"), False, "afn"), True)
    fields = {**_tied_fields(cfg, 512), "norm_position": "post", "final_norm": False}
    return [LayerSpec(attention, mlp)] * n_layers, fields


MAPPERS = {**dict.fromkeys(MODEL_TYPES, gpt2), "gpt_neo": gpt_neo, "openai-gpt": openai_gpt}


def gpt2_names(spec, cfg: dict) -> list[tuple]:
    """The class's parameters <-> the layout (`.names`): Conv1D weights already (in, out); c_attn (d, 3d) =
    [q | k | v] columns (`qkv_columns`), c_proj (H v, d) (`row_heads`)."""
    e = [same("transformer.wte.weight", "embed"), same("transformer.wpe.weight", "pos")]
    d = spec.d_model
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"transformer.h.{i}", f"layers.{i}", x.attention
        H, k = a.n_heads, a.d_head_qk
        norm(e, f"{hf}.ln_1", f"{fine}.norm_1", True)
        e.append(("qkv_columns", f"{hf}.attn.c_attn.weight", tuple(f"{fine}.attn.{b}" for b in ("W_Q", "W_K", "W_V")), d, H, k))
        e.append(("qkv_columns_bias", f"{hf}.attn.c_attn.bias", tuple(f"{fine}.attn.{b}" for b in ("b_Q", "b_K", "b_V")), d, H, k))
        e.append(("row_heads", f"{hf}.attn.c_proj.weight", f"{fine}.attn.W_O", H))
        e.append(same(f"{hf}.attn.c_proj.bias", f"{fine}.attn.b_O"))
        norm(e, f"{hf}.ln_2", f"{fine}.norm_2", True)
        e += [same(f"{hf}.mlp.c_fc.weight", f"{fine}.mlp.up"), same(f"{hf}.mlp.c_fc.bias", f"{fine}.mlp.up_bias")]
        e += [same(f"{hf}.mlp.c_proj.weight", f"{fine}.mlp.down"), same(f"{hf}.mlp.c_proj.bias", f"{fine}.mlp.down_bias")]
    norm(e, "transformer.ln_f", "final_norm", True)
    head_names(e, spec)
    return e


NAME_MAPS = {"gpt2": gpt2_names}


# the attention module the module-level check builds (`.real_attention`): c_attn fuses q, k, v
REAL_ATTENTION = {"gpt2": RealAttention("gpt2", "GPT2Attention", keys=GPT2_KEYS, fused=True, shrink=gpt2_positions)}
