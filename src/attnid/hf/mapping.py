"""A Hugging Face `config.json` -> the attention spec of every layer and the model facts.

This is the one place where `transformers` config keys meet this project's vocabulary. It reads
the published file as a plain mapping (no `transformers` import, no network), so a legacy key
that a `transformers` config class would silently ignore (Falcon's `n_head`, `n_head_kv`,
`n_layer`) is still read here. What the code of a model class fixes rather than its config is
written down per model type:

    biases      Qwen2: q, k, v (never o); GPT-2, Phi, BLOOM, BERT, GPT-NeoX (attention_bias):
                all four; GPT-J, Mistral, Mixtral, Gemma, Phi-3: none; Llama/Qwen3/OLMo-2/
                GPT-OSS `attention_bias`: all four (it also biases o_proj); Falcon `bias`: all four
    partial     GPT-NeoX `rotary_pct`, Phi `partial_rotary_factor`, GPT-J `rotary_dim`
    head size   `head_dim` when given (Gemma: 256 with d/H = 192), else d_model / n_heads
    variants    Qwen3, Gemma-3: per-head q/k RMSNorm with one gain shared by all heads;
                OLMo-2: q/k RMSNorm across all heads; Phi `qk_layernorm`: per-head q/k LayerNorm;
                GPT-OSS: attention sinks; Gemma-2: logit softcapping; sliding windows
                (Mistral, Gemma-2/3, GPT-OSS, Phi-3); ALiBi (BLOOM, Falcon `alibi`);
                DeepSeek-V2/V3: multi-head latent attention

A feature the counting does not model is refused with a SpecError naming the config key, so the
caller never sees a wrong number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..spec import AttentionSpec, SpecError

# RoPE variants that only rescale or re-space the frequencies (distinct, generic) or the scores:
# the count assumes distinct frequencies omega_i not in pi Z, which these keep.
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope")


@dataclass(frozen=True)
class MLPFacts:
    """The feed-forward block of one layer."""

    activation: str  # config's activation name: gelu, gelu_new, relu, silu, gelu_pytorch_tanh, ...
    gated: bool  # gate and up projections (SwiGLU/GeGLU) or one up projection
    d_hidden: int  # hidden units of one expert (or of the dense MLP)
    bias: bool
    n_experts: int = 0  # routed experts (0 = dense)
    experts_per_token: int = 0
    n_shared_experts: int = 0  # always-on experts (DeepSeek)


@dataclass(frozen=True)
class BlockFacts:
    """One transformer block: its attention layer and its MLP."""

    attention: AttentionSpec
    mlp: MLPFacts


@dataclass(frozen=True)
class ModelFacts:
    """What a whole-model count needs to know about a `config.json`, in this project's words."""

    model_type: str
    vocab_size: int
    d_model: int
    max_positions: int | None
    positions: str  # "rope" | "learned" | "alibi" | "none"
    tied_embeddings: bool
    norm: str  # "layernorm" | "rmsnorm" | "rmsnorm_1p" (Gemma's gain 1 + w)
    norm_bias: bool  # LayerNorm with a bias
    norm_eps: float
    post_ln: bool  # normalise after the residual add (BERT) rather than before the block
    parallel_blocks: bool  # attention and MLP read the same input (GPT-J, NeoX, Falcon, Phi)
    final_norm: bool
    blocks: tuple[BlockFacts, ...]
    token_types: int = 0  # BERT's segment embeddings
    embedding_norm: bool = False  # a LayerNorm right after the embeddings (BERT, BLOOM)
    logit_softcap: float = 0.0  # Gemma-2 final logits cap * tanh(z / cap)

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    @property
    def layer_specs(self) -> tuple[AttentionSpec, ...]:
        return tuple(b.attention for b in self.blocks)


