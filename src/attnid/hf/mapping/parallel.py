"""Parallel blocks with LayerNorm and rotary attention: GPT-J, GPT-NeoX (Pythia), Phi and Falcon.

Attention and MLP read the same stream (h = h + Attn(Norm_1 h) + MLP(Norm_2 h)). What the classes fix:

    GPT-J      one norm for both branches; q/k/v/out_proj without bias; rotary_dim (class default 64,
               null: the whole head); the lm_head is a Linear with a bias (GPTJForCausalLM)
    CodeGen    GPT-J's block (modular_codegen.py: CodeGenAttention is GPT-J's with one fused qkv_proj, its
               rows split in mp_num = 4 chunks of (query, value, key): a permutation of the same maps)
    GPT-NeoX   two norms when use_parallel_residual (default true), else sequential; rotary_pct (0.25);
               attention_bias (default true) on every projection
    GPT-NeoX-Japanese  sequential blocks (GPTNeoXJapaneseLayer); query_key_value and dense without bias, except
               the last layer's dense_bias (use_bias = layer_number == num_hidden_layers - 1); an MLP without
               bias, d * intermediate_multiple_size wide; the rotated share from rope_parameters or the legacy
               rotary_pct (default 1.0); tied embeddings by default
    Phi        one norm; biases on every projection; partial_rotary_factor (0.5); qk_layernorm: per-head
               q/k LayerNorm; the lm_head has a bias
    Falcon     legacy RefinedWeb(Model) keys (n_head, n_head_kv, n_layer, n_embed), which FalconConfig
               silently ignores, are read here; new_decoder_architecture: two norms and GQA, else
               multi_query (one key/value head) and one norm; `bias` on every projection and the MLP;
               ALiBi instead of RoPE when `alibi`
"""

from __future__ import annotations

from ...errors import SpecError
from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .keys import head_sizes, mlp_kind, partial_factor, read_flag, read_float, read_int, read_str, rope
from .names import fused_per_head, head_names, mlp_linear, norm, out_heads, rope_perm, same
from .real_attention import GPT2_KEYS, RealAttention, gpt2_positions

MODEL_TYPES = ("gptj", "codegen", "gpt_neox", "gpt_neox_japanese", "phi", "falcon", "RefinedWeb", "RefinedWebModel")


def _ungated(cfg: dict, key: str, default: str, width: int, bias: bool) -> MLPSpec:
    return MLPSpec(width, mlp_kind(read_str(cfg, key, default=default), False, key), bias)


