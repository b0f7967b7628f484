"""Gemma-4's text models (`gemma4_text`, `gemma4_unified_text`): their attention layers only. What the classes fix in
code (`transformers` 5.24, models/gemma4/modular_gemma4.py, Gemma4TextConfig; gemma4_unified reuses the attention):

    Gemma4TextAttention   q/k/v/o_proj biased by attention_bias; an RMSNorm with one gain shared by the heads on every
                          query and key head before RoPE (q_norm, k_norm: rms_head) and one without a gain on every
                          value head (v_norm, Gemma4RMSNorm(with_scale=False)); scores unscaled (scaling 1.0); causal
                          unless use_bidirectional_attention is "all" ("vision" is causal on text)
    layer_types           sliding_attention (window sliding_window) and full_attention (default: every sixth, and the
                          last); per_layer_config gives the full layers their own head_dim (global_head_dim, 512) and
                          key/value heads (num_global_key_value_heads, only with attention_k_eq_v)
    rope_parameters       per layer type: default on the whole head (sliding), "proportional" (full): int(f k / 2)
                          planes at base^(-2i/k), the rest unrotated: base^(p/k) on p dims
    attention_k_eq_v      the full layers' values are their keys before k_norm (no v_proj): not modelled (refused)
    num_kv_shared_layers  the last N layers have no k/v_proj and read the keys and values another layer stored:
                          only the layers before them are counted (the attention modules keep their order)
    gemma4_text           per-layer input embeddings (hidden_size_per_layer_input: an embedding table and a gated
                          projection into every block) and optional experts (enable_moe_block) beside the attention

Gemma-3n's text model (`gemma3n_text`, models/gemma3n/modular_gemma3n.py) has the same attention (Gemma3nTextAttention:
q/k norms with a gain shared by the heads, a gain-free v_norm, scaling 1.0, RoPE per layer type from rope_parameters,
the last num_kv_shared_layers reading other layers' keys and values) with no per_layer_config and one MLP width per
layer (intermediate_size a list); beside it AltUp streams (altup), LAUREL blocks (laurel), per-layer inputs and
activation sparsity: layers only.

A gain-free norm on the value heads leaves O(v) of GL(v) per group (`attnid.layer.counting_variants`); the whole-model
count refuses it (`attnid.model.counting.limits`) and its generators are not written (`attnid.gauge.sources`):
layers only.
"""

from __future__ import annotations

from ...errors import SpecError
from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .keys import head_sizes, read_flag, read_float, read_int, read_section

V_NORM_WHY = (
    "a gain-free RMSNorm on every value head: the whole-model count does not cover it (attnid.model.counting.limits)"
    " and its generators are not written (the attention layers are counted alone)"
)
PER_LAYER_WHY = "per-layer input embeddings: a table and a gated projection into every block: not modelled"
ALTUP_WHY = "AltUp's parallel streams, LAUREL's low-rank residual and activation sparsity in every block: not modelled"


def _overrides(cfg: dict) -> dict[int, dict]:
    """per_layer_config: layer index -> the keys it overrides (head_dim, num_key_value_heads)."""
    found = cfg.get("per_layer_config") or {}
    if not isinstance(found, dict):
        raise SpecError("per_layer_config", f"must map layer indices to overrides, got {found!r}")
    try:
        return {int(key): dict(value) for key, value in found.items()}
    except (TypeError, ValueError):
        raise SpecError("per_layer_config", f"must map layer indices to overrides, got {found!r}") from None