def load_config(path) -> dict:
    """The mapping of a `config.json` file; a multimodal config's `text_config` is merged in."""
    path = Path(path)
    try:
        cfg = json.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError("hf_config", f"no such file: {path}") from None
    except json.JSONDecodeError as err:
        raise SpecError("hf_config", f"{path} is not valid JSON ({err})") from None
    if not isinstance(cfg, dict):
        raise SpecError("hf_config", f"{path} does not hold a JSON object")
    return cfg


def _text(cfg: dict) -> dict:
    """Gemma-3 and other multimodal configs keep the language model under `text_config`."""
    if isinstance(cfg.get("text_config"), dict):
        return {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type", cfg.get("model_type"))}
    return cfg


def _get(cfg: dict, *keys, default=None, required=True):
    """The value of the first key present; a missing required key is a SpecError naming the first."""
    for key in keys:
        if key in cfg and cfg[key] is not None:
            return cfg[key]
    if required and default is None:
        raise SpecError(keys[0], "missing from the config")
    return default


def _rope(cfg: dict) -> tuple[float, str]:
    """(rope_theta, rope_type) from the old top-level keys or the new `rope_parameters`."""
    params = cfg.get("rope_parameters") or {}
    scaling = cfg.get("rope_scaling") or {}
    theta = params.get("rope_theta", cfg.get("rope_theta", cfg.get("rotary_emb_base", cfg.get("rope_base", 10000.0))))
    kind = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if kind not in ROPE_TYPES:
        raise SpecError("rope_scaling.rope_type", f"{kind!r} is not modelled; known: {', '.join(ROPE_TYPES)}")
    return float(theta), kind


def _partial_factor(cfg: dict, key: str = "partial_rotary_factor", default: float = 1.0) -> float:
    """The rotated share of a head, read from the key the model class reads (GPT-NeoX ignores a top-level
    `partial_rotary_factor` and reads `rotary_pct`, default 0.25; Phi defaults to 0.5)."""
    params = cfg.get("rope_parameters") or {}
    if params.get("partial_rotary_factor") is not None:
        return float(params["partial_rotary_factor"])
    return float(cfg[key]) if cfg.get(key) is not None else default


def _refuse_if(cfg: dict, key: str, bad, why: str) -> None:
    if key in cfg and cfg[key] is not None and bad(cfg[key]):
        raise SpecError(key, f"{cfg[key]!r}: {why}")


# --------------------------------------------------------------------------------------------
# Per model type: (attention spec of layer i, MLP of layer i, model facts)
# --------------------------------------------------------------------------------------------


# head_dim where a config leaves it out: the class default (Gemma 256, Qwen3 128, GPT-OSS 64), not d / H.
HEAD_DIM_DEFAULTS = {"gemma": 256, "gemma2": 256, "gemma3_text": 256, "qwen3": 128, "gpt_oss": 64}


def _sizes(cfg: dict, d_key="hidden_size", h_key="num_attention_heads", kv_key="num_key_value_heads"):
    d = int(_get(cfg, d_key))
    H = int(_get(cfg, h_key))
    G = int(_get(cfg, kv_key, default=H))
    k = cfg.get("head_dim", HEAD_DIM_DEFAULTS.get(cfg.get("model_type")))
    k = int(k) if k else None
    if k is None and d % H:
        raise SpecError("head_dim", f"missing, and hidden size {d} is not divisible by {H} heads")
    return d, H, G, k or d // H


def _layer_types(cfg: dict, n_layers: int) -> list[str]:
    """'full_attention' / 'sliding_attention' per layer, from `layer_types` or Gemma's pattern keys."""
    types = cfg.get("layer_types")
    if types:
        if len(types) != n_layers:
            raise SpecError("layer_types", f"has {len(types)} entries for {n_layers} layers")
        bad = sorted(set(types) - {"full_attention", "sliding_attention"})
        if bad:
            raise SpecError("layer_types", f"{bad[0]!r} is not modelled")
        return list(types)
    pattern = cfg.get("sliding_window_pattern")
    if pattern:  # Gemma-3: every pattern-th layer is global
        return ["full_attention" if (i + 1) % int(pattern) == 0 else "sliding_attention" for i in range(n_layers)]
    return ["full_attention"] * n_layers


def _llama_like(cfg: dict, mt: str):
    """Llama, Mistral, Mixtral, Qwen2/3, Gemma 1-3, OLMo-2, Phi-3, GPT-OSS: the decoder family of q/k/v/o_proj."""
    d, H, G, k = _sizes(cfg)
    n_layers = int(_get(cfg, "num_hidden_layers"))
    theta, _ = _rope(cfg)
    p = int(k * _partial_factor(cfg)) // 2 * 2
    bias_flag = bool(cfg.get("attention_bias", mt == "gpt_oss"))  # the class defaults: True for GPT-OSS only
    # Fixed in code: Qwen2 q/k/v only; Mistral, Mixtral, Phi-3 none; the others follow attention_bias (o_proj too).
    biases = {"qwen2": "qkv", "mistral": "", "mixtral": "", "phi3": ""}.get(mt, "qkvo" if bias_flag else "")
    eps = float(cfg.get("rms_norm_eps", 1e-5 if mt in ("olmo2", "gpt_oss", "phi3", "mixtral") else 1e-6))
    variant = {}
    if mt in ("qwen3", "qwen3_moe", "gemma3_text"):
        variant = {"qk_norm": "rms_head", "norm_eps": eps}
    elif mt == "olmo2":
        variant = {"qk_norm": "rms_all", "norm_eps": eps}
    if mt == "gpt_oss":
        variant["sinks"] = True
    if mt == "gemma2":
        variant["softcap"] = float(cfg.get("attn_logit_softcapping") or 0.0)
    window = cfg.get("sliding_window")
    types = _layer_types(cfg, n_layers)
    if mt in ("qwen2", "qwen3", "qwen3_moe"):  # a window only with use_sliding_window, from max_window_layers on
        window = window if cfg.get("use_sliding_window", False) else None
        if window and "layer_types" not in cfg:
            first = int(cfg.get("max_window_layers", 28))
            types = ["sliding_attention" if i >= first else "full_attention" for i in range(n_layers)]
    if mt == "gemma2" and "layer_types" not in cfg:  # Gemma-2 alternates local and global, local first
        types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n_layers)]
    uses_window = window and mt in ("mistral", "mixtral", "phi3")  # every layer
    local_theta = (
        float(cfg.get("rope_local_base_freq", 10000.0)) if mt == "gemma3_text" else theta
    )  # Gemma-3 local layers
    specs = []
    for i in range(n_layers):
        w = int(window) if window and (uses_window or types[i] == "sliding_attention") else 0
        specs.append(
            AttentionSpec(
                d_model=d, n_heads=H, n_kv_heads=G, d_head_qk=k, rope_dims=p, biases=biases, causal=True,
                rope_base=local_theta if w else theta, sliding_window=w, **variant,
            )
        )  # fmt: skip
    gated = True
    act = cfg.get("hidden_act") or cfg.get("hidden_activation") or "silu"
    n_experts = int(cfg.get("num_local_experts") or cfg.get("num_experts") or 0)
    hidden = int(cfg.get("moe_intermediate_size") or cfg.get("intermediate_size") or 0) if n_experts else None
    hidden = hidden or int(_get(cfg, "intermediate_size"))
    mlp = MLPFacts(
        act, gated, hidden, bool(cfg.get("mlp_bias", False)) or mt == "gpt_oss", n_experts,
        int(cfg.get("num_experts_per_tok") or cfg.get("experts_per_token") or 0) if n_experts else 0,
    )  # fmt: skip
    norm = "rmsnorm_1p" if mt.startswith("gemma") else "rmsnorm"
    facts = {
        "positions": "rope", "norm": norm, "norm_bias": False, "norm_eps": eps, "post_ln": False, "parallel_blocks": False,
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", mt.startswith("gemma"))),
        "logit_softcap": float(cfg.get("final_logit_softcapping") or 0.0),
    }  # fmt: skip
    return specs, [mlp] * n_layers, facts


