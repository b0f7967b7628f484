"""The MLP blocks: hidden-unit scalings of dense MLPs and experts, and the router of a mixture (torch-free)."""

from __future__ import annotations

from ..blocks import MLPSpec, MoESpec


def hidden_scalings(mlp: MLPSpec | MoESpec) -> int:
    """Dimension of the block's hidden-unit rescalings.

    Proposition (hidden units). A ReLU unit admits relu(c x) / c, a squared-ReLU unit relu(c x)^2 / c^2 (its
    up column times c, its down row times 1/c^2: homogeneous of degree 2) and a gated unit (SwiGLU, GeGLU) its
    up column times c with its down row times 1/c, for any c > 0: d_ff per dense block (GELU, SiLU: none); a
    gated squared-ReLU unit both its gate column (times a, the product times a^2) and its up column: 2 d_ff.
    Proposition (a norm on the hidden units, BitNet). y = n(h) diag(g) W_down with n the RMSNorm: the gains
    against the down rows (d_ff), and of the units' scalings only those that keep h: a gated squared-ReLU
    unit's gate times a with its up times 1/a^2 (d_ff); one common scale of h (the up map's, where h is
    linear or homogeneous in it) is seen only through eps: `sub_norm_scales`.
    Every expert's gated units keep that scaling: E m; GPT-OSS's (up + 1) needs the up bias to absorb it
    (c (u + b + 1) = c u + (c b + c - 1) + 1): E m with expert biases, 0 without; shared experts are one
    dense SwiGLU of width d_shared (n_shared m, or shared_width). Qwen2-MoE's sigmoid(x w_s) on the shared
    expert adds no symmetry: w_s is seen through a non-homogeneous gate, and S(x) (1 - sigmoid(x w_s)) (x dw)
    is no SwiGLU direction (measured at d 8: router 8, hidden units 4 x 4 + 6, the whole model agrees).
    The clamp of GPT-OSS's experts moves the scaling where up reaches +-limit, so the count assumes no input
    is clamped (at a trained point it is an upper bound there).
    """
    if isinstance(mlp, MoESpec):
        routed = mlp.d_expert if mlp.activation == "swiglu" or mlp.expert_bias else 0
        return mlp.n_experts * routed + mlp.d_shared
    if mlp.sub_norm:
        return mlp.d_ff * (1 + (mlp.kind == "relu2glu"))
    return mlp.d_ff * {"relu": 1, "relu2": 1, "swiglu": 1, "geglu": 1, "relu2glu": 2}.get(mlp.kind, 0)


def sub_norm_scales(spec) -> int:
    """One scale per dense MLP with a norm on its hidden units whose h scales with its up map (gated, or
    ReLU / squared ReLU): unidentified for eps = 0, else weakly identified (`hidden_scalings`)."""
    mlps = [x.mlp for x in spec.layer_specs if isinstance(x.mlp, MLPSpec) and x.mlp.sub_norm]
    return sum(m.gated or m.kind in ("relu", "relu2") for m in mlps)


def router_shifts(moe: MoESpec, d_in: int, pinned: bool = False) -> int:
    """Unidentified dimensions of a router reading a d_in-dim image.

    Proposition (router). On finitely many inputs at a generic point no input sits on a selection
    boundary, so the top-k choice is locally constant and the router is seen only through the weights it
    gives the chosen experts. Weights normalised over the chosen (topk_softmax, or softmax with
    norm_topk_prob, by the sum or a p-norm) depend on differences z_a - z_b of chosen experts only: one common
    shift v of the router rows (d_in + [b_r]) per connected component of the "chosen together" graph: one
    generically, n_group with topk_group = 1, E with k = 1 (w = rho: the router is free). A softmax over every
    expert keeps only the common shift (softmax(z) = softmax(z + x.v)). Sigmoid scores: no shift; free only
    with k = 1 and norm_topk_prob.
    Proposition (router behind a LayerNorm). The router reads y = n diag(g) + beta, n centred, so its rows'
    shift v ranges over all of R^d, and v = 1/g is also the centring direction (1/g) u^T with u along the
    component (`centring_readers`), which counts it where a bias or beta = 0 absorbs the constant it adds:
    there d_c = d - 1 more per component. With beta and no router bias (`pinned`) the centring direction
    is not free, but its constant (beta . 1/g) on every logit of the component is a shift the weights do not
    see: one more per component, d in all.
    """
    comps = _shift_components(moe)
    return comps * (d_in + moe.router_bias + (pinned and not moe.router_bias))


def _shift_components(moe: MoESpec) -> int:
    """Components of the "chosen together" graph whose common shift the weights do not see (E: the router is free)."""
    if moe.scoring == "sigmoid":
        return moe.n_experts if moe.top_k == 1 and moe.norm_topk_prob else 0
    if not moe.relative:
        return 1  # softmax over every expert: the common shift only
    if moe.top_k == 1:
        return moe.n_experts
    return moe.n_group if moe.n_group > 1 and moe.topk_group == 1 else 1


def selection_bias(moe: MoESpec) -> int:
    """Proposition (selection bias). A parameter added to the scores only where the top-k is chosen (Ernie-4.5's
    e_score_correction_bias) moves a locally constant selection: all E of it is free at a generic point."""
    return moe.n_experts if moe.selection_bias else 0


def effective_params(mlp: MLPSpec | MoESpec, d_in: int, d_out: int, beta: bool) -> int:
    """Parameters the function sees when the block reads a d_in-dim affine image (an offset when beta) and
    writes d_out dims: every read map's columns and constant, the writes, less the block's own symmetries
    (an upper bound for a mixture: only a parallel block asks, and mixtures are counted sequential)."""
    reads = sum(n * (d_in + (b or beta)) for n, b in mlp.readers)
    writes = mlp.writes * d_out
    router = router_shifts(mlp, d_in) if isinstance(mlp, MoESpec) else 0
    return reads + writes - hidden_scalings(mlp) - router


def mlp_terms(spec, d_in: int) -> dict[str, int]:
    """The MLP blocks' own sources, summed over blocks: dense hidden units, experts' units, router shifts (a
    LayerNorm with a bias pins them: `router_shifts`), selection biases."""
    dense = [x.mlp for x in spec.layer_specs if not isinstance(x.mlp, MoESpec)]
    experts = [x.mlp for x in spec.layer_specs if isinstance(x.mlp, MoESpec)]
    pinned = spec.norm == "layernorm" and spec.norm_bias
    return {
        "mlp_hidden": sum(hidden_scalings(m) for m in dense),
        "moe_hidden_units": sum(hidden_scalings(m) for m in experts),
        "moe_router": sum(router_shifts(m, d_in, pinned) for m in experts),
        "moe_selection_bias": sum(selection_bias(m) for m in experts),
    }
