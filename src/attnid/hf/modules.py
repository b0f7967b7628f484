"""The real `transformers` attention modules, built from a (shrunk) config and run honestly in float64.

Three things make a float64 Jacobian of a Hugging Face module trustworthy without editing its code:

* :class:`attnid.float64.KeepFloat64`: the library's casts to float32 (softmax, q/k norms, rotary
  tables) become float64 ones, so a rank read at 1e-10 is not spoiled;
* eager attention (``config._attn_implementation = "eager"``): SDPA on a bare module silently
  drops GPT-OSS sinks and the sliding-window argument;
* inputs the model itself would give the module: masks from ``transformers.masking_utils``
  (causal, sliding window, bidirectional), position embeddings from the model's own rotary class,
  ALiBi from the model's own ``build_alibi_tensor``. Positions are spread (ids t * stride) so that
  RoPE's slow planes turn over a short sequence; the mask follows token order, not these ids.

:func:`shrink` turns a published config into a small one with the same flags (model type, biases,
partial rotary, q/k norms, sinks, softcapping, windows, ALiBi, latent ranks), and
:func:`build_module` returns a :class:`RealModule`: the module, its parameters as one flat vector, and
``forward(theta, x)`` for ``torch.func``.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from dataclasses import dataclass

import torch

from ..flat import FlatLayout
from ..float64 import DTYPE, KeepFloat64
from .mapping import model_spec

# model_type -> (modeling module, attention class, rotary class or None)
MODULES = {
    "llama": ("llama", "LlamaAttention", "LlamaRotaryEmbedding"),
    "mistral": ("mistral", "MistralAttention", "MistralRotaryEmbedding"),
    "mixtral": ("mixtral", "MixtralAttention", "MixtralRotaryEmbedding"),
    "qwen2": ("qwen2", "Qwen2Attention", "Qwen2RotaryEmbedding"),
    "qwen3": ("qwen3", "Qwen3Attention", "Qwen3RotaryEmbedding"),
    "qwen3_moe": ("qwen3_moe", "Qwen3MoeAttention", "Qwen3MoeRotaryEmbedding"),
    "gemma": ("gemma", "GemmaAttention", "GemmaRotaryEmbedding"),
    "gemma2": ("gemma2", "Gemma2Attention", "Gemma2RotaryEmbedding"),
    "gemma3_text": ("gemma3", "Gemma3Attention", "Gemma3RotaryEmbedding"),
    "olmo2": ("olmo2", "Olmo2Attention", "Olmo2RotaryEmbedding"),
    "phi": ("phi", "PhiAttention", "PhiRotaryEmbedding"),
    "phi3": ("phi3", "Phi3Attention", "Phi3RotaryEmbedding"),
    "gpt_oss": ("gpt_oss", "GptOssAttention", "GptOssRotaryEmbedding"),
    "deepseek_v2": ("deepseek_v2", "DeepseekV2Attention", "DeepseekV2RotaryEmbedding"),
    "deepseek_v3": ("deepseek_v3", "DeepseekV3Attention", "DeepseekV3RotaryEmbedding"),
    "gpt2": ("gpt2", "GPT2Attention", None),
    "gptj": ("gptj", "GPTJAttention", "GPTJRotaryEmbedding"),
    "gpt_neox": ("gpt_neox", "GPTNeoXAttention", "GPTNeoXRotaryEmbedding"),
    "falcon": ("falcon", "FalconAttention", "FalconRotaryEmbedding"),
    "bloom": ("bloom", "BloomAttention", None),
    "bert": ("bert", "BertAttention", None),
}


def _modern_keys(cfg: dict) -> dict:
    """Legacy Falcon (RefinedWeb) keys -> the keys FalconConfig reads (it ignores the old ones)."""
    mt = cfg.get("model_type")
    if mt not in ("RefinedWeb", "RefinedWebModel"):
        return dict(cfg)
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


def shrink(cfg: dict, d_model: int = 16, n_heads: int = 4, head_dim: int | None = None, window: int = 3) -> dict:
    """A small config with the flags of `cfg`: d_model, heads, KV heads (MHA stays MHA, MQA stays MQA, GQA -> 2
    groups), head size (one that differs from d_model / heads stays different), partial rotary -> half the head,
    sliding windows -> `window`, latent ranks -> 8, two layers, a small vocabulary."""
    cfg = _modern_keys({k: v for k, v in cfg.items() if not k.startswith("_")})
    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type", "gemma3_text")}
    if cfg.get("model_type") == "gemma3":
        cfg["model_type"] = "gemma3_text"
    spec = model_spec(cfg).layer_specs[0].attention
    mt = cfg["model_type"]
    partial = 0 < spec.rope_dims < spec.d_head_qk and spec.kv_lora_rank == 0
    fused = mt in ("gpt2", "gptj", "gpt_neox", "phi", "falcon", "bloom", "bert")  # head size must be d / H
    H = 2 if partial else n_heads  # partial rotary: head 8 of d 16, half of it rotated
    G = 1 if spec.n_kv_heads == 1 else (H if spec.n_kv_heads == spec.n_heads else 2)
    k = head_dim or (d_model // H if fused or spec.d_head_qk * spec.n_heads == spec.d_model else d_model // H + 2)
    out = dict(cfg)
    out.update(vocab_size=32, max_position_embeddings=4096, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    d_key = "n_embd" if mt in ("gpt2", "gptj") else "hidden_size"
    h_key = {"gpt2": "n_head", "gptj": "n_head", "bloom": "n_head"}.get(mt, "num_attention_heads")
    out[d_key], out[h_key] = d_model, H
    layers_key = {"gpt2": "n_layer", "gptj": "n_layer", "bloom": "n_layer"}.get(mt, "num_hidden_layers")
    out[layers_key] = 2
    if "layer_types" in out:
        out["layer_types"] = list(out["layer_types"][:2])
    if mt in ("gpt2", "gptj"):
        out["n_positions"] = 4096
    if "num_key_value_heads" in cfg or not fused:
        out["num_key_value_heads"] = G
    if mt == "falcon" and out.get("new_decoder_architecture"):
        out["num_kv_heads"] = G
    if not fused:
        out["head_dim"] = k
    if partial:
        if mt == "gptj":
            out["rotary_dim"] = k // 2
        else:  # GPT-NeoX reads rotary_pct, the others partial_rotary_factor
            out["rotary_pct" if mt == "gpt_neox" else "partial_rotary_factor"] = 0.5
            if isinstance(out.get("rope_parameters"), dict):
                out["rope_parameters"] = {**out["rope_parameters"], "partial_rotary_factor": 0.5}
    for key in ("intermediate_size", "moe_intermediate_size", "ffn_hidden_size", "n_inner"):
        if out.get(key):
            out[key] = 2 * d_model
    if out.get("sliding_window"):
        out["sliding_window"] = window
    if mt.startswith("deepseek"):
        out.update(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=2, v_head_dim=4)
        out["q_lora_rank"] = 8 if cfg.get("q_lora_rank") else None
        out.pop("head_dim", None)
        out.update(n_routed_experts=2, num_experts_per_tok=1, n_group=1, topk_group=1)
    if out.get("num_local_experts"):
        out.update(num_local_experts=2, num_experts_per_tok=1)
    return out


@dataclass
class RealModule:
    """A real attention module with its flat parameter vector; forward(theta, x) is a pure function."""

    model_type: str
    config: object  # the transformers config object
    module: torch.nn.Module
    names: list  # parameter names in flat order
    shapes: list
    theta: torch.Tensor  # (P,) float64
    extras: dict  # name -> builder of per-input keyword arguments
    keep_float64: bool = True  # False runs the library's own casts (to show what they do to a rank)

    def __post_init__(self):
        self.layout = FlatLayout(zip(self.names, self.shapes, strict=True), self.model_type)

    @property
    def n_params(self) -> int:
        return self.theta.numel()

    def forward(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Output (B, T, d) of the module at flat parameters theta (P,) on inputs x (B, T, d), in float64."""
        params = self.layout.unflatten(theta)
        kwargs = {key: make(x) for key, make in self.extras.items()}
        with KeepFloat64() if self.keep_float64 else contextlib.nullcontext():
            out = torch.func.functional_call(self.module, params, (x,), kwargs)
        return out[0] if isinstance(out, tuple) else out