def _deepseek(cfg: dict, mt: str):
    """DeepSeek-V2/V3: multi-head latent attention; the first `first_k_dense_replace` layers have a dense MLP."""
    d, H = int(_get(cfg, "hidden_size")), int(_get(cfg, "num_attention_heads"))
    n_layers = int(_get(cfg, "num_hidden_layers"))
    theta, _ = _rope(cfg)
    nope, rope = int(_get(cfg, "qk_nope_head_dim")), int(_get(cfg, "qk_rope_head_dim"))
    v = int(_get(cfg, "v_head_dim"))
    bias = bool(cfg.get("attention_bias", False))
    spec = AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=H, d_head_qk=nope + rope, d_head_v=v, rope_dims=rope,
        biases="qkvo" if bias else "", causal=True, rope_base=theta,
        kv_lora_rank=int(_get(cfg, "kv_lora_rank")), q_lora_rank=int(cfg.get("q_lora_rank") or 0),
        norm_eps=1e-6,  # the latent RMSNorms take the class default, not rms_norm_eps
    )  # fmt: skip
    act = cfg.get("hidden_act", "silu")
    dense = MLPFacts(act, True, int(_get(cfg, "intermediate_size")), False)
    moe = MLPFacts(
        act, True, int(_get(cfg, "moe_intermediate_size")), False, int(_get(cfg, "n_routed_experts")),
        int(_get(cfg, "num_experts_per_tok")), int(cfg.get("n_shared_experts") or 0),
    )  # fmt: skip
    first_dense = int(cfg.get("first_k_dense_replace", 0))
    mlps = [dense if i < first_dense else moe for i in range(n_layers)]
    facts = {
        "positions": "rope", "norm": "rmsnorm", "norm_bias": False, "norm_eps": float(cfg.get("rms_norm_eps", 1e-6)),
        "post_ln": False, "parallel_blocks": False, "tied_embeddings": bool(cfg.get("tie_word_embeddings", False)),
    }  # fmt: skip
    return [spec] * n_layers, mlps, facts