def gptj(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H, n_layers = read_int(cfg, "n_embd", "hidden_size"), read_int(cfg, "n_head"), read_int(cfg, "n_layer")
    p = d // H if cfg.get("rotary_dim", 64) is None else read_int(cfg, "rotary_dim", default=64)
    attention = AttentionSpec(d_model=d, n_heads=H, rope_dims=p, causal=True)
    mlp = _ungated(cfg, "activation_function", "gelu_new", read_int(cfg, "n_inner", default=4 * d), True)
    fields = {
        "positions": "rope", "norm": "layernorm", "norm_bias": True, "norm_eps": read_float(cfg, "layer_norm_epsilon", default=1e-5),
        "parallel": True, "shared_norm": True, "tied": read_flag(cfg, "tie_word_embeddings", False),
        "lm_head_bias": True,
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * n_layers, fields


def gpt_neox(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H, _, k = head_sizes(cfg)
    p = int(k * partial_factor(cfg, "rotary_pct", 0.25)) // 2 * 2
    bias = "qkvo" if read_flag(cfg, "attention_bias", True) else ""
    attention = AttentionSpec(d_model=d, n_heads=H, rope_dims=p, biases=bias, causal=True, rope_base=rope(cfg))
    mlp = _ungated(cfg, "hidden_act", "gelu", read_int(cfg, "intermediate_size"), True)
    fields = {
        "positions": "rope", "norm": "layernorm", "norm_bias": True, "norm_eps": read_float(cfg, "layer_norm_eps", default=1e-5),
        "parallel": read_flag(cfg, "use_parallel_residual", True), "tied": read_flag(cfg, "tie_word_embeddings", False),
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * read_int(cfg, "num_hidden_layers"), fields


def gpt_neox_japanese(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H, _, k = head_sizes(cfg)
    n_layers = read_int(cfg, "num_hidden_layers")
    p = int(k * partial_factor(cfg, "rotary_pct", 1.0)) // 2 * 2
    mlp = _ungated(cfg, "hidden_act", "gelu", d * read_int(cfg, "intermediate_multiple_size", default=4), False)
    layers = []
    for i in range(n_layers):
        biases = "o" if i == n_layers - 1 else ""
        attention = AttentionSpec(d_model=d, n_heads=H, rope_dims=p, biases=biases, causal=True, rope_base=rope(cfg))
        layers.append(LayerSpec(attention, mlp))
    fields = {
        "positions": "rope", "norm": "layernorm", "norm_bias": True, "norm_eps": read_float(cfg, "layer_norm_eps", default=1e-5),
        "tied": read_flag(cfg, "tie_word_embeddings", True),
    }  # fmt: skip
    return layers, fields


def phi(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d, H, G, k = head_sizes(cfg)
    p = int(k * partial_factor(cfg, "partial_rotary_factor", 0.5)) // 2 * 2
    eps = read_float(cfg, "layer_norm_eps", default=1e-5)
    qk = {"qk_norm": "layernorm_head", "norm_eps": eps} if read_flag(cfg, "qk_layernorm", False) else {}
    attention = AttentionSpec(
        d_model=d,
        n_heads=H,
        n_kv_heads=G,
        d_head_qk=k,
        rope_dims=p,
        biases="qkvo",
        causal=True,
        rope_base=rope(cfg),
        **qk,
    )
    mlp = _ungated(cfg, "hidden_act", "gelu_new", read_int(cfg, "intermediate_size"), True)
    fields = {
        "positions": "rope", "norm": "layernorm", "norm_bias": True, "norm_eps": eps, "parallel": True,
        "shared_norm": True, "tied": read_flag(cfg, "tie_word_embeddings", False), "lm_head_bias": True,
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * read_int(cfg, "num_hidden_layers"), fields


def falcon(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    d = read_int(cfg, "hidden_size", "n_embed")
    H = read_int(cfg, "num_attention_heads", "n_head")
    new_arch = read_flag(cfg, "new_decoder_architecture", mt == "RefinedWeb")
    if new_arch:
        G = read_int(cfg, "num_kv_heads", "n_head_kv", default=H)
    elif read_flag(cfg, "multi_query", True):
        G = 1
    else:
        G = read_int(cfg, "num_kv_heads", default=H)
    alibi, bias = read_flag(cfg, "alibi", False), read_flag(cfg, "bias", False)
    attention = AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=G, rope_dims=0 if alibi else d // H, biases="qkvo" if bias else "",
        causal=True, rope_base=rope(cfg), alibi=alibi,
    )  # fmt: skip
    mlp = _ungated(cfg, "activation", "gelu", read_int(cfg, "ffn_hidden_size", default=4 * d), bias)
    parallel = new_arch or read_flag(cfg, "parallel_attn", True)
    fields = {
        "positions": "none" if alibi else "rope", "norm": "layernorm", "norm_bias": True,
        "norm_eps": read_float(cfg, "layer_norm_epsilon", default=1e-5), "parallel": parallel,
        "shared_norm": parallel and not new_arch,
        "tied": read_flag(cfg, "tie_word_embeddings", True),
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * read_int(cfg, "num_hidden_layers", "n_layer"), fields


MAPPERS = {
    "gptj": gptj,
    "codegen": gptj,
    "gpt_neox": gpt_neox,
    "gpt_neox_japanese": gpt_neox_japanese,
    "phi": phi,
    **dict.fromkeys(("falcon", "RefinedWeb", "RefinedWebModel"), falcon),
}


def gpt_neox_names(spec, cfg: dict) -> list[tuple]:
    """The class's parameters <-> the layout (`.names`): query_key_value rows per head, rotary pairs."""
    e = [same("gpt_neox.embed_in.weight", "embed")]
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"gpt_neox.layers.{i}", f"layers.{i}", x.attention
        norm(e, f"{hf}.input_layernorm", f"{fine}.norm_1", True)
        norm(e, f"{hf}.post_attention_layernorm", f"{fine}.norm_2", True)
        e += fused_per_head(f"{hf}.attention", f"{fine}.attn", a, rope_perm(a.d_head_qk, a.rope_dims))
        mlp_linear(e, f"{hf}.mlp", f"{fine}.mlp", x.mlp, up="dense_h_to_4h", down="dense_4h_to_h")
    norm(e, "gpt_neox.final_layer_norm", "final_norm", True)
    head_names(e, spec)
    return e


def falcon_names(spec, cfg: dict) -> list[tuple]:
    """The class's parameters <-> the layout (`.names`), the new decoder architecture: query_key_value rows per
    KV group [q of its r heads; k; v] (`qkv_per_group`), rotary pairs."""
    e = [same("transformer.word_embeddings.weight", "embed")]
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"transformer.h.{i}", f"layers.{i}", x.attention
        H, G, k, r = a.n_heads, a.n_kv_heads, a.d_head_qk, a.group_size
        if not cfg.get("new_decoder_architecture", False):
            raise SpecError("new_decoder_architecture", "the name map of Falcon's old decoder is not written")
        perm = rope_perm(k, a.rope_dims)
        qkv = tuple(f"{fine}.attn.{b}" for b in ("W_Q", "W_K", "W_V"))
        e.append(("qkv_per_group", f"{hf}.self_attention.query_key_value.weight", qkv, G, r, k, perm))
        if a.biases:
            raise SpecError("bias", "the name map of Falcon's biases is not written")
        e.append(out_heads(f"{hf}.self_attention.dense.weight", f"{fine}.attn.W_O", H, a.d_head_v))
        mlp_linear(e, f"{hf}.mlp", f"{fine}.mlp", x.mlp, up="dense_h_to_4h", down="dense_4h_to_h")
        norm(e, f"{hf}.ln_attn", f"{fine}.norm_1", True)
        norm(e, f"{hf}.ln_mlp", f"{fine}.norm_2", True)
    norm(e, "transformer.ln_f", "final_norm", True)
    head_names(e, spec)
    return e


NAME_MAPS = {"gpt_neox": gpt_neox_names, "falcon": falcon_names}



def _falcon_kv_heads(out: dict, cfg: dict, kv_groups: int) -> None:
    """The new decoder architecture reads its KV heads from num_kv_heads."""
    if out.get("new_decoder_architecture"):
        out["num_kv_heads"] = kv_groups


def falcon_class_keys(cfg: dict) -> dict:
    """Legacy Falcon (RefinedWeb) keys -> the keys FalconConfig reads (it ignores the old ones)."""
    mt = cfg["model_type"]
    out = {k: v for k, v in cfg.items() if k not in ("n_head", "n_layer", "n_head_kv", "n_embed")}
    out["model_type"] = "falcon"
    out["hidden_size"] = cfg.get("hidden_size", cfg.get("n_embed"))
    out["num_attention_heads"] = cfg.get("num_attention_heads", cfg["n_head"])
    out["num_hidden_layers"] = cfg.get("num_hidden_layers", cfg["n_layer"])
    new_arch = bool(cfg.get("new_decoder_architecture", mt == "RefinedWeb"))
    out["new_decoder_architecture"] = new_arch
    if new_arch:
        out["num_kv_heads"] = cfg.get("num_kv_heads", cfg.get("n_head_kv", out["num_attention_heads"]))
    return out


CLASS_KEYS = dict.fromkeys(("RefinedWeb", "RefinedWebModel"), falcon_class_keys)

# the attention module the module-level check builds (`.real_attention`): one fused query_key_value each
REAL_ATTENTION = {
    "gptj": RealAttention("gptj", "GPTJAttention", "GPTJRotaryEmbedding", keys=GPT2_KEYS, fused=True,
                          rotary_key="rotary_dim", shrink=gpt2_positions),
    "gpt_neox": RealAttention("gpt_neox", "GPTNeoXAttention", "GPTNeoXRotaryEmbedding", fused=True, rotary_key="rotary_pct"),
    "phi": RealAttention("phi", "PhiAttention", "PhiRotaryEmbedding", fused=True),
    "falcon": RealAttention("falcon", "FalconAttention", "FalconRotaryEmbedding", fused=True, shrink=_falcon_kv_heads),
}  # fmt: skip