def _rotated(cfg: dict, kind: str, k: int) -> tuple[int, float]:
    """(rotated dims, RoPE base) of a layer of `kind` (module docstring)."""
    params = read_section(read_section(cfg, "rope_parameters"), kind)
    theta = read_float(params, "rope_theta", default=10000.0 if kind == "sliding_attention" else 1e6, positive=True)
    factor = read_float(params, "partial_rotary_factor", default=1.0)
    planes = int(factor * k // 2)
    rope_type = params.get("rope_type", "default")
    if rope_type == "proportional":
        return 2 * planes, theta ** (2 * planes / k)
    if rope_type != "default":
        raise SpecError(f"rope_parameters.{kind}.rope_type", f"{rope_type!r} is not modelled")
    return 2 * planes, theta


def gemma4_family(cfg: dict, mt: str) -> tuple[list, dict]:
    """(the counted layers' blocks, the ModelSpec fields) of a Gemma-4 text config: layers only (module docstring)."""
    d, H, G, k = head_sizes(cfg, 256)
    n_layers = read_int(cfg, "num_hidden_layers")
    if read_flag(cfg, "attention_k_eq_v", False):
        raise SpecError("attention_k_eq_v", "values that are the keys before their norm are not modelled")
    if cfg.get("use_bidirectional_attention") == "all":
        raise SpecError("use_bidirectional_attention", "'all': windows without a causal mask are not modelled")
    types = cfg.get("layer_types") or [("full_attention" if (i + 1) % 6 == 0 else "sliding_attention") for i in
                                       range(n_layers)]  # fmt: skip
    if not isinstance(types, list) or len(types) != n_layers:
        raise SpecError("layer_types", f"must list one entry for each of the {n_layers} layers, got {types!r}")
    shared = read_int(cfg, "num_kv_shared_layers", default=0, minimum=0)
    if shared >= n_layers:
        raise SpecError("num_kv_shared_layers", "every layer reads another's keys and values: nothing to count")
    eps = read_float(cfg, "rms_norm_eps", default=1e-6)
    window = read_int(cfg, "sliding_window", default=512)
    overrides, biases = _overrides(cfg), "qkvo" if read_flag(cfg, "attention_bias", False) else ""
    widths = cfg.get("intermediate_size")  # Gemma-3n: one width per layer; not counted (layers only)
    mlp = MLPSpec(read_int({"intermediate_size": widths[0] if isinstance(widths, list) else widths}, "intermediate_size"),
                  "geglu", False)  # fmt: skip
    layers = []
    for i, kind in enumerate(types[: n_layers - shared]):
        if kind not in ("sliding_attention", "full_attention"):
            raise SpecError("layer_types", f"{kind!r} is not modelled")
        k_i = overrides.get(i, {}).get("head_dim", k)
        p, base = _rotated(cfg, kind, k_i)
        attention = AttentionSpec(
            d_model=d, n_heads=H, n_kv_heads=overrides.get(i, {}).get("num_key_value_heads", G), d_head_qk=k_i,
            rope_dims=p, rope_base=base, biases=biases, causal=True, qk_norm="rms_head", v_norm=True, norm_eps=eps,
            sliding_window=window if kind == "sliding_attention" else 0,
        )  # fmt: skip
        layers.append(LayerSpec(attention, mlp))
    not_modelled = [("v_norm", V_NORM_WHY)]
    if shared:
        why = f"the last {shared} layers read the keys and values other layers stored: not counted"
        not_modelled.append(("num_kv_shared_layers", why))
    if cfg.get("hidden_size_per_layer_input"):
        not_modelled.append(("hidden_size_per_layer_input", PER_LAYER_WHY))
    if mt == "gemma3n_text":
        not_modelled.append(("altup_num_inputs", ALTUP_WHY))
    fields = {
        "positions": "rope", "norm": "rmsnorm", "norm_bias": False, "norm_eps": eps,
        "tied": read_flag(cfg, "tie_word_embeddings", True), "not_modelled": tuple(not_modelled),
    }  # fmt: skip
    return layers, fields


def tiny_layers(cfg: dict, mt: str) -> dict:
    """The self-check's tiny model (read by attnid.hf.tiny): a sliding layer (heads of 6, all rotated) and a full one
    (heads of 8, one proportional plane), no shared keys and values, per-layer inputs of 4 from 32 rows."""
    out = {
        "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
        "per_layer_config": {"1": {"head_dim": 8}}, "num_kv_shared_layers": 0,
    }  # fmt: skip
    if cfg.get("hidden_size_per_layer_input"):
        out |= {"hidden_size_per_layer_input": 4, "vocab_size_per_layer_input": 32}
    return out


def tiny_gemma3n(cfg: dict, mt: str) -> dict:
    """Gemma-3n's tiny model: a sliding and a full layer (no per_layer_config) with heads of 6, as Gemma-4's sliding
    one (heads of 2 hold one plane each: at the self-check's data the first half of its sequences leaves one direction
    of the full layer unresolved), no shared keys and values, per-layer inputs of 4 from 32 rows, two AltUp streams, a
    LAUREL rank of 2."""
    return {
        "num_hidden_layers": 2, "head_dim": 6, "layer_types": ["sliding_attention", "full_attention"], "num_kv_shared_layers": 0,
        "intermediate_size": [16, 16], "activation_sparsity_pattern": [0.95, 0.0], "hidden_size_per_layer_input": 4,
        "vocab_size_per_layer_input": 32, "altup_num_inputs": 2, "laurel_rank": 2,
    }  # fmt: skip


MAPPERS = dict.fromkeys(("gemma4_text", "gemma4_unified_text", "gemma3n_text"), gemma4_family)
TINY_LAYERS = {**dict.fromkeys(("gemma4_text", "gemma4_unified_text"), tiny_layers), "gemma3n_text": tiny_gemma3n}
