"""Reading a `config.json` mapping: typed values by key, and the key groups several model types share.

A config.json is untrusted input. Every value the mapping reads goes through one of the typed readers
here, which accept exactly the JSON types a `transformers` config writes (an integer field may not be
8.5 or "8"; a number may be an integer; a flag must be true or false) and otherwise raise a SpecError
naming the key and the value, never a traceback from deep inside.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

from ...errors import SpecError

# RoPE variants that only rescale or re-space the frequencies (distinct, generic) or the scores:
# the count assumes distinct frequencies omega_i not in pi Z, which these keep.
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "llama3", "longrope")
_MISSING = object()


def _lookup(cfg: dict, keys: tuple[str, ...]):
    """(key, value) of the first key present with a non-null value, else (keys[0], _MISSING)."""
    for key in keys:
        if cfg.get(key) is not None:
            return key, cfg[key]
    return keys[0], _MISSING


def read_int(cfg: dict, *keys: str, default=_MISSING, minimum: int | None = 1) -> int:
    """The integer value of the first key present; `default` when none is (a missing key without a
    default is a SpecError naming the first key); values below `minimum` are refused."""
    key, value = _lookup(cfg, keys)
    if value is _MISSING:
        if default is _MISSING:
            raise SpecError(key, "missing from the config")
        return default
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise SpecError(key, f"must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise SpecError(key, f"must be >= {minimum}, got {value}")
    return int(value)


def read_float(cfg: dict, *keys: str, default=_MISSING, positive: bool = False) -> float:
    """The finite float value of the first key present (an integer is a number too)."""
    key, value = _lookup(cfg, keys)
    if value is _MISSING:
        if default is _MISSING:
            raise SpecError(key, "missing from the config")
        return default
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise SpecError(key, f"must be a finite number, got {value!r}")
    if positive and not value > 0:
        raise SpecError(key, f"must be > 0, got {value!r}")
    return float(value)


def read_flag(cfg: dict, key: str, default: bool) -> bool:
    """A true/false value (null reads as the default)."""
    value = cfg.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise SpecError(key, f"must be true or false, got {value!r}")
    return value


def read_str(cfg: dict, *keys: str, default=_MISSING) -> str:
    """The string value of the first key present."""
    key, value = _lookup(cfg, keys)
    if value is _MISSING:
        if default is _MISSING:
            raise SpecError(key, "missing from the config")
        return default
    if not isinstance(value, str):
        raise SpecError(key, f"must be a string, got {value!r}")
    return value


def read_section(cfg: dict, key: str) -> dict:
    """A nested object (rope_parameters, rope_scaling), {} when absent."""
    value = cfg.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SpecError(key, f"must be an object, got {value!r}")
    return value


def refuse_if(cfg: dict, key: str, bad, why: str) -> None:
    """SpecError naming `key` when its value is present and bad(value)."""
    if cfg.get(key) is not None and bad(cfg[key]):
        raise SpecError(key, f"{cfg[key]!r}: {why}")


def _rope_section(cfg: dict, layer_type: str | None) -> dict:
    """`rope_parameters`, or its entry for `layer_type` where it holds one object per layer type (Gemma-3,
    OLMo-3: {"full_attention": {...}, "sliding_attention": {...}}; without a layer type, the full layers')."""
    params = read_section(cfg, "rope_parameters")
    nested = {k: v for k, v in params.items() if k in ("full_attention", "sliding_attention")}
    if not nested:
        return params
    return read_section(params, layer_type if layer_type in nested else "full_attention")


def rope(cfg: dict, layer_type: str | None = None) -> float:
    """rope_theta (of the layers of `layer_type`), from the new `rope_parameters` or the old top-level keys; an
    unmodelled rope_type is refused."""
    params, scaling = _rope_section(cfg, layer_type), read_section(cfg, "rope_scaling")
    if "rope_theta" in params:
        theta = read_float(params, "rope_theta", positive=True)
    else:
        theta = read_float(cfg, "rope_theta", "rotary_emb_base", "rope_base", default=10000.0, positive=True)
    kind = params.get("rope_type") or scaling.get("rope_type") or scaling.get("type") or "default"
    if kind not in ROPE_TYPES:
        raise SpecError("rope_scaling.rope_type", f"{kind!r} is not modelled; known: {', '.join(ROPE_TYPES)}")
    return theta


def partial_factor(
    cfg: dict, key: str = "partial_rotary_factor", default: float = 1.0, layer_type: str | None = None
) -> float:
    """The rotated share of a head, from the key the model class reads (GPT-NeoX ignores a top-level
    `partial_rotary_factor` and reads `rotary_pct`, default 0.25; Phi defaults to 0.5)."""
    params = _rope_section(cfg, layer_type)
    if params.get("partial_rotary_factor") is not None:
        factor = read_float(params, "partial_rotary_factor")
    else:
        factor = read_float(cfg, key, default=default)
    if not 0 <= factor <= 1:
        raise SpecError(key, f"must lie in [0, 1], got {factor!r}")
    return factor


def aliased(cfg: dict, aliases: dict) -> dict:
    """The config with each alias key (a config class's `attribute_map`: EXAONE's num_layers) read as the key it
    stands for, where that key is absent."""
    out = dict(cfg)
    for alias, key in aliases.items():
        if out.get(key) is None and out.get(alias) is not None:
            out[key] = out[alias]
    return out


def head_sizes(cfg: dict, head_dim_default: int | None = None) -> tuple[int, int, int, int]:
    """(d_model, heads, key/value heads, head size) from hidden_size, num_attention_heads,
    num_key_value_heads (default: the heads) and head_dim (default: the class default, else d / H)."""
    d = read_int(cfg, "hidden_size")
    H = read_int(cfg, "num_attention_heads")
    G = read_int(cfg, "num_key_value_heads", default=H)
    k = read_int(cfg, "head_dim", default=head_dim_default)
    if k is None and d % H:
        raise SpecError("head_dim", f"missing, and hidden size {d} is not divisible by {H} heads")
    return d, H, G, k or d // H


def layer_types(cfg: dict, n_layers: int) -> list[str]:
    """'full_attention' / 'sliding_attention' per layer, from `layer_types` or Gemma-3's pattern key."""
    types = cfg.get("layer_types")
    if types:
        if not isinstance(types, list) or len(types) != n_layers:
            raise SpecError("layer_types", f"must list one entry for each of the {n_layers} layers, got {types!r}")
        bad = sorted({str(t) for t in types} - {"full_attention", "sliding_attention"})
        if bad:
            raise SpecError("layer_types", f"{bad[0]!r} is not modelled")
        return list(types)
    pattern = read_int(cfg, "sliding_window_pattern", default=None)
    if pattern:  # Gemma-3: every pattern-th layer is global
        return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(n_layers)]
    return ["full_attention"] * n_layers


