"""The gate-function, gate-bias and differential-attention fields of :class:`attnid.layer.spec.AttentionSpec`:
defaults, label parts, checks and parameter blocks (torch-free; `attnid.layer.spec_variants` merges them).

    gate_fn           the output gate's function of x W_G: sigmoid (Qwen3-Next, LFM3, AfMoE, Beam) or softplus
                      (Laguna); only with an output gate
    gate_bias         one bias per head inside the output gate, b_G (H,): sigmoid(x W_G^h + b_G^h) (Beam's gate_bias)
    diff_lambda_init  differential attention (Ye et al. 2024, DiffLlama) with this lambda_init in (0, 1); 0 = off.
                      Query heads h and h + H/2 (key groups c and c + G/2) form differential head h < H/2:
                      D_h = softmax(S_h) - lambda softmax(S_{h+H/2}), lambda = exp(l_q1 . l_k1) - exp(l_q2 . l_k2)
                      + lambda_init, z_h = D_h [V_c, V_{c+G/2}] (T, 2v), o_h = (1 - lambda_init) rms(z_h) (no gain,
                      norm_eps), read by [W_O^{2h}; W_O^{2h+1}]; the four lambda vectors are one block (4, k)
"""

from __future__ import annotations

import math
from numbers import Real

from ..errors import SpecError

GATE_FUNCTIONS = ("sigmoid", "softplus")
GATE_DEFAULTS = {"gate_fn": "sigmoid", "gate_bias": False, "diff_lambda_init": 0.0}
GATE_LABEL = {
    "gate_fn": lambda v: f"g{v}",
    "gate_bias": lambda v: "gbias",
    "diff_lambda_init": lambda v: f"diff{v:g}",
}


def checked_gates(spec) -> dict:
    """The fields normalised, name -> value; SpecError names a bad field or a combination not modelled."""
    if spec.gate_fn not in GATE_FUNCTIONS:
        raise SpecError("gate_fn", f"must be one of {', '.join(GATE_FUNCTIONS)}, got {spec.gate_fn!r}")
    gate_bias = spec.gate_bias
    if type(gate_bias).__name__ == "bool_":
        gate_bias = bool(gate_bias)
    if not isinstance(gate_bias, bool):
        raise SpecError("gate_bias", f"must be true or false, got {gate_bias!r}")
    for name, on in (("gate_fn", spec.gate_fn != "sigmoid"), ("gate_bias", gate_bias)):
        if on and spec.output_gate == "none":
            raise SpecError(name, "needs an output gate (output_gate element or head)")
    lam = spec.diff_lambda_init
    if isinstance(lam, bool) or not isinstance(lam, Real) or not math.isfinite(lam) or not 0 <= lam < 1:
        raise SpecError("diff_lambda_init", f"must be a number in [0, 1) (0: off), got {lam!r}")
    if lam:
        _check_differential(spec)
    return {"gate_fn": spec.gate_fn, "gate_bias": gate_bias, "diff_lambda_init": float(lam)}


def _check_differential(spec) -> None:
    for name, ok, why in (
        ("n_kv_heads", spec.n_kv_heads % 2 == 0, "differential attention pairs key groups c and c + G/2: G even"),
        ("d_head_v", 2 * spec.d_head_v <= spec.d_model, "differential attention is modelled for 2 d_head_v <= d_model"),
        ("qk_norm", spec.qk_norm == "none", "differential attention is modelled without q/k norms"),
        ("sinks", not spec.sinks, "differential attention is modelled without sinks"),
        ("softcap", not spec.softcap, "differential attention is modelled without softcapping"),
        ("alibi", not spec.alibi, "differential attention is modelled without ALiBi"),
        ("kv_lora_rank", not spec.kv_lora_rank, "differential attention is modelled without latent attention"),
        ("sub_norm", not spec.sub_norm, "differential attention has its own norm on the heads' output"),
        ("output_gate", spec.output_gate == "none", "differential attention is modelled without an output gate"),
    ):
        if not ok:
            raise SpecError(name, why)


def gated_block_shapes(spec) -> dict[str, tuple[int, ...]]:
    """b_G (H,) with a gate bias; the lambda vectors [l_q1; l_k1; l_q2; l_k2] (4, k) of differential attention."""
    extra = {}
    if spec.gate_bias:
        extra["b_G"] = (spec.n_heads,)
    if spec.diff_lambda_init:
        extra["lambda"] = (4, spec.d_head_qk)
    return extra
