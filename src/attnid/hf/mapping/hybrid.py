"""Hybrid decoders: softmax attention in some layers, a recurrence, state-space model, linear attention or short
convolution in the others. Only the softmax-attention layers are described (one block per attention layer, in
order); what lies between them is named in `not_modelled`, so the whole model is refused and its attention layers
are counted ("layers only"). Each type, from its `transformers` 5.24 code (models/<type>/modular_<type>.py, else
modeling_<type>.py, and its config class):

    jamba             Mamba layers; JambaAttention (Llama's without RoPE or biases) where
                      i % attn_layer_period == attn_layer_offset; experts every expert_layer_period-th layer
    bamba             Mamba-2 layers; BambaAttention (Llama's, attention_bias on all four, partial RoPE, default
                      partial_rotary_factor 0.5) in attn_layer_indices
    falcon_h1         every layer a Mamba-2 mixer in parallel with FalconH1Attention (Llama's, keys times
                      key_multiplier, a nonzero constant absorbed by W_K), muP multipliers around both
    lfm2              gated short convolutions (Lfm2ShortConv); Lfm2Attention (no biases, per-head q/k RMSNorm) in
                      the layers layer_types (else full_attn_idxs) names
    lfm2_moe          LFM2's layers (Lfm2MoeAttention = Lfm2Attention) with experts, where layer_types says;
                      Lfm2MoeConfig names none by default (its model does not build): DEFAULT_GAPS
    lfm3              LFM2's convolutions; Lfm3Attention (Qwen3's: per-head q/k RMSNorm, attention_bias) with a
                      sigmoid gate per head (g_proj, use_attention_gate), full and sliding layers by layer_types;
                      RoPE per layer type, the full layers' "proportional" RoPE rotating int(f k / 2) planes at
                      frequencies base^(-2i/k) (the rest at frequency 0: unrotated), i.e. base^(p/k) on p dims
    nemotron_h        Mamba-2, MLP and expert layers; NemotronHAttention (no RoPE, no biases) where
                      layers_block_type says full_attention (legacy hybrid_override_pattern: '*')
    recurrent_gemma   Griffin: RG-LRU recurrent blocks, a local attention block (window attention_window_size,
                      partial RoPE 0.5, o_proj always biased, q/k/v by attention_bias) where block_types (cycled)
                      says attention
    minimax           lightning (linear) attention layers; MiniMaxAttention (Mixtral's: no biases, the window on
                      every layer when sliding_window is set) where layer_types says full_attention
    olmo_hybrid       Gated DeltaNet layers; OlmoHybridAttention (OLMo-3's: q/k RMSNorm across all heads,
                      attention_bias on all four) on full_attention layers, RoPE only when rope_parameters has a
                      rope_theta (released checkpoints: none)
    lara_mini         Gated DeltaNet layers; LaraMiniAttention (Qwen3's) on full_attention layers without RoPE and
                      on sliding_attention layers with RoPE and the window
    qwen3_next,       Gated DeltaNet layers; gated attention (Qwen3NextAttention, Qwen3_5Attention): q_proj gives
    qwen3_5(_text),   each head its query and a gate of head_dim, o_h = attn_h * sigmoid(gate_h) (an element
    qwen3_5_moe(_text)  gate), per-head q/k RMSNorm (gain 1 + w), partial RoPE (default 0.25; Qwen3.5's M-RoPE
                      turns every section by the same text position ids), on full_attention layers (Qwen3-Next's
                      default: every full_attention_interval-th, 4)

The rotary classes take int(k f) dims and a frequency for every other one of them, then rotate two dims per
frequency (an odd int(k f) rounds up), as in attnid.hf.mapping.routed.
"""

from __future__ import annotations

import math

from ...errors import SpecError
from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .keys import head_sizes, partial_factor, read_flag, read_float, read_int, read_section, rope

