"""Llama relatives with LayerNorm blocks (q/k/v/o projections, RoPE, pre-LN): StarCoder2, StableLM, Persimmon,
Nemotron, Jais-2 and OLMo. What each class fixes (`transformers` 5.24, models/<type>/modeling_<type>.py, or the
modular file):

    StarCoder2   nn.LayerNorm (with bias, norm_epsilon); `use_bias` (default true) on q/k/v/o_proj and on the
                 ungated MLP c_fc / c_proj (hidden_act, default gelu_pytorch_tanh); a window on every layer when
                 sliding_window is set (MistralAttention); tied by default
    StableLM     nn.LayerNorm (with bias, layer_norm_eps); `use_qkv_bias` on q/k/v, o_proj never; qk_layernorm:
                 StableLmLayerNormPerHead, one LayerNorm without bias per head (every head its own gain); RoPE on
                 the first partial_rotary_factor (0.25) of the head; use_parallel_residual: attention and MLP read
                 the one input_layernorm; a SwiGLU MLP without bias; head size d / H
    Persimmon    nn.LayerNorm (with bias); query_key_value and dense with bias; qk_layernorm (default true): one
                 nn.LayerNorm(head_dim) for all query heads and one for the keys (gain and shift shared by the
                 heads); partial_rotary_factor 0.5; an ungated MLP with bias (relu2); MHA, head size d / H
    Nemotron     NemotronLayerNorm1P: LayerNorm with bias whose gain is stored as w and applied as 1 + w
                 (norm_eps); `attention_bias` on q/k/v/o_proj; partial_rotary_factor 0.5; an ungated MLP
                 (NemotronMLP: up, down, relu2) with `mlp_bias`; head_dim, else d / H
    Jais-2       the Llama classes with nn.LayerNorm (layer_norm_eps) for every norm; attention_bias (default
                 true) on q/k/v/o_proj; the ungated NemotronMLP (relu2) with mlp_bias (default true)
    OLMo         OlmoLayerNorm: a LayerNorm without gain or bias (F.layer_norm(x, shape, None, None, eps=1e-5));
                 attention_bias on q/k/v/o_proj; a SwiGLU MLP without bias; clip_qkv clamps q, k and v (the count
                 assumes no entry is clipped; at a trained point it is an upper bound there)

None ties its embeddings by default but StarCoder2.
"""

from __future__ import annotations

from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .llama import llama_names
from .keys import head_sizes, mlp_kind, partial_factor, read_flag, read_float, read_int, read_str, rope

MODEL_TYPES = ("starcoder2", "stablelm", "persimmon", "nemotron", "jais2", "olmo")
EPS_KEYS = {"starcoder2": "norm_epsilon", "nemotron": "norm_eps"}  # else layer_norm_eps
ROTARY_DEFAULTS = {"stablelm": 0.25, "persimmon": 0.5, "nemotron": 0.5}
UNGATED_ACT = {"starcoder2": "gelu_pytorch_tanh", "persimmon": "relu2", "nemotron": "relu2", "jais2": "relu2"}


def _biases(cfg: dict, mt: str) -> tuple[str, bool]:
    """(attention biases, MLP bias)."""
    if mt == "starcoder2":
        bias = read_flag(cfg, "use_bias", True)
        return ("qkvo" if bias else ""), bias
    if mt == "stablelm":
        return ("qkv" if read_flag(cfg, "use_qkv_bias", False) else ""), False
    if mt == "persimmon":
        return "qkvo", True
    attention = "qkvo" if read_flag(cfg, "attention_bias", mt == "jais2") else ""
    return attention, mt != "olmo" and read_flag(cfg, "mlp_bias", mt == "jais2")


def _qk_norm(cfg: dict, mt: str, eps: float) -> dict:
    if mt == "stablelm" and read_flag(cfg, "qk_layernorm", False):
        return {"qk_norm": "layernorm_heads", "norm_eps": eps}
    if mt == "persimmon" and read_flag(cfg, "qk_layernorm", True):
        return {"qk_norm": "layernorm_head", "norm_eps": eps}
    return {}


def layernorm_family(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(every block, the ModelSpec fields) of a config of the family."""
    fixed_head = mt in ("stablelm", "persimmon")  # head size d / H in code
    d, H, G, k = head_sizes({**cfg, "head_dim": None} if fixed_head else cfg)
    if mt == "persimmon":
        G = H  # one fused query_key_value: a key and value per head
    n_layers = read_int(cfg, "num_hidden_layers")
    eps = 1e-5 if mt == "olmo" else read_float(cfg, EPS_KEYS.get(mt, "layer_norm_eps"), default=1e-5)
    p = int(k * partial_factor(cfg, default=ROTARY_DEFAULTS.get(mt, 1.0))) // 2 * 2
    biases, mlp_bias = _biases(cfg, mt)
    window = read_int(cfg, "sliding_window", default=0, minimum=0) if mt == "starcoder2" else 0
    attention = AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=G, d_head_qk=k, rope_dims=p, biases=biases, causal=True,
        rope_base=rope(cfg), sliding_window=window, **_qk_norm(cfg, mt, eps),
    )  # fmt: skip
    width = read_int(cfg, "intermediate_size")
    if mt in UNGATED_ACT:
        mlp = MLPSpec(width, mlp_kind(read_str(cfg, "hidden_act", default=UNGATED_ACT[mt]), False), mlp_bias)
    else:
        mlp = MLPSpec(width, mlp_kind(read_str(cfg, "hidden_act", default="silu"), True), mlp_bias)
    parallel = mt == "stablelm" and read_flag(cfg, "use_parallel_residual", False)
    fields = {
        "positions": "rope", "norm": "layernorm", "norm_bias": mt != "olmo", "norm_gain": mt != "olmo",
        "norm_eps": eps, "gemma_gain": mt == "nemotron", "parallel": parallel, "shared_norm": parallel,
        "tied": read_flag(cfg, "tie_word_embeddings", mt == "starcoder2"),
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * n_layers, fields


MAPPERS = dict.fromkeys(MODEL_TYPES, layernorm_family)
# Llama's name map, with the norms' biases: each one's generators span its count and keep its logits
# (tests/test_gauge_every_type.py). Persimmon's fused query_key_value has no place in it (it refuses by name), nor
# OLMo's norms without parameters (their generators are not written)
NAME_MAPS = dict.fromkeys(("starcoder2", "stablelm", "nemotron", "jais2"), llama_names)