def _config_object(cfg: dict, eps: float | None):
    from transformers import AutoConfig

    kwargs = {k: v for k, v in cfg.items() if k != "model_type" and not k.startswith("_")}
    if eps is not None:
        for key in ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon"):
            kwargs[key] = eps
    config = AutoConfig.for_model(cfg["model_type"], **kwargs)
    config._attn_implementation = "eager"
    return config


def build_module(cfg: dict, seed: int = 0, layer: int = 0, stride: int = 37, eps: float | None = None) -> RealModule:
    """The real attention module of layer `layer` of a (shrunk) config, random float64 weights from `seed`.

    Biases and norm gains are drawn like weights (a zero or unit default is not a generic point);
    `eps` overrides the norm epsilon of the config (0 makes the scale symmetries exact).
    """
    cfg = _modern_keys(cfg)
    mt = cfg["model_type"]
    if mt not in MODULES:
        raise ValueError(f"model_type: no real module known for {mt!r}")
    package, attn_name, rotary_name = MODULES[mt]
    lib = importlib.import_module(f"transformers.models.{package}.modeling_{package}")
    config = _config_object(cfg, eps)
    cls = getattr(lib, attn_name)
    accepted = inspect.signature(cls.__init__).parameters
    module = cls(config, layer_idx=layer) if "layer_idx" in accepted else cls(config)
    if mt == "bert":
        module.output.LayerNorm = torch.nn.Identity()  # the attention block alone: dense(context) + residual
    module = module.to(DTYPE).eval()
    if eps is not None:  # also the norms whose eps is fixed in code (DeepSeek's latent RMSNorms)
        for sub in module.modules():
            for attr in ("variance_epsilon", "eps"):
                if isinstance(getattr(sub, attr, None), float):
                    setattr(sub, attr, eps)
    gen = torch.Generator().manual_seed(int(seed))
    names, shapes, values = [], [], []
    for name, p in module.named_parameters():
        fan_in = p.shape[-1] if p.dim() == 2 else 1
        std = fan_in**-0.5 if p.dim() == 2 else 0.5
        sample = torch.randn(p.shape, generator=gen, dtype=DTYPE) * std
        if p.dim() == 1 and ("norm" in name or "layernorm" in name.lower()) and "bias" not in name:
            sample = 1.0 + sample  # a gain near one
        names.append(name)
        shapes.append(tuple(p.shape))
        values.append(sample.reshape(-1))
    theta = torch.cat(values)
    layer_type = (getattr(config, "layer_types", None) or ["full_attention"] * (layer + 1))[layer]
    extras = _extras(mt, lib, rotary_name, config, module, stride, layer_type)
    return RealModule(mt, config, module, names, shapes, theta, extras)