# activation name in a config -> the MLP kind of attnid.model.blocks (ungated)
UNGATED = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu"}
UNGATED |= {"relu2": "relu2", "silu": "silu", "swish": "silu"}


def mlp_kind(activation: str, gated: bool, key: str = "hidden_act") -> str:
    """The MLP kind (relu | gelu | relu2 | silu | swiglu | geglu | relu2glu) of an activation name, gated or not."""
    if gated:
        if activation in ("silu", "swish"):
            return "swiglu"
        if activation.startswith("gelu"):
            return "geglu"
        if activation == "relu2":
            return "relu2glu"
    elif activation in UNGATED:
        return UNGATED[activation]
    raise SpecError(key, f"MLP activation {activation!r} ({'gated' if gated else 'ungated'}) is not modelled")


def routed_layers(cfg: dict, n_layers: int, first_dense: int) -> list[bool]:
    """Which blocks route to experts: `mlp_layer_types` ('dense' / 'sparse' per layer) when given, else every
    block from first_k_dense_replace (default `first_dense`) on (DeepSeek-V3, GLM-4.5, EXAONE-MoE)."""
    kinds = cfg.get("mlp_layer_types")
    if kinds is None:
        first = read_int(cfg, "first_k_dense_replace", default=first_dense, minimum=0)
        return [i >= first for i in range(n_layers)]
    if not isinstance(kinds, list) or len(kinds) != n_layers or not set(kinds) <= {"dense", "sparse"}:
        raise SpecError("mlp_layer_types", f"must list 'dense' or 'sparse' for each of the {n_layers} layers")
    return [kind == "sparse" for kind in kinds]
