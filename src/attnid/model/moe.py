r"""Mixture-of-experts MLPs (Mixtral, Qwen3-MoE, GPT-OSS, DeepSeek-V2/V3): the spec, the function, the count.

One block's MLP, reading the normalised stream x (d,) and writing into it:

    z = x W_r (+ b_r)                                  router logits (E,)
    S = top-k experts of a choice score                (softmax(z), z, or sigmoid(z) + correction)
    w_e = scoring weight of e in S (times rho)         rho = routed_scaling_factor
    out = sum_{e in S} w_e f_e(x) + f_shared(x)
    f_e(x) = (act(x G_e + b_G) * (x U_e + b_U)) D_e + b_D      SwiGLU, act = SiLU
             ((x U_e + b_U + 1) * glu(x G_e + b_G)) D_e + b_D  GPT-OSS: glu(g) = g sigmoid(alpha g),
                                                                gate clamped above and up on both sides at limit

Scoring (`scoring`): "softmax" w_e = softmax(z)_e (Mixtral, Qwen3-MoE, DeepSeek-V2), "topk_softmax"
w = softmax(z_S) over the chosen logits (GPT-OSS), "sigmoid" w_e = sigmoid(z_e) (DeepSeek-V3, whose
selection adds the `e_score_correction_bias` buffer: not a parameter, it moves only the selection).
`norm_topk_prob` divides the chosen weights by their sum (Mixtral always). Group-limited top-k
(DeepSeek): the experts fall into n_group groups, only the topk_group best groups may be chosen.

The count (rule 11 of `attnid.model.counting`). On a finite set of inputs (token sequences) at a
generic point no input sits on a selection boundary, so S(x) is locally constant: the router is seen
only through the weights w it gives the chosen experts, and every expert only on the inputs routed to it.

- hidden units: every expert's gated units keep the dense scaling (up column c, down row 1/c): E m.
  GPT-OSS's (up + 1) needs the up bias to absorb it (c (u + b + 1) = c u + (c b + c - 1) + 1):
  E m with expert biases, 0 without. Shared experts: a dense SwiGLU of width n_shared m, n_shared m.
  The clamp: the scaling moves where up reaches +-limit, so a unit whose up is clamped on some input
  loses it; the count assumes no input is clamped (so at a trained point it is an upper bound there).
- router: weights normalised over the chosen (topk_softmax, or softmax with norm_topk_prob) depend on
  differences z_a - z_b of chosen experts only: one common shift v of the router rows (d_in, plus 1
  with a router bias) per connected component of the "chosen together" graph: one component
  generically, n_group with topk_group = 1 (the choice stays in one group), E with k = 1 (w = rho:
  the router is free). softmax without the renormalisation: only the common shift (softmax(z) =
  softmax(z + x.v)). sigmoid: no shift; free only with k = 1 and norm_topk_prob (w = rho).
- identification needs every expert chosen on enough positions: the judge multiplies its positions
  by the routing fraction E / k (`attnid.model.judge.model_sizing`).

Modelled with RMSNorm pre-LN sequential blocks only (every MoE model here): a LayerNorm's centring or
a parallel block would meet the router's shift and the routed constants in ways not derived here.
"""

from __future__ import annotations

import contextlib
import math
import threading
from dataclasses import dataclass

from ..spec import SpecError

SCORINGS = ("softmax", "topk_softmax", "sigmoid")
ACTIVATIONS = ("swiglu", "gpt_oss")