ATTENTION = ("full_attention", "sliding_attention")  # the layer kinds that hold softmax attention
QWEN_GATED = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")
# model type -> (what lies between the attention layers, the key that says where they are)
OTHER_LAYERS = {
    "jamba": ("Mamba layers and experts", "attn_layer_period"),
    "bamba": ("Mamba-2 layers", "attn_layer_indices"),
    "falcon_h1": ("a Mamba-2 mixer in parallel with every attention layer, muP multipliers", "model_type"),
    "lfm2": ("gated short-convolution layers", "layer_types"),
    "lfm2_moe": ("gated short-convolution layers, experts after the first num_dense_layers", "layer_types"),
    "lfm3": ("gated short-convolution layers, sandwich norms", "layer_types"),
    "nemotron_h": ("Mamba-2, MLP and expert layers", "layers_block_type"),
    "recurrent_gemma": ("RG-LRU recurrent blocks", "block_types"),
    "minimax": ("lightning (linear) attention layers, scaled residuals, experts", "layer_types"),
    "olmo_hybrid": ("Gated DeltaNet (linear attention) layers", "layer_types"),
    "lara_mini": ("Gated DeltaNet (linear attention) layers, experts", "layer_types"),
    **dict.fromkeys(QWEN_GATED, ("Gated DeltaNet (linear attention) layers, experts where the config has them",
                                 "layer_types")),
}  # fmt: skip
QK_NORM = {**dict.fromkeys(("lfm2", "lfm2_moe", "lfm3", "lara_mini", *QWEN_GATED), "rms_head"),
           "olmo_hybrid": "rms_all"}
EPS = {"jamba": 1e-6, "recurrent_gemma": 1e-6, "olmo_hybrid": 1e-6, "lara_mini": 1e-6, "qwen3_next": 1e-6}
NO_ROPE = ("jamba", "nemotron_h")
ROTARY_DEFAULTS = {"bamba": 0.5, "recurrent_gemma": 0.5, **dict.fromkeys(QWEN_GATED, 0.25)}
TIED_DEFAULTS = ("lfm2", "lfm2_moe", "lfm3", "recurrent_gemma", "lara_mini")


def _index_list(cfg: dict, key: str, n_layers: int) -> list[int]:
    value = cfg.get(key)
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise SpecError(key, f"must be a list of layer indices, got {value!r}")
    if any(not 0 <= i < n_layers for i in value):
        raise SpecError(key, f"indices must lie in 0..{n_layers - 1}, got {value!r}")
    return value


def _listed_types(cfg: dict, key: str, n_layers: int | None) -> list[str]:
    value = cfg.get(key)
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise SpecError(key, f"must list a layer kind for every layer, got {value!r}")
    if n_layers is not None and len(value) != n_layers:
        raise SpecError(key, f"must list one entry for each of the {n_layers} layers, got {len(value)}")
    return list(value)


def layer_kinds(cfg: dict, mt: str) -> list[str]:
    """The kind of every layer of the model: 'full_attention' / 'sliding_attention' where it holds softmax
    attention, another word ('mamba', 'conv', 'linear_attention', ...) where it does not (module docstring)."""
    if mt == "nemotron_h":
        if cfg.get("layers_block_type") is None and isinstance(cfg.get("hybrid_override_pattern"), str):
            return ["full_attention" if c == "*" else c for c in cfg["hybrid_override_pattern"]]
        return _listed_types(cfg, "layers_block_type" if "layers_block_type" in cfg else "layer_types", None)
    n_layers = read_int(cfg, "num_hidden_layers")
    if mt == "jamba":
        period = read_int(cfg, "attn_layer_period", default=8)
        offset = read_int(cfg, "attn_layer_offset", default=4, minimum=0)
        return ["full_attention" if i % period == offset else "mamba" for i in range(n_layers)]
    if mt == "bamba":
        if not cfg.get("attn_layer_indices"):
            raise SpecError("attn_layer_indices", "names no attention layer: every layer is Mamba-2 (not modelled)")
        indices = _index_list(cfg, "attn_layer_indices", n_layers)
        return ["full_attention" if i in indices else "mamba" for i in range(n_layers)]
    if mt == "falcon_h1":
        return ["full_attention"] * n_layers
    if mt == "recurrent_gemma":
        blocks = _listed_types(cfg, "block_types", None) if cfg.get("block_types") else ["recurrent", "recurrent", "attention"]
        return ["sliding_attention" if b == "attention" else b for b in (blocks * n_layers)[:n_layers]]
    if mt == "lfm2_moe" and cfg.get("layer_types") is None:  # Lfm2MoeConfig has no default: its model fails to build
        raise SpecError("layer_types", "missing: Lfm2MoeConfig names no layer kinds by default (its model needs them)")
    if mt == "lfm2" and cfg.get("layer_types") is None:
        indices = _index_list(cfg, "full_attn_idxs", n_layers) if cfg.get("full_attn_idxs") is not None else None
        return ["full_attention" if indices is None or i in indices else "conv" for i in range(n_layers)]
    if mt == "qwen3_next" and cfg.get("layer_types") is None:
        interval = read_int(cfg, "full_attention_interval", default=4)
        return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n_layers)]
    return _listed_types(cfg, "layer_types", n_layers)