def _gpt2(cfg: dict, mt: str):
    _refuse_if(cfg, "add_cross_attention", bool, "cross-attention is not self-attention")
    d, H, n_layers = int(_get(cfg, "n_embd", "hidden_size")), int(_get(cfg, "n_head")), int(_get(cfg, "n_layer"))
    spec = AttentionSpec(d_model=d, n_heads=H, biases="qkvo", causal=True)  # Conv1D c_attn and c_proj carry biases
    mlp = MLPFacts(cfg.get("activation_function", "gelu_new"), False, int(cfg.get("n_inner") or 4 * d), True)
    facts = {
        "positions": "learned", "norm": "layernorm", "norm_bias": True, "norm_eps": float(cfg.get("layer_norm_epsilon", 1e-5)),
        "post_ln": False, "parallel_blocks": False, "tied_embeddings": bool(cfg.get("tie_word_embeddings", True)),
    }  # fmt: skip
    return [spec] * n_layers, [mlp] * n_layers, facts


def _gptj(cfg: dict, mt: str):
    d, H, n_layers = int(_get(cfg, "n_embd", "hidden_size")), int(_get(cfg, "n_head")), int(_get(cfg, "n_layer"))
    p = int(cfg.get("rotary_dim") or d // H)  # rotary_dim null means the whole head
    spec = AttentionSpec(d_model=d, n_heads=H, rope_dims=p, causal=True)  # q/k/v/out_proj without bias
    mlp = MLPFacts(cfg.get("activation_function", "gelu_new"), False, int(cfg.get("n_inner") or 4 * d), True)
    facts = {
        "positions": "rope", "norm": "layernorm", "norm_bias": True, "norm_eps": float(cfg.get("layer_norm_epsilon", 1e-5)),
        "post_ln": False, "parallel_blocks": True, "tied_embeddings": bool(cfg.get("tie_word_embeddings", False)),
    }  # fmt: skip
    return [spec] * n_layers, [mlp] * n_layers, facts


def _gpt_neox(cfg: dict, mt: str):
    d, H, _, k = _sizes(cfg)
    n_layers = int(_get(cfg, "num_hidden_layers"))
    theta, _ = _rope(cfg)
    p = int(k * _partial_factor(cfg, "rotary_pct", 0.25)) // 2 * 2
    bias = "qkvo" if cfg.get("attention_bias", True) else ""
    spec = AttentionSpec(d_model=d, n_heads=H, rope_dims=p, biases=bias, causal=True, rope_base=theta)
    mlp = MLPFacts(cfg.get("hidden_act", "gelu"), False, int(_get(cfg, "intermediate_size")), True)
    facts = {
        "positions": "rope", "norm": "layernorm", "norm_bias": True, "norm_eps": float(cfg.get("layer_norm_eps", 1e-5)),
        "post_ln": False, "parallel_blocks": bool(cfg.get("use_parallel_residual", True)),
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", False)),
    }  # fmt: skip
    return [spec] * n_layers, [mlp] * n_layers, facts


def _phi(cfg: dict, mt: str):
    d, H, G, k = _sizes(cfg)
    n_layers = int(_get(cfg, "num_hidden_layers"))
    theta, _ = _rope(cfg)
    p = int(k * _partial_factor(cfg, "partial_rotary_factor", 0.5)) // 2 * 2
    eps = float(cfg.get("layer_norm_eps", 1e-5))
    qk = {"qk_norm": "layernorm_head", "norm_eps": eps} if cfg.get("qk_layernorm") else {}
    spec = AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=G, d_head_qk=k, rope_dims=p, biases="qkvo", causal=True, rope_base=theta, **qk
    )
    mlp = MLPFacts(cfg.get("hidden_act", "gelu_new"), False, int(_get(cfg, "intermediate_size")), True)
    facts = {
        "positions": "rope", "norm": "layernorm", "norm_bias": True, "norm_eps": eps, "post_ln": False, "parallel_blocks": True,
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", False)),
    }  # fmt: skip
    return [spec] * n_layers, [mlp] * n_layers, facts