@dataclass(frozen=True)
class MoESpec:
    """A mixture-of-experts MLP (fields as in the module docstring); speaks the MLP protocol of `attnid.model.layers`."""

    n_experts: int  # E
    top_k: int  # k experts per token
    d_expert: int  # m: hidden width of one expert
    scoring: str = "softmax"  # softmax | topk_softmax | sigmoid
    norm_topk_prob: bool = False  # divide the chosen weights by their sum
    router_bias: bool = False
    expert_bias: bool = False  # biases on every expert's gate, up and down (GPT-OSS)
    activation: str = "swiglu"  # swiglu | gpt_oss (clamped, (up + 1) * glu)
    n_shared: int = 0  # always-on experts, one SwiGLU of width n_shared * d_expert (DeepSeek)
    n_group: int = 1  # group-limited top-k: E experts in n_group groups ...
    topk_group: int = 1  # ... of which the topk_group best may be chosen (DeepSeek)
    routed_scaling_factor: float = 1.0  # rho
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0

    def __post_init__(self):
        for name in ("n_experts", "top_k", "d_expert", "n_group", "topk_group"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SpecError(f"moe.{name}", f"must be a positive integer, got {value!r}")
        if isinstance(self.n_shared, bool) or not isinstance(self.n_shared, int) or self.n_shared < 0:
            raise SpecError("moe.n_shared", f"must be an integer >= 0, got {self.n_shared!r}")
        if self.top_k > self.n_experts:
            raise SpecError("moe.top_k", f"{self.top_k} exceeds n_experts={self.n_experts}")
        if self.scoring not in SCORINGS:
            raise SpecError("moe.scoring", f"must be one of {', '.join(SCORINGS)}, got {self.scoring!r}")
        if self.activation not in ACTIVATIONS:
            raise SpecError("moe.activation", f"must be one of {', '.join(ACTIVATIONS)}, got {self.activation!r}")
        if self.n_experts % self.n_group:
            raise SpecError("moe.n_group", f"{self.n_group} groups do not divide n_experts={self.n_experts}")
        if self.topk_group > self.n_group:
            raise SpecError("moe.topk_group", f"{self.topk_group} exceeds n_group={self.n_group}")
        if self.n_group > 1 and self.top_k > self.topk_group * self.n_experts // self.n_group:
            raise SpecError("moe.top_k", f"{self.top_k} exceeds the experts of {self.topk_group} groups")
        if self.n_group > 1 and self.scoring == "sigmoid" and self.n_experts // self.n_group < 2:
            raise SpecError(
                "moe.n_group", "sigmoid group scores sum each group's best two experts: 2 per group at least"
            )
        if not (self.routed_scaling_factor > 0 and math.isfinite(self.routed_scaling_factor)):
            raise SpecError("moe.routed_scaling_factor", f"must be finite and > 0, got {self.routed_scaling_factor!r}")

    # --- the MLP protocol of attnid.model.layers ---------------------------------------------------
    @property
    def d_ff(self) -> int:
        """One expert's width (a model whose first block routes takes it as its top-level d_ff)."""
        return self.d_expert

    @property
    def kind(self) -> str:
        return "swiglu"

    @property
    def d_shared(self) -> int:
        return self.n_shared * self.d_expert

    def shapes(self, d: int) -> list[tuple[str, tuple[int, ...]]]:
        """Parameter blocks in layout order, names relative to layers.l.mlp: router (d, E), router_bias (E,),
        gate, up (E, d, m), gate_bias, up_bias (E, m), down (E, m, d), down_bias (E, d), shared_{gate,up} (d, m_s),
        shared_down (m_s, d)."""
        E, m = self.n_experts, self.d_expert
        out = [("router", (d, E))] + ([("router_bias", (E,))] if self.router_bias else [])
        for name in ("gate", "up"):
            out.append((name, (E, d, m)))
            if self.expert_bias:
                out.append((f"{name}_bias", (E, m)))
        out.append(("down", (E, m, d)))
        if self.expert_bias:
            out.append(("down_bias", (E, d)))
        if self.n_shared:
            out += [("shared_gate", (d, self.d_shared)), ("shared_up", (d, self.d_shared))]
            out.append(("shared_down", (self.d_shared, d)))
        return out

    @property
    def readers(self) -> list[tuple[int, bool]]:
        """(output width, has bias) of every linear map reading the block's norm."""
        experts = [(self.d_expert, self.expert_bias)] * (2 * self.n_experts)
        return [(self.n_experts, self.router_bias)] + experts + [(self.d_shared, False)] * (2 * bool(self.n_shared))

    @property
    def writes(self) -> int:
        """Rows of the maps writing into the residual stream."""
        return self.n_experts * (self.d_expert + self.expert_bias) + self.d_shared

    @property
    def bias(self) -> bool:
        """A constant of its own: the common part of the expert down biases, when the weights sum to rho."""
        return self.expert_bias and self.normalised

    @property
    def normalised(self) -> bool:
        """The chosen weights sum to rho at every input."""
        return (
            self.scoring == "topk_softmax"
            or self.norm_topk_prob
            or (self.scoring == "softmax" and self.top_k == self.n_experts)
        )

    @property
    def hidden_scalings(self) -> int:
        """E m (the gated units of every expert; GPT-OSS's needs the up bias) plus the shared experts' units."""
        routed = self.d_expert if self.activation == "swiglu" or self.expert_bias else 0
        return self.n_experts * routed + self.d_shared

    def router_free(self, d_in: int) -> int:
        """Unidentified dimensions of the router reading a d_in-dim image (rule in the module docstring)."""
        row = d_in + self.router_bias
        if self.scoring == "sigmoid":
            return self.n_experts * row if self.top_k == 1 and self.norm_topk_prob else 0
        if not self.normalised:
            return row  # softmax over every expert: the common shift only
        if self.top_k == 1:
            return self.n_experts * row
        components = self.n_group if self.n_group > 1 and self.topk_group == 1 else 1
        return components * row

    @property
    def routing_fraction(self) -> float:
        """E / k: the share of positions an expert sees is k / E (balanced routing)."""
        return self.n_experts / self.top_k

    def effective(self, d_in: int, d_out: int, beta: bool) -> int:
        """Parameters the function sees (an upper bound: every read column and write row, less the known
        symmetries); only a parallel block asks, and MoE blocks are modelled sequential."""
        reads = sum(n * (d_in + (b or beta)) for n, b in self.readers)
        writes = self.writes * d_out
        return reads + writes - self.hidden_scalings - self.router_free(d_in)

    @property
    def label(self) -> str:
        parts = [f"moe{self.n_experts}k{self.top_k}x{self.d_expert}", self.scoring]
        parts += [
            "norm" if self.norm_topk_prob else "",
            "rb" if self.router_bias else "",
            "eb" if self.expert_bias else "",
        ]
        parts += ["" if self.activation == "swiglu" else self.activation, f"sh{self.n_shared}" if self.n_shared else ""]
        parts += [f"g{self.n_group}of{self.topk_group}" if self.n_group > 1 else ""]
        parts += [f"rho{self.routed_scaling_factor:g}" if self.routed_scaling_factor != 1 else ""]
        return "-".join(p for p in parts if p)

    @classmethod
    def from_config(cls, mapping: dict) -> MoESpec:
        """A MoESpec from a mapping whose keys are the field names (an unknown key is refused by name)."""
        known = set(cls.__dataclass_fields__)
        for key in mapping:
            if key not in known:
                raise SpecError(f"moe.{key}", f"unknown field; known: {', '.join(sorted(known))}")
        return cls(**mapping)


_RECORDING = threading.local()  # .loads: while `expert_loads` runs in this thread, the list it collects


def _loads() -> list | None:
    return getattr(_RECORDING, "loads", None)


@contextlib.contextmanager
def expert_loads():
    """Inside: a list that collects, for every MoE block called in this thread (in order), the positions
    routed to each expert (E,) (per thread: the grid measures cases side by side)."""
    previous, _RECORDING.loads = _loads(), []
    try:
        yield _RECORDING.loads
    finally:
        _RECORDING.loads = previous


def record_choice(chosen, n_experts: int) -> None:
    """While `expert_loads` runs, add the positions routed to each expert by chosen (..., k) expert ids
    (a forward hook on a real model's router calls it)."""
    if _loads() is not None:
        import torch

        _loads().append(torch.bincount(chosen.detach().reshape(-1), minlength=n_experts))


def moe_forward(x, w: dict, prefix: str, moe: MoESpec):
    """The MoE MLP of the block `prefix` (parameters w[prefix + '.router'], ...): (..., d) -> (..., d), float64.

    Every expert is evaluated on every position (the sizes here are tiny) and weighted by a dense (..., E)
    vector that is zero off the chosen experts, so `torch.func` can differentiate and batch it."""
    import torch
    import torch.nn.functional as F

    p = f"{prefix}."
    E, k = moe.n_experts, moe.top_k
    z = x @ w[p + "router"]  # (..., E)
    if moe.router_bias:
        z = z + w[p + "router_bias"]
    score = {"softmax": lambda: z.softmax(-1), "topk_softmax": lambda: z, "sigmoid": lambda: z.sigmoid()}[moe.scoring]()
    choice = score.detach()  # the selection is piecewise constant: no gradient flows through it
    if moe.n_group > 1:  # keep the topk_group best groups (a group's score: its best, or best two for sigmoid)
        groups = choice.unflatten(-1, (moe.n_group, E // moe.n_group))  # (..., n_group, E / n_group)
        group_score = groups.topk(2, -1).values.sum(-1) if moe.scoring == "sigmoid" else groups.amax(-1)
        best = group_score.topk(moe.topk_group, -1).indices  # (..., topk_group)
        keep = (best[..., None] == torch.arange(moe.n_group)).any(-2)  # (..., n_group)
        choice = choice.masked_fill(~keep.repeat_interleave(E // moe.n_group, -1), -math.inf)
    chosen = choice.topk(k, -1).indices  # (..., k)
    mask = (chosen[..., None] == torch.arange(E)).any(-2).to(x.dtype)  # (..., E): 1 on the chosen experts
    if moe.scoring == "topk_softmax":
        weight = (z.masked_fill(mask == 0, -math.inf)).softmax(-1)  # softmax over the chosen logits
    else:
        weight = score * mask
        if moe.norm_topk_prob:
            weight = weight / weight.sum(-1, keepdim=True)
    weight = weight * moe.routed_scaling_factor  # (..., E)
    if _loads() is not None:
        _loads().append(mask.detach().reshape(-1, E).sum(0))

    gate = torch.einsum("...d,edm->...em", x, w[p + "gate"])  # (..., E, m)
    up = torch.einsum("...d,edm->...em", x, w[p + "up"])
    if moe.expert_bias:
        gate, up = gate + w[p + "gate_bias"], up + w[p + "up_bias"]
    if moe.activation == "swiglu":
        hidden = F.silu(gate) * up
    else:
        gate = gate.clamp(max=moe.swiglu_limit)
        up = up.clamp(-moe.swiglu_limit, moe.swiglu_limit)
        hidden = (up + 1) * gate * torch.sigmoid(moe.swiglu_alpha * gate)
    out = torch.einsum("...em,emd->...ed", hidden, w[p + "down"])  # (..., E, d)
    if moe.expert_bias:
        out = out + w[p + "down_bias"]
    y = torch.einsum("...e,...ed->...d", weight, out)
    if moe.n_shared:
        y = y + (F.silu(x @ w[p + "shared_gate"]) * (x @ w[p + "shared_up"])) @ w[p + "shared_down"]
    return y


def check(spec) -> None:
    """A model with MoE blocks: RMSNorm, pre-LN, sequential (the setting the count is derived for)."""
    if not any(isinstance(x.mlp, MoESpec) for x in spec.layer_specs):
        return
    if spec.norm != "rmsnorm":
        raise SpecError("moe", f"mixture-of-experts blocks are modelled with RMSNorm only, not {spec.norm}")
    if spec.norm_position != "pre" or spec.parallel:
        raise SpecError("moe", "mixture-of-experts blocks are modelled in pre-LN sequential blocks only")


def moe_terms(spec, d_in: int) -> dict[str, int]:
    """The MoE blocks' own sources, summed over blocks (rule in the module docstring)."""
    blocks = _moe_blocks(spec)
    return {
        "moe_hidden_units": sum(m.hidden_scalings for m in blocks),
        "moe_router": sum(m.router_free(d_in) for m in blocks),
    }


def _moe_blocks(spec) -> list[MoESpec]:
    return [x.mlp for x in spec.layer_specs if isinstance(x.mlp, MoESpec)]


def expert_params(moe: MoESpec, d: int) -> int:
    """p_e: one routed expert's parameters (gate, up, down and their biases)."""
    return 3 * moe.d_expert * d + moe.expert_bias * (2 * moe.d_expert + d)


def _need(moe: MoESpec, d: int, info: int, oversample: float) -> int:
    """Positions one expert must be routed: a gated unit's 2 (d + [b]) input weights reach the logits through
    one scalar per position (its hidden value times a fixed row of D), so 2 (d + [b]) positions at least, and
    p_e / info for the expert as a whole; times oversample."""
    return math.ceil(oversample * max(2 * (d + moe.expert_bias), expert_params(moe, d) / info))


def expert_need(spec, oversample: float) -> int:
    """Positions each expert must be routed on the first half of the data (the largest over MoE blocks)."""
    info = min(spec.vocab_size, spec.d_model)
    return max((_need(m, spec.d_model, info, oversample) for m in _moe_blocks(spec)), default=0)


def routed_positions(spec, oversample: float) -> int:
    """Positions N such that every expert expects its need on half of them: 2 (E / k) need; 0 without MoE."""
    info = min(spec.vocab_size, spec.d_model)
    blocks = _moe_blocks(spec)
    return max(
        (math.ceil(2 * m.routing_fraction * _need(m, spec.d_model, info, oversample)) for m in blocks), default=0
    )


def routed_tokens(spec, f, theta, draw, batch: int, oversample: float, tries: int = 4):
    """(tokens, fewest): tokens = draw(batch) (B, T), with B grown until every expert of f at theta is routed
    at least `expert_need` positions in the first half of the sequences (the routing of a random point is
    uneven, so the expected share k / E is not enough); fewest = the smallest such count (None when f records
    no loads: a real `transformers` model, or no MoE)."""
    need = expert_need(spec, oversample)
    for _ in range(tries):
        tokens = draw(batch)
        with expert_loads() as loads:
            f(theta, tokens[: tokens.shape[0] // 2])
        fewest = int(min(x.min() for x in loads)) if loads else None
        if fewest is None or fewest >= need:
            break
        batch = math.ceil(batch * min(4.0, 1.1 * need / max(fewest, 1)))
    return tokens, fewest


def moe_spec(cfg: dict, model_type: str, mlp) -> MoESpec:
    """The MoESpec of a config mapping's routed block (`mlp`: its `attnid.hf.mapping.MLPFacts`), as the
    `transformers` class of `model_type` computes it (keys it leaves out take the class defaults)."""
    if mlp.activation not in ("silu", "swish") or not mlp.gated:
        raise SpecError("hidden_act", f"experts with activation {mlp.activation!r} are not modelled")
    common = {"n_experts": mlp.n_experts, "top_k": mlp.experts_per_token, "d_expert": mlp.d_hidden}
    if model_type == "mixtral":  # softmax over every expert, top-k, renormalised
        return MoESpec(**common, norm_topk_prob=True)
    if model_type == "qwen3_moe":
        if cfg.get("mlp_only_layers") or int(cfg.get("decoder_sparse_step", 1)) != 1:
            key = "mlp_only_layers" if cfg.get("mlp_only_layers") else "decoder_sparse_step"
            raise SpecError(key, "dense blocks between Qwen3-MoE's routed ones are not modelled")
        return MoESpec(**common, norm_topk_prob=bool(cfg.get("norm_topk_prob", False)))
    if model_type == "gpt_oss":  # top-k of the logits (router bias), softmax over the chosen, clamped experts
        limit = {
            "swiglu_alpha": float(cfg.get("swiglu_alpha", 1.702)),
            "swiglu_limit": float(cfg.get("swiglu_limit", 7.0)),
        }
        return MoESpec(
            **common, scoring="topk_softmax", router_bias=True, expert_bias=True, activation="gpt_oss", **limit
        )
    if model_type in ("deepseek_v2", "deepseek_v3"):
        v3 = model_type == "deepseek_v3"
        scoring = "sigmoid" if v3 else "softmax"
        if cfg.get("scoring_func", scoring) != scoring:
            raise SpecError("scoring_func", f"{cfg['scoring_func']!r}: the {model_type} class scores by {scoring}")
        if v3:  # group-limited top-k always (defaults n_group 8, topk_group 4), renormalised by default
            groups = {"n_group": int(cfg.get("n_group") or 8), "topk_group": int(cfg.get("topk_group") or 4)}
            norm = bool(cfg.get("norm_topk_prob", True))
        else:  # greedy, or group_limited_greedy; the class never renormalises
            if cfg.get("norm_topk_prob") and mlp.experts_per_token > 1:
                raise SpecError("norm_topk_prob", "the deepseek_v2 class ignores it (the original code renormalises)")
            limited = cfg.get("topk_method", "greedy") == "group_limited_greedy"
            groups = {"n_group": int(cfg["n_group"]), "topk_group": int(cfg["topk_group"])} if limited else {}
            norm = False
        rho = float(cfg.get("routed_scaling_factor", 2.5 if v3 else 1.0))
        return MoESpec(**common, scoring=scoring, norm_topk_prob=norm, n_shared=mlp.n_shared_experts,
                       routed_scaling_factor=rho, **groups)  # fmt: skip
    raise SpecError("model_type", f"the mixture of experts of {model_type!r} is not modelled")