def _rotated(cfg: dict, mt: str, k: int, kind: str) -> tuple[int, float]:
    """(rotated dims, RoPE base) of a layer of `kind` (0 dims: no RoPE)."""
    if mt in NO_ROPE or (mt == "lara_mini" and kind == "full_attention"):
        return 0, 10000.0
    if mt == "olmo_hybrid" and read_section(cfg, "rope_parameters").get("rope_theta") is None:
        return 0, 10000.0  # OlmoHybridModel builds no rotary embedding: NoPE
    if mt == "lfm3":
        params = read_section(read_section(cfg, "rope_parameters"), kind)
        theta = read_float(params, "rope_theta", default=10000.0, positive=True)
        factor = read_float(params, "partial_rotary_factor", default=1.0)
        kind_of_rope = params.get("rope_type", "default")
        if kind_of_rope == "proportional":  # int(f k / 2) planes at base^(-2i/k): base^(p/k) on p dims
            p = 2 * int(factor * k // 2)
            return p, theta ** (p / k)
        if kind_of_rope != "default":
            raise SpecError(f"rope_parameters.{kind}.rope_type", f"{kind_of_rope!r} is not modelled")
        return 2 * int(factor * k // 2), theta
    factor = partial_factor(cfg, default=ROTARY_DEFAULTS.get(mt, 1.0))
    return min(k, 2 * math.ceil(int(k * factor) / 2)), rope(cfg)


def _biases(cfg: dict, mt: str) -> str:
    if mt in ("jamba", "lfm2", "lfm2_moe", "nemotron_h", "minimax"):
        return ""  # bias=False in code
    biased = read_flag(cfg, "attention_bias", False)
    if mt == "recurrent_gemma":
        return "qkvo" if biased else "o"  # o_proj: bias=True in code
    if biased and (mt in QWEN_GATED):
        raise SpecError("attention_bias", "true: the gate rows of q_proj get a bias too, which is not modelled")
    return "qkvo" if biased else ""


def _window(cfg: dict, mt: str, kind: str) -> int:
    if mt == "recurrent_gemma":
        return read_int(cfg, "attention_window_size", "sliding_window", default=2048)
    if mt == "minimax" or kind == "sliding_attention":
        return read_int(cfg, "sliding_window", default=0, minimum=0)
    return 0


def hybrid_family(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(the attention layers' blocks, the ModelSpec fields) of a config of the family: layers only."""
    kinds = layer_kinds(cfg, mt)
    d, H, G, k = head_sizes(cfg)
    if mt == "falcon_h1" and read_float(cfg, "key_multiplier", default=1.0) == 0:
        raise SpecError("key_multiplier", "0 makes every score zero: not modelled")
    eps = read_float(cfg, "rms_norm_eps", "norm_eps", "layer_norm_epsilon", default=EPS.get(mt, 1e-5))
    variant = {"qk_norm": QK_NORM[mt], "norm_eps": eps} if mt in QK_NORM else {}
    if mt in QWEN_GATED:
        variant["output_gate"] = "element"
    if mt == "lfm3" and read_flag(cfg, "use_attention_gate", True):
        variant["output_gate"] = "head"
    mlp = MLPSpec(read_int(cfg, "intermediate_size", default=4 * d), "swiglu", False)  # not modelled (below)
    layers = []
    for kind in (t for t in kinds if t in ATTENTION):
        p, theta = _rotated(cfg, mt, k, kind)
        attention = AttentionSpec(
            d_model=d, n_heads=H, n_kv_heads=G, d_head_qk=k, rope_dims=p, rope_base=theta, biases=_biases(cfg, mt),
            causal=True, sliding_window=_window(cfg, mt, kind), **variant,
        )  # fmt: skip
        layers.append(LayerSpec(attention, mlp))
    if not layers:
        raise SpecError(OTHER_LAYERS[mt][1], "names no softmax-attention layer: nothing to count")
    what, key = OTHER_LAYERS[mt]
    fields = {
        "positions": "rope" if any(x.attention.rope_dims for x in layers) else "none", "norm": "rmsnorm",
        "norm_bias": False, "norm_eps": eps, "tied": read_flag(cfg, "tie_word_embeddings", mt in TIED_DEFAULTS),
        "not_modelled": ((key, f"hybrid: {what}; these and every block's MLP are not modelled (the "
                               "softmax-attention layers are counted alone)"),),
    }  # fmt: skip
    return layers, fields


# the sizes of the layers between the attention ones, at the self-check's tiny size (set where the config has them)
OTHER_SIZES = {
    "mamba_d_state": 4, "ssm_state_size": 4, "mamba_num_heads": 2, "mamba_head_dim": 4, "n_groups": 1,
    "mamba_n_heads": 2, "mamba_d_head": 8, "mamba_d_ssm": 16,
    "moe_shared_expert_intermediate_size": 4, "lru_width": 8, "linear_num_key_heads": 2, "linear_num_value_heads": 2,
    "linear_key_head_dim": 4, "linear_value_head_dim": 4,
}  # fmt: skip


def tiny_layers(cfg: dict, mt: str) -> dict:
    """The keys that give a tiny model of this type one layer of each kind (at least one softmax-attention layer),
    in the config's order, and small sizes of the other layers: read by attnid.hf.tiny in place of its own choice
    of layers."""
    return {**{k: v for k, v in OTHER_SIZES.items() if cfg.get(k) is not None}, **_tiny_kinds(cfg, mt)}


def _tiny_kinds(cfg: dict, mt: str) -> dict:
    kinds = layer_kinds(cfg, mt)
    kept = sorted({kinds.index(t) for t in kinds})
    if len(kept) < 2:
        kept = [0, 1] if len(kinds) > 1 else [0]
    small = [kinds[i] for i in kept]
    n = {"num_hidden_layers": len(kept)}
    if mt == "jamba":  # Mamba, then attention with experts (expert layers: i % 2 == 1)
        return {**n, "num_hidden_layers": 2, "attn_layer_period": 2, "attn_layer_offset": 1,
                "expert_layer_period": 2, "expert_layer_offset": 1}  # fmt: skip
    if mt == "bamba":
        return {**n, "num_hidden_layers": 2, "attn_layer_indices": [1]}
    if mt == "falcon_h1":
        return {**n, "num_hidden_layers": 2}
    if mt == "recurrent_gemma":
        return {**n, "num_hidden_layers": 2, "block_types": ["recurrent", "attention"]}
    if mt == "nemotron_h":
        return {"layers_block_type": small, "num_hidden_layers": len(small)}
    out = {**n, "layer_types": small}
    if mt == "lfm2":
        out["full_attn_idxs"] = [i for i, t in enumerate(small) if t in ATTENTION]
    return out


MAPPERS = dict.fromkeys(OTHER_LAYERS, hybrid_family)
TINY_LAYERS = dict.fromkeys(OTHER_LAYERS, tiny_layers)
# hybrids examined and not mapped: what the description cannot express (their modeling files)
REFUSED = {
    "zamba": "hybrid: Mamba layers with one shared attention-and-MLP block applied every attn_layer_period-th layer"
    " to [hidden, embeddings] (a 2d-wide input, weights shared across uses): not described",
    "zamba2": "hybrid: Mamba-2 layers with shared attention blocks applied to [hidden, embeddings] at"
    " hybrid_layer_ids (weights shared across uses, optional LoRA adapters per use): not described",
    "granitemoehybrid": "hybrid: Mamba-2 layers with softmax attention where layer_types says; the config class's"
    " default has no attention layer and no published config is stored; experts and a shared MLP",
}


# Keys the config class leaves None though its model class needs them, filled so that the default config has
# attention layers to count (`attnid.hf.coverage.default_config`): BambaConfig names no attention layer
# (attn_layer_indices None: every layer Mamba-2), though every published Bamba has some (ibm-ai-platform/Bamba-9B,
# config.json: attn_layer_indices [9, 18, 27]).
# Lfm2MoeConfig names no layer_types (its model then fails to build) and no published LFM2-MoE config is stored:
# transformers' own test of the class (tests/models/lfm2_moe/test_modeling_lfm2_moe.py, Lfm2MoeModelTester) builds it
# with layer_types ["full_attention", "conv"]; the default's 32 layers cycle that pair.
DEFAULT_GAPS = {
    "bamba": {"attn_layer_indices": [9, 18, 27]},
    "lfm2_moe": {"layer_types": ["full_attention", "conv"] * 16},
}
