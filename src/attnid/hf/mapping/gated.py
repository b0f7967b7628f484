"""Mixtures of experts whose attention output is gated by a function of the block's normed input x, before o_proj
(`transformers` 5.24, models/<type>/modular_<type>.py; keys a config leaves out take the class defaults):

    afmoe   AfmoeAttention (LlamaAttention, attention_bias on all four): per-head q/k RMSNorm (one gain each, weight
            times x), o = attn * sigmoid(x W_gate) per element (gate_proj, no bias); RoPE only on the sliding layers
            (layer_types, by default every global_attn_every_n_layers-th full), the window sliding_window on them;
            sandwich norms; the first num_dense_layers (1) blocks dense, then sigmoid-scored experts renormalised
            and scaled by route_scale, with num_shared_experts shared experts (AfmoeSparseMoeBlock); rms_norm_eps 1e-5
    laguna  LagunaAttention (AfMoE's, q and o_proj of num_attention_heads_per_layer[i] heads, attention_bias on all
            four): o = attn * softplus(x W_g), one gate per head (gating true or "per-head", g_proj (H, d)) or per
            element ("per-element"); RoPE on every layer from rope_parameters[layer type] (full: theta 500000,
            partial_rotary_factor 0.5; sliding: 10000, 1.0), the window on the sliding layers; mlp_layer_types
            (default: the first dense), sigmoid-scored experts renormalised, times moe_routed_scaling_factor, plus a
            shared expert of shared_expert_intermediate_size (LagunaSparseMoeBlock); rms_norm_eps 1e-6
    beam    BeamAttention (Qwen3-MoE's: attention_bias on all four, per-head q/k RMSNorm): o = attn * sigmoid(x W_gate
            + b_h) per element with one gate bias per head (gate_proj, gate_bias); RoPE on the sliding layers only
            (rope_parameters.full_attention null), the full layers NoPE with queries scaled by (1 + (t + 1)/2048)^0.1
            at position t: a known positive factor per query row, which leaves the scores' symmetries as they are
            and shows them up to the same constants along keys, so the count is unchanged (measured: the layer
            check calls the module with the model's own scaling); layer_types by default full every sixth and last;
            mlp_layer_types (default: the first three dense), DeepSeek-V3's router; depth-scaled residual adds
            and sandwich norms; rms_norm_eps 1e-6

HRM-Text (`hrm_text`, models/hrm_text/modular_hrm_text.py) is dense: HrmTextAttention is Llama's with a key and value
head per query head (MHA) and o = attn * sigmoid(x W_gate) per element (gate_proj, biased like q/k/v/o by attention_bias:
a bias per element, not modelled); two stacks of num_layers_per_stack Llama blocks (gain-free RMSNorms) run H_cycles x
L_cycles times with the same weights (HrmTextModel): its attention layers are counted once each, L_module's then
H_module's.

Per layer exact (`attnid.layer.counting_gates`: the gate function and bias change no count). Not modelled for the whole
model: the gate's W_G reads the block's normed input beside W_Q, W_K, W_V, so the input norm's gain acts on its rows
too, and the whole-model count has no gated attention (nor these blocks' sandwich norms with experts, Beam's
depth-scaled residual adds): layers only.
"""

from __future__ import annotations

import math

from ...errors import SpecError
from ...model.blocks import LayerSpec, MLPSpec, MoESpec
from ...layer.spec import AttentionSpec
from .keys import head_sizes, layer_types, mlp_kind, partial_factor, read_flag, read_float, read_int, read_str, rope

# model type -> (rms_norm_eps, head_dim) class defaults
DEFAULTS = {"afmoe": (1e-5, 128), "laguna": (1e-6, 128), "beam": (1e-6, 128)}
WHY = (
    "gated attention: W_G reads the block's normed input, so the norm's gain scales its rows too, and the whole-model"
    " count models no output gate{}; the attention layers are counted alone"
)
BLOCKS = {
    "afmoe": " (nor AfMoE's sandwich norms around experts)",
    "laguna": "",
    "beam": " (nor Beam's depth-scaled residual adds and sandwich norms)",
}