def _falcon(cfg: dict, mt: str):
    """Falcon and the legacy RefinedWeb(Model) configs, whose keys FalconConfig silently ignores."""
    d = int(_get(cfg, "hidden_size", "n_embed"))
    H = int(_get(cfg, "num_attention_heads", "n_head"))
    n_layers = int(_get(cfg, "num_hidden_layers", "n_layer"))
    new_arch = bool(cfg.get("new_decoder_architecture", mt == "RefinedWeb"))
    if new_arch:
        G = int(_get(cfg, "num_kv_heads", "n_head_kv", default=H))
    elif cfg.get("multi_query", True):
        G = 1
    else:
        G = int(cfg.get("num_kv_heads") or H)
    alibi = bool(cfg.get("alibi", False))
    theta, _ = _rope(cfg)
    spec = AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=G, rope_dims=0 if alibi else d // H, biases="qkvo" if cfg.get("bias") else "",
        causal=True, rope_base=theta, alibi=alibi,
    )  # fmt: skip
    mlp = MLPFacts(
        cfg.get("activation", "gelu"), False, int(cfg.get("ffn_hidden_size") or 4 * d), bool(cfg.get("bias"))
    )
    facts = {
        "positions": "alibi" if alibi else "rope", "norm": "layernorm", "norm_bias": True,
        "norm_eps": float(cfg.get("layer_norm_epsilon", 1e-5)), "post_ln": False,
        "parallel_blocks": new_arch or bool(cfg.get("parallel_attn", True)),
        "tied_embeddings": bool(cfg.get("tie_word_embeddings", True)),
    }  # fmt: skip
    return [spec] * n_layers, [mlp] * n_layers, facts


