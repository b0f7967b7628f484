"""The decoder family of q/k/v/o_proj with RMSNorm, RoPE and a gated MLP: Llama and the model types built
like it (Mistral, Mixtral, Qwen2/3, Qwen3-MoE, Gemma 1-3, OLMo-2, Phi-3, GPT-OSS).

What each class fixes in code rather than in its config (`transformers` 5.24, models/<type>/modeling_<type>.py):

    biases       Qwen2: q, k, v (never o); Mistral, Mixtral, Phi-3: none; the others follow
                 `attention_bias` (which also biases o_proj), default false except GPT-OSS (true)
    q/k norms    Qwen3, Qwen3-MoE, Gemma-3: RMSNorm per head, one gain shared by all heads;
                 OLMo-2: RMSNorm across all heads
    sinks        GPT-OSS: one learnable logit per head
    softcap      Gemma-2: attn_logit_softcapping on the scores, final_logit_softcapping on the logits
    windows      Mistral, Mixtral, Phi-3: every layer; Gemma-2: alternating, local first; Gemma-3 and
                 GPT-OSS: `layer_types` or the pattern; Qwen2/3: only with use_sliding_window, from
                 max_window_layers on
    norms        Gemma: gain stored as w, applied as 1 + w; Gemma-2/3: a norm on each sublayer's output
    head size    `head_dim` when given, else the class default (Gemma 256, Qwen3 128, GPT-OSS 64), else d / H
    eps          rms_norm_eps, class default 1e-5 (OLMo-2, GPT-OSS, Phi-3, Mixtral) or 1e-6
    tied         tie_word_embeddings, class default true for Gemma, false otherwise
"""

from __future__ import annotations

from ...errors import SpecError
from ...model.blocks import LayerSpec, MLPSpec
from ...spec import AttentionSpec
from .experts import experts
from .keys import head_sizes, layer_types, mlp_kind, partial_factor, read_flag, read_float, read_int, read_str, rope

HEAD_DIM_DEFAULTS = {"gemma": 256, "gemma2": 256, "gemma3_text": 256, "qwen3": 128, "gpt_oss": 64}
FIXED_BIASES = {"qwen2": "qkv", "mistral": "", "mixtral": "", "phi3": ""}
EPS_1E5 = ("olmo2", "gpt_oss", "phi3", "mixtral")
WINDOW_EVERY_LAYER = ("mistral", "mixtral", "phi3")
MODEL_TYPES = (
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "olmo2",
    "phi3", "gpt_oss",
)  # fmt: skip


def _attention_variant(cfg: dict, mt: str, eps: float) -> dict:
    variant = {}
    if mt in ("qwen3", "qwen3_moe", "gemma3_text"):
        variant = {"qk_norm": "rms_head", "norm_eps": eps}
    elif mt == "olmo2":
        variant = {"qk_norm": "rms_all", "norm_eps": eps}
    if mt == "gpt_oss":
        variant["sinks"] = True
    if mt == "gemma2":
        variant["softcap"] = read_float(cfg, "attn_logit_softcapping", default=0.0)
    return variant


def _windows(cfg: dict, mt: str, n_layers: int) -> list[int]:
    """The sliding window of every layer (0 = full attention)."""
    window = read_int(cfg, "sliding_window", default=0, minimum=0)
    types = layer_types(cfg, n_layers)
    if mt in ("qwen2", "qwen3", "qwen3_moe"):
        window = window if read_flag(cfg, "use_sliding_window", False) else 0
        if window and "layer_types" not in cfg:
            first = read_int(cfg, "max_window_layers", default=28, minimum=0)
            types = ["sliding_attention" if i >= first else "full_attention" for i in range(n_layers)]
    if mt == "gemma2" and "layer_types" not in cfg:
        types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layers)]
    every = mt in WINDOW_EVERY_LAYER
    return [window if window and (every or t == "sliding_attention") else 0 for t in types]


def _mlps(cfg: dict, mt: str, n_layers: int, not_modelled: list) -> list:
    """Every block's MLP: dense, or routed where the config has experts (Qwen3-MoE: dense in
    mlp_only_layers and where (i + 1) % decoder_sparse_step != 0, Qwen3MoeDecoderLayer)."""
    activation = read_str(cfg, "hidden_act", "hidden_activation", default="silu")
    bias = read_flag(cfg, "mlp_bias", False) or mt == "gpt_oss"
    n_experts = read_int(cfg, "num_local_experts", "num_experts", default=0, minimum=0)
    if not n_experts:
        return [MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(activation, True), bias)] * n_layers
    width = read_int(cfg, "moe_intermediate_size", "intermediate_size")
    top_k = read_int(cfg, "num_experts_per_tok", "experts_per_token")
    routed = experts(cfg, mt, n_experts, top_k, width, activation, not_modelled)
    if mt != "qwen3_moe":
        return [routed] * n_layers
    step = read_int(cfg, "decoder_sparse_step", default=1)
    dense_layers = cfg.get("mlp_only_layers") or []
    if not isinstance(dense_layers, list) or not all(isinstance(i, int) for i in dense_layers):
        raise SpecError("mlp_only_layers", f"must be a list of layer indices, got {dense_layers!r}")
    dense = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(activation, True), bias)
    return [routed if i not in dense_layers and (i + 1) % step == 0 else dense for i in range(n_layers)]


def llama_family(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(every block, the ModelSpec fields) of a config of the family."""
    d, H, G, k = head_sizes(cfg, HEAD_DIM_DEFAULTS.get(mt))
    n_layers = read_int(cfg, "num_hidden_layers")
    theta = rope(cfg)
    p = int(k * partial_factor(cfg)) // 2 * 2
    biases = FIXED_BIASES.get(mt, "qkvo" if read_flag(cfg, "attention_bias", mt == "gpt_oss") else "")
    eps = read_float(cfg, "rms_norm_eps", default=1e-5 if mt in EPS_1E5 else 1e-6)
    variant = _attention_variant(cfg, mt, eps)
    local_theta = read_float(cfg, "rope_local_base_freq", default=10000.0) if mt == "gemma3_text" else theta
    not_modelled: list = []
    mlps = _mlps(cfg, mt, n_layers, not_modelled)
    layers = []
    for window, mlp in zip(_windows(cfg, mt, n_layers), mlps, strict=True):
        attention = AttentionSpec(
            d_model=d, n_heads=H, n_kv_heads=G, d_head_qk=k, rope_dims=p, biases=biases, causal=True,
            rope_base=local_theta if window else theta, sliding_window=window, **variant,
        )  # fmt: skip
        layers.append(LayerSpec(attention, mlp))
    gemma = mt.startswith("gemma")
    fields = {
        "positions": "rope", "norm": "rmsnorm", "norm_bias": False, "norm_eps": eps, "gemma_gain": gemma,
        "tied": read_flag(cfg, "tie_word_embeddings", gemma), "output_norms": mt in ("gemma2", "gemma3_text"),
        "not_modelled": tuple(not_modelled),
    }  # fmt: skip
    return layers, fields


MAPPERS = dict.fromkeys(MODEL_TYPES, llama_family)
