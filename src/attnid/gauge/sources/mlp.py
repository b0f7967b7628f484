r"""Generators of the MLP blocks (sources `mlp_hidden`, `moe_hidden_units`, `moe_router`; counted by
`attnid.model.counting.mlp`).

    hidden units  unit j of a ReLU MLP, or the up side of a gated one (SwiGLU, GeGLU), scales by c and its
                  down row by 1/c: dW_up[:, j] = W_up[:, j], db_up[j] = b_up[j], dW_down[j] = -W_down[j];
                  every expert's units alike; GPT-OSS's (up + 1) needs its up bias: db_up[j] = b_up[j] + 1.
                  A squared-ReLU unit (degree 2) takes its down row by 1/c^2: dW_down[j] = -2 W_down[j], and so
                  does a gated squared-ReLU unit's gate side (a second scaling per unit). Behind a norm on the
                  hidden units (BitNet, `sub_norm`): each gain against its down row (dg_j = g_j, dW_down[j] =
                  -W_down[j]); a gated squared-ReLU unit's gate times a with its up times 1/a^2 (h kept); and
                  one common scale of the up map (h times c, unseen by the norm for eps = 0: weak for eps > 0,
                  source `mlp_norm_scale`) where h is homogeneous in it (gated, ReLU, squared ReLU)
    selection     a bias added to the scores for the top-k choice only (Ernie-4.5) moves a locally constant
                  selection: every direction, d b_sel = c
    router        weights normalised over the chosen experts see only differences of the chosen logits:
                  one common shift of every router column (and bias), dW_r[:, e] = v, db_r[e] = s, per
                  connected component of the "chosen together" graph (one, or one per group with
                  topk_group = 1, or every expert alone with k = 1)
"""

from __future__ import annotations

import torch

from ...model.blocks import MLPSpec, MoESpec
from ..group import Group
from ..point import DTYPE, Point


def _units(point: Point, prefix: str, up: str, up_bias: str | None, down: str, plus_one: bool, source: str, lead: int):
    """Hidden-unit scalings of the (stacked: lead = 1 for experts (E, d, m)) maps up, down."""
    U, D = point.w[prefix + up], point.w[prefix + down]
    b = point.w[prefix + up_bias] if up_bias else None
    n = U.shape[-1] * (U.shape[0] if lead else 1)

    def fn(c):
        s = c.unflatten(-1, (U.shape[0], U.shape[-1])) if lead else c  # (..., [E,] m)
        out = {prefix + up: U * s[..., None, :], prefix + down: -(D * s[..., :, None])}
        if b is not None:
            out[prefix + up_bias] = (b + 1.0 if plus_one else b) * s
        return out

    def act(w, c):  # up e^s, down e^-s (GPT-OSS: up bias (b + 1) e^s - 1)
        s = c.unflatten(-1, (U.shape[0], U.shape[-1])) if lead else c
        out = {prefix + up: w[prefix + up] * s.exp()[..., None, :], prefix + down: w[prefix + down] * (-s).exp()[..., :, None]}
        if b is not None:
            bias = w[prefix + up_bias]
            out[prefix + up_bias] = (bias + 1.0) * s.exp() - 1.0 if plus_one else bias * s.exp()
        return out

    def adjoint(v):  # <up column j, V> + (b_j [+ 1]) v_b - <down row j, V>
        m = next(iter(v.values())).shape[0]
        out = torch.zeros(m, *U.shape[:-2], U.shape[-1], dtype=DTYPE)
        if prefix + up in v:
            out = out + (U * v[prefix + up]).sum(-2)
        if b is not None and prefix + up_bias in v:
            out = out + (b + 1.0 if plus_one else b) * v[prefix + up_bias]
        if prefix + down in v:
            out = out - (D * v[prefix + down]).sum(-1)
        return out.reshape(m, n)

    blocks = (prefix + up, prefix + down) + ((prefix + up_bias,) if b is not None else ())
    return Group(source, f"{prefix}{up}.units", n, fn, blocks, meta={"plus_one": plus_one, "action": act, "adjoint": adjoint})


def _scaling(point: Point, source: str, name: str, parts: list[tuple[str, int, float]], weak: bool = False) -> Group:
    """Per-unit scalings: unit j multiplies each part's block along its unit axis (-1: columns or a vector,
    -2: rows) by exp(coef s_j); the tangent is coef * block on that unit. One common scale when the group's
    n is 1 (`common`: every unit together)."""
    w = {b: point.w[b] for b, _, _ in parts}
    m = w[parts[0][0]].shape[parts[0][1]]
    common = name.endswith("common_scale")
    n = 1 if common else m

    def spread(c, axis, ndim):  # c (..., n) -> (..., [1,] m [, 1]) aligned with a block's unit axis
        s = c.expand(*c.shape[:-1], m) if common else c
        return s[..., :, None] if axis == -2 else s if ndim == 1 else s[..., None, :]

    def fn(c):
        return {b: coef * w[b] * spread(c, axis, w[b].dim()) for b, axis, coef in parts}

    def act(state, c):
        return {b: state[b] * (coef * spread(c, axis, state[b].dim())).exp() for b, axis, coef in parts}

    def adjoint(v):
        k = next(iter(v.values())).shape[0]
        out = torch.zeros(k, m, dtype=DTYPE)
        for b, axis, coef in parts:
            if b in v:
                prod = coef * w[b] * v[b]  # (k, *shape)
                out = out + (prod.sum(-1) if axis == -2 else prod if w[b].dim() == 1 else prod.sum(-2))
        return out.sum(-1, keepdim=True) if common else out

    blocks = tuple(b for b, _, _ in parts)
    return Group(source, name, n, fn, blocks, weak=weak, meta={"action": act, "adjoint": adjoint})