def _extras(mt, lib, rotary_name, config, module, stride, layer_type) -> dict:
    """Keyword arguments the model would pass its attention module: position embeddings, mask, ALiBi."""
    from transformers import masking_utils

    params = inspect.signature(module.forward).parameters
    extras = {}
    causal = mt != "bert"
    window = getattr(module, "sliding_window", None)
    if mt in ("mistral", "mixtral", "phi3", "qwen2") and getattr(config, "sliding_window", None):
        window = window or config.sliding_window

    def mask(x):
        B, T, _ = x.shape
        with KeepFloat64():
            if not causal:
                return masking_utils.create_bidirectional_mask(
                    config, x, attention_mask=torch.ones(B, T, dtype=torch.long)
                )
            make = masking_utils.create_sliding_window_causal_mask if window else masking_utils.create_causal_mask
            if window:
                config.sliding_window = window
            return make(config, x, None, None, allow_is_causal_skip=False)

    extras["attention_mask"] = mask
    if rotary_name is not None and "position_embeddings" in params:
        rotary = getattr(lib, rotary_name)(config).to(DTYPE)
        takes_type = "layer_type" in inspect.signature(rotary.forward).parameters

        def position_embeddings(x):
            ids = (torch.arange(x.shape[1]) * stride)[None].expand(x.shape[0], -1)
            with KeepFloat64():
                return rotary(x, ids, layer_type) if takes_type else rotary(x, ids)

        extras["position_embeddings"] = position_embeddings
    if "alibi" in params:

        def alibi(x):
            if mt == "falcon" and not config.alibi:
                return None
            B, T, _ = x.shape
            with KeepFloat64():
                return lib.build_alibi_tensor(torch.ones(B, T, dtype=torch.long), config.num_attention_heads, DTYPE)

        extras["alibi"] = alibi
    if "residual" in params:
        extras["residual"] = torch.zeros_like
    if "position_ids" in params and mt == "falcon":
        extras["position_ids"] = lambda x: (torch.arange(x.shape[1]) * stride)[None].expand(x.shape[0], -1)
    return extras