def _bloom(cfg: dict, mt: str):
    d = int(_get(cfg, "hidden_size", "n_embed"))
    H, n_layers = int(_get(cfg, "n_head", "num_attention_heads")), int(_get(cfg, "n_layer", "num_hidden_layers"))
    spec = AttentionSpec(d_model=d, n_heads=H, biases="qkvo", causal=True, alibi=True)
    mlp = MLPFacts("gelu", False, 4 * d, True)
    facts = {
        "positions": "alibi", "norm": "layernorm", "norm_bias": True, "norm_eps": float(cfg.get("layer_norm_epsilon", 1e-5)),
        "post_ln": False, "parallel_blocks": False, "tied_embeddings": bool(cfg.get("tie_word_embeddings", True)),
        "embedding_norm": True,  # word_embeddings_layernorm
    }  # fmt: skip
    return [spec] * n_layers, [mlp] * n_layers, facts


def _bert(cfg: dict, mt: str):
    _refuse_if(
        cfg,
        "position_embedding_type",
        lambda v: v != "absolute",
        "relative position embeddings add parameters to the scores",
    )
    _refuse_if(cfg, "is_decoder", bool, "decoder BERT is not modelled")
    d, H, _, _ = _sizes(cfg)
    n_layers = int(_get(cfg, "num_hidden_layers"))
    spec = AttentionSpec(d_model=d, n_heads=H, biases="qkvo")
    mlp = MLPFacts(cfg.get("hidden_act", "gelu"), False, int(_get(cfg, "intermediate_size")), True)
    facts = {
        "positions": "learned", "norm": "layernorm", "norm_bias": True, "norm_eps": float(cfg.get("layer_norm_eps", 1e-12)),
        "post_ln": True, "parallel_blocks": False, "tied_embeddings": bool(cfg.get("tie_word_embeddings", True)),
        "token_types": int(cfg.get("type_vocab_size", 2)), "final_norm": False, "embedding_norm": True,
    }  # fmt: skip
    return [spec] * n_layers, [mlp] * n_layers, facts


MAPPERS = {
    **dict.fromkeys(
        ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "olmo2"),
        _llama_like,
    ),
    "phi3": _llama_like,
    "gpt_oss": _llama_like,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gpt2": _gpt2,
    "gptj": _gptj,
    "gpt_neox": _gpt_neox,
    "phi": _phi,
    "falcon": _falcon,
    "RefinedWeb": _falcon,
    "RefinedWebModel": _falcon,
    "bloom": _bloom,
    "bert": _bert,
}
SUPPORTED_MODEL_TYPES = tuple(sorted(MAPPERS))


def model_facts(cfg: dict) -> ModelFacts:
    """ModelFacts (with every layer's AttentionSpec) of a config mapping; unmodelled features are refused by key."""
    cfg = _text(cfg)
    mt = cfg.get("model_type")
    if mt == "gemma3":
        mt = "gemma3_text"
    if mt not in MAPPERS:
        raise SpecError("model_type", f"{mt!r} is not mapped; supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
    _refuse_if(cfg, "is_encoder_decoder", bool, "encoder-decoder models are not modelled")
    specs, mlps, facts = MAPPERS[mt](cfg, mt)
    d = specs[0].d_model
    return ModelFacts(
        model_type=mt,
        vocab_size=int(_get(cfg, "vocab_size")),
        d_model=d,
        max_positions=cfg.get("max_position_embeddings", cfg.get("n_positions")),
        final_norm=facts.pop("final_norm", True),
        blocks=tuple(BlockFacts(s, m) for s, m in zip(specs, mlps, strict=True)),
        **facts,
    )


def attention_specs(cfg: dict) -> tuple[AttentionSpec, ...]:
    """The AttentionSpec of every layer of a config mapping."""
    return model_facts(cfg).layer_specs