def _dense_units(point: Point, layer: int, mlp: MLPSpec) -> list[Group]:
    """The dense MLP's hidden-unit scalings (module docstring), `attnid.model.counting.mlp.hidden_scalings`."""
    prefix = f"layers.{layer}.mlp."

    def side(name: str, coef_down: float, other: tuple[str, float] | None = None) -> list[tuple[str, int, float]]:
        parts = [(prefix + name, -1, 1.0)] + ([(prefix + name + "_bias", -1, 1.0)] if mlp.bias else [])
        if other is None:
            return parts + [(prefix + "down", -2, coef_down)]
        target, coef = other
        return parts + [(prefix + target, -1, coef)] + ([(prefix + target + "_bias", -1, coef)] if mlp.bias else [])

    out = []
    if mlp.sub_norm:
        out.append(_scaling(point, "mlp_hidden", prefix + "sub_norm.gains",
                            [(prefix + "sub_norm_gain", -1, 1.0), (prefix + "down", -2, -1.0)]))  # fmt: skip
        if mlp.kind == "relu2glu":
            out.append(_scaling(point, "mlp_hidden", prefix + "gate.units", side("gate", 0.0, ("up", -2.0))))
        if mlp.gated or mlp.kind in ("relu", "relu2"):
            weak = point.spec.norm_eps > 0
            out.append(_scaling(point, "mlp_norm_scale", prefix + "up.common_scale", side("up", 0.0)[: 1 + mlp.bias], weak))
        return out
    degree = {"relu": 1.0, "swiglu": 1.0, "geglu": 1.0, "relu2glu": 1.0, "relu2": 2.0}.get(mlp.kind)
    if degree:  # the up side: h is homogeneous of this degree in the unit's up column
        out.append(_scaling(point, "mlp_hidden", prefix + "up.units", side("up", -degree)))
    if mlp.kind == "relu2glu":
        out.append(_scaling(point, "mlp_hidden", prefix + "gate.units", side("gate", -2.0)))
    return out  # GELU, SiLU: none


def hidden_units(point: Point, layer: int) -> list[Group]:
    mlp, prefix = point.spec.layer_specs[layer].mlp, f"layers.{layer}.mlp."
    if isinstance(mlp, MLPSpec):
        return _dense_units(point, layer, mlp)
    if mlp.shared_expert_gate:
        raise NotImplementedError("generators beside a shared expert behind a sigmoid gate (shared_expert_gate)")
    out = []
    if mlp.selection_bias:  # the selection is locally constant in it: every direction (counting.mlp.selection_bias)
        E = mlp.n_experts
        out.append(Group("moe_selection_bias", f"{prefix}selection_bias.free", E,
                         lambda c: {prefix + "selection_bias": c}, (prefix + "selection_bias",),
                         meta={"adjoint": lambda v: v[prefix + "selection_bias"]}))  # fmt: skip
    gpt_oss = mlp.activation == "gpt_oss"
    if not gpt_oss or mlp.expert_bias:
        bias = "up_bias" if mlp.expert_bias else None
        out.append(_units(point, prefix, "up", bias, "down", gpt_oss, "moe_hidden_units", 1))
    if mlp.n_shared:
        out.append(_units(point, prefix, "shared_up", None, "shared_down", False, "moe_hidden_units", 0))
    return out


def router_components(moe: MoESpec) -> list[list[int]]:
    """The experts of each connected component of the 'chosen together' graph whose logits share a shift
    (counting.mlp.router_shifts)."""
    E = moe.n_experts
    if moe.scoring == "sigmoid":
        return [[e] for e in range(E)] if moe.top_k == 1 and moe.norm_topk_prob else []
    if not moe.normalised:
        return [list(range(E))]  # softmax over every expert: the common shift only
    if moe.top_k == 1:
        return [[e] for e in range(E)]
    if moe.n_group > 1 and moe.topk_group == 1:
        size = E // moe.n_group
        return [list(range(g * size, (g + 1) * size)) for g in range(moe.n_group)]
    return [list(range(E))]


def router_shift(point: Point, layer: int) -> list[Group]:
    mlp, prefix = point.spec.layer_specs[layer].mlp, f"layers.{layer}.mlp."
    if not isinstance(mlp, MoESpec):
        return []
    comps = router_components(mlp)
    if not comps:
        return []
    d, E = point.d, mlp.n_experts
    member = torch.zeros(len(comps), E, dtype=DTYPE)
    for i, comp in enumerate(comps):
        member[i, comp] = 1.0
    row = d + mlp.router_bias

    def fn(c):
        x = c.unflatten(-1, (len(comps), row))  # (..., n_comp, d + [b])
        out = {prefix + "router": torch.einsum("...cd,ce->...de", x[..., :d], member)}
        if mlp.router_bias:
            out[prefix + "router_bias"] = torch.einsum("...c,ce->...e", x[..., d], member)
        return out

    blocks = (prefix + "router",) + ((prefix + "router_bias",) if mlp.router_bias else ())
    return [Group("moe_router", f"{prefix}router.shift", len(comps) * row, fn, blocks)]