def _kinds(cfg: dict, mt: str, n_layers: int) -> list[str]:
    if cfg.get("layer_types"):
        return layer_types(cfg, n_layers)
    if mt == "afmoe":  # AfmoeConfig.__post_init__
        every = read_int(cfg, "global_attn_every_n_layers", default=4)
        return ["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(n_layers)]
    if mt == "beam":  # BeamConfig.__post_init__: every sixth and the last full
        full = [(i + 1) % 6 == 0 or i == n_layers - 1 for i in range(n_layers)]
        return ["full_attention" if f else "sliding_attention" for f in full]
    return ["full_attention"] * n_layers


def _heads(cfg: dict, mt: str, H: int, n_layers: int) -> list[int]:
    """Laguna's num_attention_heads_per_layer (default: num_attention_heads everywhere)."""
    heads = cfg.get("num_attention_heads_per_layer") if mt == "laguna" else None
    if heads is None:
        return [H] * n_layers
    if not isinstance(heads, list) or len(heads) != n_layers or not all(isinstance(h, int) and h > 0 for h in heads):
        raise SpecError("num_attention_heads_per_layer", f"must list a head count for each of the {n_layers} layers")
    return heads


# LagunaConfig's rope_parameters when the config names none (a config that names them: partial factor 1.0 if unset)
LAGUNA_ROPE = {
    "full_attention": {"rope_type": "default", "rope_theta": 500000.0, "partial_rotary_factor": 0.5},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 1.0},
}


def _rotary(cfg: dict, mt: str, kind: str, k: int) -> tuple[int, float]:
    """(rotated dims, RoPE base) of a layer of `kind`: AfMoE and Beam rotate their sliding layers only."""
    if mt in ("afmoe", "beam") and kind == "full_attention":
        return 0, 10000.0
    if mt == "laguna" and not cfg.get("rope_parameters"):
        cfg = {**cfg, "rope_parameters": LAGUNA_ROPE}
    factor = partial_factor(cfg, layer_type=kind)
    return min(k, 2 * math.ceil(int(k * factor) / 2)), rope(cfg, kind)


def _gate(cfg: dict, mt: str) -> dict:
    if mt == "afmoe":
        return {"output_gate": "element"}
    if mt == "beam":
        return {"output_gate": "element", "gate_bias": True}
    gating = cfg.get("gating", True)
    if gating not in (True, "per-head", "per-element"):
        raise SpecError("gating", f"must be true, 'per-head' or 'per-element' (LagunaAttention), got {gating!r}")
    return {"output_gate": "element" if gating == "per-element" else "head", "gate_fn": "softplus"}


def _experts(cfg: dict, mt: str) -> MoESpec:
    """The routed blocks, described as closely as MoESpec allows (the whole model is not counted: module docstring)."""
    common = {
        "n_experts": read_int(cfg, "num_experts"), "top_k": read_int(cfg, "num_experts_per_tok"),
        "d_expert": read_int(cfg, "moe_intermediate_size"), "scoring": "sigmoid", "norm_topk_prob": True,
    }  # fmt: skip
    if mt == "afmoe":
        rho = read_float(cfg, "route_scale", default=1.0, positive=True)
        shared = read_int(cfg, "num_shared_experts", default=2, minimum=0)
        return MoESpec(**common, routed_scaling_factor=rho, n_shared=shared)
    if mt == "laguna":
        rho = read_float(cfg, "moe_routed_scaling_factor", default=1.0, positive=True)
        width = read_int(cfg, "shared_expert_intermediate_size", default=512)
        return MoESpec(**common, routed_scaling_factor=rho, n_shared=1, shared_width=width)
    return MoESpec(
        **{**common, "norm_topk_prob": read_flag(cfg, "norm_topk_prob", True)},
        n_group=read_int(cfg, "n_group", default=8), topk_group=read_int(cfg, "topk_group", default=4),
        routed_scaling_factor=read_float(cfg, "routed_scaling_factor", default=2.5, positive=True),
    )  # fmt: skip


