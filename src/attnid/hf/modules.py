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
from .mapping import REAL_ATTENTION, class_config, model_spec
from .mapping.real_attention import RealAttention

def shrink(cfg: dict, d_model: int = 16, n_heads: int = 4, head_dim: int | None = None, window: int = 3) -> dict:
    """A small config with the flags of `cfg`: d_model, heads, KV heads (MHA stays MHA, MQA stays MQA, GQA -> 2
    groups), head size (one that differs from d_model / heads stays different), partial rotary -> half the head,
    sliding windows -> `window`, two layers, a small vocabulary; the family's own edits (its RealAttention's
    shrink: latent ranks -> 8, Falcon's KV-head key, GPT-2's position table)."""
    cfg = class_config(cfg)
    spec = model_spec(cfg).layer_specs[0].attention
    real = real_attention(cfg)
    partial = 0 < spec.rope_dims < spec.d_head_qk and spec.kv_lora_rank == 0
    H = 2 if partial else n_heads  # partial rotary: head 8 of d 16, half of it rotated
    G = 1 if spec.n_kv_heads == 1 else (H if spec.n_kv_heads == spec.n_heads else 2)
    k = head_dim or (d_model // H if real.fused or spec.d_head_qk * spec.n_heads == spec.d_model else d_model // H + 2)
    out = dict(cfg)
    out.update(vocab_size=32, max_position_embeddings=4096, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    width_key, heads_key, layers_key = real.keys
    out[width_key], out[heads_key], out[layers_key] = d_model, H, 2
    if "layer_types" in out:
        out["layer_types"] = list(out["layer_types"][:2])
    if "num_key_value_heads" in cfg or not real.fused:
        out["num_key_value_heads"] = G
    if not real.fused:
        out["head_dim"] = k
    if partial:
        real.partial_rotary(out, k)
    for key in ("intermediate_size", "moe_intermediate_size", "ffn_hidden_size", "n_inner"):
        if out.get(key):
            out[key] = 2 * d_model
    if out.get("sliding_window"):
        out["sliding_window"] = window
    if real.shrink is not None:
        real.shrink(out, cfg, G)
    if out.get("num_local_experts"):
        out.update(num_local_experts=2, num_experts_per_tok=1)
    return out


def real_attention(cfg: dict) -> RealAttention:
    """The RealAttention of a (class-keyed) config's model type, or a ValueError naming it."""
    mt = cfg["model_type"]
    if mt not in REAL_ATTENTION:
        raise ValueError(f"model_type: no real module known for {mt!r}")
    return REAL_ATTENTION[mt]


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
    cfg = class_config(cfg)
    real = real_attention(cfg)
    lib = importlib.import_module(f"transformers.models.{real.package}.modeling_{real.package}")
    config = _config_object(cfg, eps)
    cls = getattr(lib, real.attention)
    accepted = inspect.signature(cls.__init__).parameters
    module = cls(config, layer_idx=layer) if "layer_idx" in accepted else cls(config)
    if real.attention_block_only:
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
    extras = _extras(real, lib, config, module, stride, layer_type)
    return RealModule(cfg["model_type"], config, module, names, shapes, theta, extras)


def _extras(real: RealAttention, lib, config, module, stride, layer_type) -> dict:
    """Keyword arguments the model would pass its attention module: position embeddings, mask, ALiBi."""
    from transformers import masking_utils

    params = inspect.signature(module.forward).parameters
    extras = {}
    causal = real.causal
    window = getattr(module, "sliding_window", None)
    if real.window_from_config and getattr(config, "sliding_window", None):
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
    if real.rotary is not None and "position_embeddings" in params:
        rotary = getattr(lib, real.rotary)(config).to(DTYPE)
        takes_type = "layer_type" in inspect.signature(rotary.forward).parameters

        def position_embeddings(x):
            ids = (torch.arange(x.shape[1]) * stride)[None].expand(x.shape[0], -1)
            with KeepFloat64():
                return rotary(x, ids, layer_type) if takes_type else rotary(x, ids)

        extras["position_embeddings"] = position_embeddings
    if "alibi" in params:

        def alibi(x):
            if not getattr(config, "alibi", True):  # Falcon without ALiBi
                return None
            B, T, _ = x.shape
            with KeepFloat64():
                return lib.build_alibi_tensor(torch.ones(B, T, dtype=torch.long), config.num_attention_heads, DTYPE)

        extras["alibi"] = alibi
    if "residual" in params:
        extras["residual"] = torch.zeros_like
    if "position_ids" in params:  # Falcon's
        extras["position_ids"] = lambda x: (torch.arange(x.shape[1]) * stride)[None].expand(x.shape[0], -1)
    return extras
