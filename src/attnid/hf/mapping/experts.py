"""The mixture-of-experts blocks of a config: `transformers` keys -> :class:`attnid.model.MoESpec`.

Each model class computes its router in code; what it fixes is written down here per model type
(keys it leaves out take the class defaults):

    mixtral      softmax over every expert, top-k, renormalised (MixtralSparseMoeBlock)
    qwen3_moe    softmax, top-k, renormalised only with norm_topk_prob (default false)
    gpt_oss      top-k of the logits (router bias), softmax over the chosen, clamped experts with biases
    deepseek_v2  softmax, greedy or group-limited top-k, never renormalised, scaled by routed_scaling_factor
    deepseek_v3  sigmoid scores, group-limited top-k (n_group 8, topk_group 4 by default), renormalised
                 by default, scaled by routed_scaling_factor (default 2.5), plus shared experts
    DeepSeek-V3's router (DeepseekV3TopkRouter, its selection bias a buffer) with other class defaults
                 (V3_ROUTER): glm4_moe, glm4_moe_lite, solar_open and sarvam_moe (Glm4MoeTopkRouter),
                 dots1 (Dots1TopkRouter), exaone_moe (ExaoneMoeTopkRouter; its shared experts are
                 num_shared_experts), mimo_v2_flash (MiMoV2FlashTopkRouter, no shared experts)
    qwen2_moe    softmax, top-k, renormalised only with norm_topk_prob (default false); a shared expert
                 shared_expert_intermediate_size wide, scaled by sigmoid(shared_expert_gate x)
                 (Qwen2MoeSparseMoeBlock)
    olmoe, flex_olmo  Qwen2-MoE's router without the shared expert (OlmoeTopKRouter, default false)
    granitemoe   top-k of the logits, softmax over the chosen (GraniteMoeTopKRouter), no router bias;
                 granitemoeshared adds a shared SwiGLU of shared_intermediate_size to the routed output
                 (0: none, GraniteMoeSharedMLP)
    ernie4_5_moe softmax, the top-k chosen on softmax + e_score_correction_bias, which is an nn.Parameter
                 (requires_grad false, but a parameter), renormalised by the clamped sum (clamp at moe_norm_min
                 never binds at a generic point); moe_num_shared_experts shared experts (Ernie4_5_MoeSparseMoeBlock)
    flint        top-k of sigmoid scores, renormalised by default (FlintTopKRouter), a shared expert of
                 shared_expert_intermediate_size without a gate
    minimax_m2   sigmoid scores chosen with an e_score_correction_bias buffer, always renormalised
                 (MiniMaxM2TopKRouter); hy_v3 (HYV3TopKRouter) the same times router_scaling_factor (2.826), plus
                 a shared SwiGLU of num_shared_experts x moe_intermediate_size (HYV3MoE)
    mellum       Qwen3-MoE's (MellumSparseMoeBlock), norm_topk_prob default true
    aria_text    top-k of the logits, softmax over the chosen (AriaTextTopKRouter), plus a shared SwiGLU of
                 moe_num_shared_experts (2) x intermediate_size (AriaSharedExpertsMLP)
    kolibri1     the sigmoid of the chosen logits (chosen with an e_score_correction_bias buffer), renormalised only
                 with norm_topk_prob (default false), plus a shared SwiGLU of shared_expert_intermediate_size
                 (Kolibri1TopKRouter, Kolibri1SparseMoeBlock)
    minimax_m3_vl_text  minimax_m2's router times routed_scaling_factor, GPT-OSS's clamped GLU in the experts; its
                 shared expert and dense MLPs are clamped SwiGLUs (MiniMaxM3VLDenseMLP): recorded as not modelled
    cohere2_moe  top-k of the logits, then a softmax over them or (expert_selection_fn sigmoid) their sigmoid,
                 renormalised with norm_topk_prob; num_shared_experts x intermediate_size shared, averaged with the
                 routed output by default (Cohere2MoeSparseMoeBlock)
    dbrx         softmax, moe_top_k, divided by the moe_normalize_expert_weights-norm (default 1; null: not
                 normalised) of the chosen (DbrxFFN.route_tokens_to_experts)
    hunyuan_v1_moe  softmax, top-k (moe_topk), renormalised (HunYuanMoEV1Gate), and a shared SwiGLU of
                 intermediate_size added without a gate (HunYuanMoEV1Moe.shared_mlp)
    phimoe       sparsemixer (PhimoeTopKRouter, eval): two experts, the best and the best of the rest, each
                 weighted by a softmax over the logits within 2 router_jitter_noise (relative) of it; at a generic
                 point the router is seen only on the tokens whose top logits lie that close, so what it leaves
                 free depends on the data: recorded as not modelled
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
    if model_type in ("qwen3_moe", "mellum"):  # MellumConfig's norm_topk_prob default: true
        return MoESpec(**common, norm_topk_prob=read_flag(cfg, "norm_topk_prob", model_type == "mellum"))
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
    if model_type in V3_ROUTER:
        return _v3_router(cfg, model_type, common)
    if model_type == "qwen2_moe":
        width = read_int(cfg, "shared_expert_intermediate_size")
        norm = read_flag(cfg, "norm_topk_prob", False)
        return MoESpec(**common, norm_topk_prob=norm, n_shared=1, shared_width=width, shared_expert_gate=True)
    if model_type in ("olmoe", "flex_olmo"):
        return MoESpec(**common, norm_topk_prob=read_flag(cfg, "norm_topk_prob", False))
    if model_type in ("granitemoe", "granitemoeshared", "granitemoe_swa"):
        width = read_int(cfg, "shared_intermediate_size", default=0, minimum=0) if model_type != "granitemoe" else 0
        return MoESpec(**common, scoring="topk_softmax", n_shared=int(width > 0), shared_width=width)
    if model_type == "ernie4_5_moe":
        shared = read_int(cfg, "moe_num_shared_experts", default=0, minimum=0)
        return MoESpec(**common, norm_topk_prob=True, selection_bias=True, n_shared=shared)
    if model_type == "dbrx":
        p = cfg.get("moe_normalize_expert_weights", 1.0)
        p = None if p is None else read_float(cfg, "moe_normalize_expert_weights", positive=True)
        return MoESpec(**common, norm_topk_prob=p is not None, topk_norm=p or 1.0)
    if model_type == "flint":  # top-k of sigmoid scores, renormalised by default, a shared expert (FlintSparseMoeBlock)
        width = read_int(cfg, "shared_expert_intermediate_size", default=1024)
        return MoESpec(**common, scoring="sigmoid", norm_topk_prob=read_flag(cfg, "norm_topk_prob", True), n_shared=1,
                       shared_width=width)  # fmt: skip
    if model_type == "minimax_m2":  # sigmoid, chosen with the e_score_correction_bias buffer, renormalised
        return MoESpec(**common, scoring="sigmoid", norm_topk_prob=True)
    if model_type in SIGMOID_OR_TOPK:
        return _sigmoid_or_topk(cfg, model_type, common, not_modelled)
    if model_type == "hunyuan_v1_moe":  # softmax, top-k, renormalised; a shared SwiGLU (HunYuanMoEV1Moe.shared_mlp)
        return MoESpec(**common, norm_topk_prob=True, n_shared=1, shared_width=read_int(cfg, "intermediate_size"))
    if model_type == "phimoe":
        why = "sparsemixer routing: the router is seen only on tokens whose top logits lie within 2 router_jitter_noise"
        not_modelled.append(("router_jitter_noise", why + " of each other, so what it leaves free depends on the data"))
        return MoESpec(**{**common, "top_k": 2})
    not_modelled.append(("model_type", f"the mixture of experts of {model_type!r} is not modelled"))
    return MoESpec(**common)


SIGMOID_OR_TOPK = ("hy_v3", "kolibri1", "minimax_m3_vl_text", "cohere2_moe", "aria_text")


def _sigmoid_or_topk(cfg: dict, model_type: str, common: dict, not_modelled: list) -> MoESpec:
    """The routers of SIGMOID_OR_TOPK: sigmoid scores of the chosen (a selection buffer aside), or a softmax over the
    top-k logits, with shared experts beside them (module docstring)."""
    if model_type == "hy_v3":  # HYV3TopKRouter: minimax_m2's, times router_scaling_factor; shared experts
        rho = read_float(cfg, "router_scaling_factor", default=2.826, positive=True)
        shared = read_int(cfg, "num_shared_experts", default=1, minimum=0)
        return MoESpec(**common, scoring="sigmoid", norm_topk_prob=True, routed_scaling_factor=rho, n_shared=shared)
    if model_type == "kolibri1":  # Kolibri1TopKRouter: the sigmoid of the chosen logits (chosen with a selection
        # buffer), renormalised only with norm_topk_prob (default false); a shared SwiGLU (Kolibri1SparseMoeBlock)
        width = read_int(cfg, "shared_expert_intermediate_size", default=512)
        norm = read_flag(cfg, "norm_topk_prob", False)
        return MoESpec(**common, scoring="sigmoid", norm_topk_prob=norm, n_shared=1, shared_width=width)
    if model_type == "minimax_m3_vl_text":  # MiniMaxM3VLTopKRouter: minimax_m2's; clamped experts (GPT-OSS's GLU)
        why = "the shared expert and the dense MLPs are clamped SwiGLUs (MiniMaxM3VLDenseMLP): not modelled"
        not_modelled.append(("shared_intermediate_size", why))
        rho = read_float(cfg, "routed_scaling_factor", default=2.0, positive=True)
        clamp = {"swiglu_alpha": read_float(cfg, "swiglu_alpha", default=1.702),
                 "swiglu_limit": read_float(cfg, "swiglu_limit", default=7.0)}  # fmt: skip
        return MoESpec(**common, scoring="sigmoid", norm_topk_prob=True, routed_scaling_factor=rho, activation="gpt_oss",
                       **clamp)  # fmt: skip
    if model_type == "cohere2_moe":  # Cohere2MoeTopKRouter: top-k logits, then a softmax over them or their sigmoid
        # (renormalised with norm_topk_prob); shared experts of num_shared_experts x intermediate_size, averaged
        # with the routed output by default (a factor 1/2 on the MLP's output, absorbed by its down maps)
        sigmoid = read_str(cfg, "expert_selection_fn", default="softmax") == "sigmoid"
        shared = read_int(cfg, "num_shared_experts", default=0, minimum=0)
        return MoESpec(**common, scoring="sigmoid" if sigmoid else "topk_softmax", n_shared=shared,
                       norm_topk_prob=sigmoid and read_flag(cfg, "norm_topk_prob", True))  # fmt: skip
    if model_type == "aria_text":  # AriaTextTopKRouter: top-k logits, softmax over them; a shared SwiGLU
        shared = read_int(cfg, "moe_num_shared_experts", default=2, minimum=0) * common["d_expert"]
        return MoESpec(**common, scoring="topk_softmax", n_shared=int(shared > 0), shared_width=shared)
    raise ValueError(f"{model_type!r} is none of SIGMOID_OR_TOPK")


# model type -> (n_group, topk_group, norm_topk_prob, routed_scaling_factor, shared-experts key, its default):
# the class defaults of the classes that reuse DeepSeek-V3's router (configuration_<type>.py)
V3_ROUTER = {
    "glm4_moe": (1, 1, True, 1.0, "n_shared_experts", 1),
    "glm4_moe_lite": (1, 1, True, 1.8, "n_shared_experts", 1),
    "solar_open": (1, 1, True, 1.0, "n_shared_experts", 1),
    "sarvam_moe": (1, 1, True, 2.5, "n_shared_experts", 1),
    "dots1": (1, 1, False, 1.0, "n_shared_experts", None),
    "exaone_moe": (1, 1, True, 2.5, "num_shared_experts", 1),
    "mimo_v2_flash": (1, 1, True, 1.0, None, 0),  # MiMoV2FlashMoE drops the shared experts
}


def _v3_router(cfg: dict, model_type: str, common: dict) -> MoESpec:
    n_group, topk_group, norm, rho, shared_key, shared = V3_ROUTER[model_type]
    return MoESpec(
        **common, scoring="sigmoid", norm_topk_prob=read_flag(cfg, "norm_topk_prob", norm),
        n_group=read_int(cfg, "n_group", default=n_group), topk_group=read_int(cfg, "topk_group", default=topk_group),
        routed_scaling_factor=read_float(cfg, "routed_scaling_factor", default=rho, positive=True),
        n_shared=(read_int(cfg, shared_key, default=shared, minimum=0) or 0) if shared_key else 0,
    )  # fmt: skip


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
