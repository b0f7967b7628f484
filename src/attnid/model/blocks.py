r"""The blocks of a whole model: :class:`LayerSpec` = one attention layer + one MLP, which is an
:class:`MLPSpec` (dense) or a :class:`MoESpec` (a mixture of experts).

A :class:`attnid.model.ModelSpec` is uniform by default (every block the top-level `attention`, `d_ff`,
`mlp`, `mlp_bias`); its optional `layers` field gives every block its own LayerSpec instead (Gemma-3's
local and global RoPE bases, DeepSeek's dense then routed MLPs, alternating windows, per-layer widths).
Only the blocks differ: the residual stream, its gauge, the embeddings and the norm kind are the model's.

Dense MLP (x the normalised stream (..., d), m = d_ff hidden units):

    relu, gelu,      act(x W_up + b_up) W_down + b_down
    relu2, silu:     (relu2: squared ReLU relu(z)^2, Primer; silu: z sigmoid(z))
    swiglu, geglu,   (act(x W_gate + b_gate) * (x W_up + b_up)) W_down + b_down    act = SiLU / GELU(tanh)
    relu2glu:                                                                     / squared ReLU (BitNet)
    with sub_norm:   the hidden units through an RMSNorm with a gain (m,) before W_down (BitNet's ffn_sub_norm)

Mixture of experts (E experts of width m, k chosen per token):

    z = x W_r (+ b_r)                                  router logits (E,)
    S = top-k experts of a choice score                (softmax(z), z, or sigmoid(z))
    w_e = scoring weight of e in S (times rho)         rho = routed_scaling_factor
    out = sum_{e in S} w_e f_e(x) + f_shared(x)      (f_shared times sigmoid(x w_s) with shared_expert_gate)
    f_e(x) = (act(x G_e + b_G) * (x U_e + b_U)) D_e + b_D      SwiGLU, act = SiLU
             ((x U_e + b_U + 1) * glu(x G_e + b_G)) D_e + b_D  GPT-OSS: glu(g) = g sigmoid(alpha g),
                                                                gate clamped above and up on both sides at limit

Scoring: "softmax" w_e = softmax(z)_e (Mixtral, Qwen3-MoE, DeepSeek-V2), "topk_softmax" w = softmax(z_S)
over the chosen logits (GPT-OSS), "sigmoid" w_e = sigmoid(z_e) (DeepSeek-V3, whose selection adds the
`e_score_correction_bias` buffer: not a parameter, it moves only the selection; Ernie-4.5 holds it as a
parameter: `selection_bias`). `norm_topk_prob` divides the chosen weights by their sum, or by their
p-norm with `topk_norm` = p (DBRX's moe_normalize_expert_weights). Group-limited top-k (DeepSeek): the
experts fall into n_group groups, only the topk_group best groups may be chosen. The shared expert is
n_shared d_expert wide, or `shared_width` (Qwen2-MoE's shared_expert_intermediate_size), and Qwen2-MoE
scales it by a sigmoid gate of its own (`shared_expert_gate`, a (d,) row).

The block protocol, which both MLP kinds speak (the counting and the layout read only these):

    shapes(d)    [(name, shape)] of its parameters, names relative to layers.l.mlp
    readers      [(output width, has bias)] of the linear maps reading the block's norm
    writes       rows of the maps writing into the residual stream (down rows + a bias)
    bias         whether it adds a constant of its own to the stream
    label        a short name for tables

The function is :func:`attnid.model.forward.mlp`; the counts are in :mod:`attnid.model.counting.mlp`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..layer.spec import AttentionSpec, SpecError

MLPS = ("relu", "gelu", "swiglu", "geglu", "relu2", "silu", "relu2glu")
SCORINGS = ("softmax", "topk_softmax", "sigmoid")
EXPERT_ACTIVATIONS = ("swiglu", "gpt_oss")


@dataclass(frozen=True)
class MLPSpec:
    """A dense MLP (module docstring): act(x W_up + b_up) W_down + b_down, or the gated (act(x W_gate) * x W_up) W_down."""

    d_ff: int  # m: hidden width
    kind: str = "gelu"  # relu | gelu | relu2 | silu (ungated) | swiglu | geglu | relu2glu (gated)
    bias: bool = False  # a bias on every map
    sub_norm: bool = False  # an RMSNorm with a gain on the hidden units before W_down (BitNet)

    def __post_init__(self):
        if isinstance(self.d_ff, bool) or not isinstance(self.d_ff, int) or self.d_ff <= 0:
            raise SpecError("d_ff", f"must be a positive integer, got {self.d_ff!r}")
        if self.kind not in MLPS:
            raise SpecError("mlp", f"must be one of {', '.join(MLPS)}, got {self.kind!r}")

    @property
    def gated(self) -> bool:
        return self.kind in ("swiglu", "geglu", "relu2glu")

    def shapes(self, d: int) -> list[tuple[str, tuple[int, ...]]]:
        """Parameter blocks in layout order: (gate,) up (d, m), their biases (m,), (sub_norm_gain (m,),) down (m, d),
        down_bias (d,)."""
        m = self.d_ff
        out = []
        for name in ("gate", "up") if self.gated else ("up",):
            out.append((name, (d, m)))
            if self.bias:
                out.append((f"{name}_bias", (m,)))
        if self.sub_norm:
            out.append(("sub_norm_gain", (m,)))
        out.append(("down", (m, d)))
        if self.bias:
            out.append(("down_bias", (d,)))
        return out

    @property
    def readers(self) -> list[tuple[int, bool]]:
        return [(self.d_ff, self.bias)] * (2 if self.gated else 1)

    @property
    def writes(self) -> int:
        return self.d_ff + self.bias

    @property
    def label(self) -> str:
        return f"ff{self.d_ff}{self.kind}" + ("mb" if self.bias else "") + ("sn" if self.sub_norm else "")


@dataclass(frozen=True)
class MoESpec:
    """A mixture-of-experts MLP (fields as in the module docstring); speaks the block protocol."""

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
    shared_width: int = 0  # the shared expert's width when it is not n_shared * d_expert (0: that product)
    shared_expert_gate: bool = False  # f_shared(x) times sigmoid(x w_s), w_s (d,) (Qwen2-MoE)
    selection_bias: bool = False  # a parameter (E,) added to the scores for the selection only (Ernie-4.5)
    topk_norm: float = 1.0  # p of the p-norm that norm_topk_prob divides by (DBRX: 1 or 2)

    def __post_init__(self):
        for name in ("n_experts", "top_k", "d_expert", "n_group", "topk_group"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SpecError(f"moe.{name}", f"must be a positive integer, got {value!r}")
        for name in ("n_shared", "shared_width"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SpecError(f"moe.{name}", f"must be an integer >= 0, got {value!r}")
        if (self.shared_width or self.shared_expert_gate) and not self.n_shared:
            raise SpecError("moe.n_shared", "a shared width or a shared-expert gate needs a shared expert (n_shared > 0)")
        if not (self.topk_norm >= 1 and math.isfinite(self.topk_norm)):
            raise SpecError("moe.topk_norm", f"must be a finite p >= 1, got {self.topk_norm!r}")
        if self.top_k > self.n_experts:
            raise SpecError("moe.top_k", f"{self.top_k} exceeds n_experts={self.n_experts}")
        if self.scoring not in SCORINGS:
            raise SpecError("moe.scoring", f"must be one of {', '.join(SCORINGS)}, got {self.scoring!r}")
        if self.activation not in EXPERT_ACTIVATIONS:
            raise SpecError(
                "moe.activation", f"must be one of {', '.join(EXPERT_ACTIVATIONS)}, got {self.activation!r}"
            )
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

    # the block protocol (module docstring)
    @property
    def d_ff(self) -> int:
        """One expert's width (a model whose first block routes takes it as its top-level d_ff)."""
        return self.d_expert

    @property
    def kind(self) -> str:
        return "swiglu"

    @property
    def d_shared(self) -> int:
        return self.shared_width or self.n_shared * self.d_expert

    def shapes(self, d: int) -> list[tuple[str, tuple[int, ...]]]:
        """Parameter blocks in layout order, names relative to layers.l.mlp: router (d, E), router_bias (E,),
        gate, up (E, d, m), gate_bias, up_bias (E, m), down (E, m, d), down_bias (E, d), shared_{gate,up} (d, m_s),
        shared_down (m_s, d), shared_expert_gate (d,)."""
        E, m = self.n_experts, self.d_expert
        out = [("router", (d, E))] + ([("router_bias", (E,))] if self.router_bias else [])
        out += [("selection_bias", (E,))] if self.selection_bias else []
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
        if self.shared_expert_gate:
            out.append(("shared_expert_gate", (d,)))
        return out

    @property
    def readers(self) -> list[tuple[int, bool]]:
        """(output width, has bias) of every linear map reading the block's norm."""
        experts = [(self.d_expert, self.expert_bias)] * (2 * self.n_experts)
        shared = [(self.d_shared, False)] * (2 * bool(self.n_shared)) + [(1, False)] * self.shared_expert_gate
        return [(self.n_experts, self.router_bias)] + experts + shared

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
        return self.relative and (self.scoring == "topk_softmax" or not self.norm_topk_prob or self.topk_norm == 1)

    @property
    def relative(self) -> bool:
        """Softmax-family weights unchanged by a common shift of the chosen logits (normalised over the chosen,
        or divided by their p-norm, or a softmax over every expert): they see differences of chosen logits only."""
        return (
            self.scoring == "topk_softmax"
            or self.norm_topk_prob
            or (self.scoring == "softmax" and self.top_k == self.n_experts)
        )

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
        parts += [f"shw{self.shared_width}" if self.shared_width else "", "shg" if self.shared_expert_gate else ""]
        parts += ["selb" if self.selection_bias else "", f"p{self.topk_norm:g}" if self.topk_norm != 1 else ""]
        return "-".join(p for p in parts if p)

    @classmethod
    def from_config(cls, mapping: dict) -> MoESpec:
        """A MoESpec from a mapping whose keys are the field names (an unknown key is refused by name)."""
        known = set(cls.__dataclass_fields__)
        for key in mapping:
            if key not in known:
                raise SpecError(f"moe.{key}", f"unknown field; known: {', '.join(sorted(known))}")
        return cls(**mapping)


@dataclass(frozen=True)
class LayerSpec:
    """One block: its attention layer and its MLP (an :class:`MLPSpec` or a :class:`MoESpec`)."""

    attention: AttentionSpec
    mlp: MLPSpec | MoESpec

    def __post_init__(self):
        if not isinstance(self.attention, AttentionSpec):
            raise SpecError("attention", f"must be an AttentionSpec, got {type(self.attention).__name__}")

    @property
    def label(self) -> str:
        return f"{self.attention.label}_{self.mlp.label}"


def pattern(layers) -> tuple[str, list]:
    """('abab...', [distinct LayerSpecs in order of first use]): which block each layer is."""
    distinct: list = []
    letters = []
    for layer in layers:
        if layer not in distinct:
            distinct.append(layer)
        i = distinct.index(layer)
        letters.append(chr(ord("a") + i) if i < 26 else f"<{i}>")
    return "".join(letters), distinct