def _routed(cfg: dict, mt: str, n_layers: int) -> list[bool]:
    if mt == "afmoe":
        return [i >= read_int(cfg, "num_dense_layers", default=1, minimum=0) for i in range(n_layers)]
    kinds = cfg.get("mlp_layer_types")
    if kinds is None:  # the config classes' defaults: Laguna's first block dense, Beam's first three
        first = 1 if mt == "laguna" else min(3, n_layers)
        return [i >= first for i in range(n_layers)]
    if not isinstance(kinds, list) or len(kinds) != n_layers or not set(kinds) <= {"dense", "sparse"}:
        raise SpecError("mlp_layer_types", f"must list 'dense' or 'sparse' for each of the {n_layers} layers")
    return [kind == "sparse" for kind in kinds]


def gated_family(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(every block, the ModelSpec fields) of a config of the family: layers only."""
    eps_default, head_default = DEFAULTS[mt]
    d, H, G, k = head_sizes(cfg, head_default)
    n_layers = read_int(cfg, "num_hidden_layers")
    eps = read_float(cfg, "rms_norm_eps", default=eps_default)
    biases = "qkvo" if read_flag(cfg, "attention_bias", False) else ""
    window = read_int(cfg, "sliding_window", default=0, minimum=0)
    activation = read_str(cfg, "hidden_act", default="silu")
    dense, routed = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(activation, True)), _experts(cfg, mt)
    layers = []
    for kind, heads, moe in zip(_kinds(cfg, mt, n_layers), _heads(cfg, mt, H, n_layers), _routed(cfg, mt, n_layers)):
        p, theta = _rotary(cfg, mt, kind, k)
        attention = AttentionSpec(
            d_model=d, n_heads=heads, n_kv_heads=G, d_head_qk=k, rope_dims=p, rope_base=theta, biases=biases,
            causal=True, sliding_window=window if kind == "sliding_attention" else 0, qk_norm="rms_head",
            norm_eps=eps, **_gate(cfg, mt),
        )  # fmt: skip
        layers.append(LayerSpec(attention, routed if moe else dense))
    fields = {
        "positions": "rope" if any(x.attention.rope_dims for x in layers) else "none", "norm": "rmsnorm",
        "norm_bias": False, "norm_eps": eps, "tied": read_flag(cfg, "tie_word_embeddings", False),
        "not_modelled": (("model_type", WHY.format(BLOCKS[mt])),),
    }  # fmt: skip
    return layers, fields


HRM_WHY = (
    "a hierarchical recurrence: two stacks run H_cycles x L_cycles times with the same weights, an output gate and"
    " gain-free norms in every block: not modelled (the attention layers are counted alone)"
)


def hrm_family(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """HRM-Text's attention layers, one per block of its two stacks (module docstring): layers only."""
    if read_flag(cfg, "attention_bias", False):
        raise SpecError("attention_bias", "true: HrmTextAttention's gate_proj then has a bias per element: not modelled")
    d, H, _, k = head_sizes({k: v for k, v in cfg.items() if k != "num_key_value_heads"}, 128)
    per_stack = read_int(cfg, "num_layers_per_stack", "num_hidden_layers")
    eps = read_float(cfg, "rms_norm_eps", default=1e-6)
    attention = AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=H, d_head_qk=k, rope_dims=int(k * partial_factor(cfg)) // 2 * 2,
        rope_base=rope(cfg), causal=True, output_gate="element",
    )  # fmt: skip
    mlp = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(read_str(cfg, "hidden_act", default="silu"), True))
    fields = {
        "positions": "rope", "norm": "rmsnorm", "norm_bias": False, "norm_eps": eps, "norm_gain": False,
        "tied": read_flag(cfg, "tie_word_embeddings", False), "not_modelled": (("H_cycles", HRM_WHY),),
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * (2 * per_stack), fields


def tiny_hrm(cfg: dict, mt: str) -> dict:
    """HRM-Text's tiny model: one block a stack, one cycle of each (HrmTextConfig: num_hidden_layers counts every
    attention call, num_layers_per_stack x H_cycles x (L_cycles + 1))."""
    return {"num_layers_per_stack": 1, "H_cycles": 1, "L_cycles": 1, "L_bp_cycles": [1], "num_hidden_layers": 2}


MAPPERS = {**dict.fromkeys(DEFAULTS, gated_family), "hrm_text": hrm_family}
TINY_LAYERS = {"hrm_text": tiny_hrm}
