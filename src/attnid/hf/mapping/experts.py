"""The mixture-of-experts blocks of a config: `transformers` keys -> :class:`attnid.model.MoESpec`.

Each model class computes its router in code; what it fixes is written down here per model type
(keys it leaves out take the class defaults):

    mixtral      softmax over every expert, top-k, renormalised (MixtralSparseMoeBlock)
    qwen3_moe    softmax, top-k, renormalised only with norm_topk_prob (default false)
    gpt_oss      top-k of the logits (router bias), softmax over the chosen, clamped experts with biases
    deepseek_v2  softmax, greedy or group-limited top-k, never renormalised, scaled by routed_scaling_factor
    deepseek_v3  sigmoid scores, group-limited top-k (n_group 8, topk_group 4 by default), renormalised
                 by default, scaled by routed_scaling_factor (default 2.5), plus shared experts
"""

from __future__ import annotations

from ...model.blocks import MoESpec
from .keys import read_flag, read_float, read_int, read_str


def experts(
    cfg: dict, model_type: str, n_experts: int, top_k: int, d_expert: int, activation: str, not_modelled: list
) -> MoESpec:
    """The MoESpec of a config's routed blocks, as the `transformers` class of `model_type` computes it.

    What the whole-model count does not model is appended to `not_modelled` as (key, why): the blocks are
    then described as closely as the vocabulary allows (their attention layers stay exact)."""
    if activation not in ("silu", "swish"):
        not_modelled.append(("hidden_act", f"experts with activation {activation!r} are not modelled"))
    common = {"n_experts": n_experts, "top_k": top_k, "d_expert": d_expert}
    if model_type == "mixtral":
        return MoESpec(**common, norm_topk_prob=True)
    if model_type == "qwen3_moe":
        return MoESpec(**common, norm_topk_prob=read_flag(cfg, "norm_topk_prob", False))
    if model_type == "gpt_oss":
        clamp = {
            "swiglu_alpha": read_float(cfg, "swiglu_alpha", default=1.702),
            "swiglu_limit": read_float(cfg, "swiglu_limit", default=7.0),
        }
        return MoESpec(
            **common, scoring="topk_softmax", router_bias=True, expert_bias=True, activation="gpt_oss", **clamp
        )
    if model_type in ("deepseek_v2", "deepseek_v3"):
        return _deepseek(cfg, model_type, common, not_modelled)
    not_modelled.append(("model_type", f"the mixture of experts of {model_type!r} is not modelled"))
    return MoESpec(**common)


def _deepseek(cfg: dict, model_type: str, common: dict, not_modelled: list) -> MoESpec:
    v3 = model_type == "deepseek_v3"
    scoring = "sigmoid" if v3 else "softmax"
    if read_str(cfg, "scoring_func", default=scoring) != scoring:
        not_modelled.append(("scoring_func", f"{cfg['scoring_func']!r}: the {model_type} class scores by {scoring}"))
    if v3:  # group-limited top-k always, renormalised by default
        groups = {"n_group": read_int(cfg, "n_group", default=8), "topk_group": read_int(cfg, "topk_group", default=4)}
        norm = read_flag(cfg, "norm_topk_prob", True)
    else:  # greedy, or group_limited_greedy; the class never renormalises
        if read_flag(cfg, "norm_topk_prob", False) and common["top_k"] > 1:
            why = "the deepseek_v2 class ignores it (the original code renormalises)"
            not_modelled.append(("norm_topk_prob", why))
        limited = read_str(cfg, "topk_method", default="greedy") == "group_limited_greedy"
        groups = {"n_group": read_int(cfg, "n_group"), "topk_group": read_int(cfg, "topk_group")} if limited else {}
        norm = False
    rho = read_float(cfg, "routed_scaling_factor", default=2.5 if v3 else 1.0, positive=True)
    shared = read_int(cfg, "n_shared_experts", default=0, minimum=0)
    return MoESpec(**common, scoring=scoring, norm_topk_prob=norm, n_shared=shared, routed_scaling_factor=rho, **groups)
