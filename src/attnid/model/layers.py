"""One block of a whole model: :class:`LayerSpec` = its attention layer and its MLP (:class:`MLPSpec`).

A :class:`attnid.model.ModelSpec` is uniform by default (every block the top-level `attention`, `d_ff`,
`mlp`, `mlp_bias`); its optional `layers` field gives every block its own LayerSpec instead (Gemma-3's
local and global RoPE bases, DeepSeek's dense then routed MLPs, alternating windows, per-layer widths).
Only the blocks differ: the residual stream, its gauge, the embeddings and the norm kind are the
model's, so the counting rules of `attnid.model.counting` are sums over blocks of per-block terms.

An MLP-like spec speaks one small protocol, which an MLP of another kind (mixture of experts) can
implement to take a block's place:

    shapes(d)          [(name, shape)] of its parameters, names relative to layers.l.mlp
    readers            [(output width, has bias)] of the linear maps reading the block's norm
    writes             rows of the maps writing into the residual stream (down rows + a bias)
    hidden_scalings    dimension of its hidden-unit rescalings (ReLU, gated units)
    bias               whether it adds a constant of its own to the stream
    label              a short name for tables

The function of an MLPSpec is `attnid.model.forward.mlp`; its effective parameter count (rule 9 of
`attnid.model.counting`) is :meth:`MLPSpec.effective`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..spec import AttentionSpec, SpecError

MLPS = ("relu", "gelu", "swiglu", "geglu")


@dataclass(frozen=True)
class MLPSpec:
    """act(x W_up + b_up) W_down + b_down (relu, gelu) or (act(x W_gate) * x W_up) W_down (swiglu, geglu)."""

    d_ff: int  # m: hidden width
    kind: str = "gelu"  # relu | gelu | swiglu | geglu
    bias: bool = False  # a bias on every map

    def __post_init__(self):
        if isinstance(self.d_ff, bool) or not isinstance(self.d_ff, int) or self.d_ff <= 0:
            raise SpecError("d_ff", f"must be a positive integer, got {self.d_ff!r}")
        if self.kind not in MLPS:
            raise SpecError("mlp", f"must be one of {', '.join(MLPS)}, got {self.kind!r}")

    @property
    def gated(self) -> bool:
        return self.kind in ("swiglu", "geglu")

    def shapes(self, d: int) -> list[tuple[str, tuple[int, ...]]]:
        """Parameter blocks in layout order: (gate,) up (d, m), their biases (m,), down (m, d), down_bias (d,)."""
        m = self.d_ff
        out = []
        for name in ("gate", "up") if self.gated else ("up",):
            out.append((name, (d, m)))
            if self.bias:
                out.append((f"{name}_bias", (m,)))
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
    def hidden_scalings(self) -> int:
        """A positive scale per hidden unit: relu(c x) / c, and the gated units' up column c, down row 1/c."""
        return self.d_ff if self.kind in ("relu", "swiglu", "geglu") else 0

    def effective(self, d_in: int, d_out: int, beta: bool) -> int:
        """Parameters the function sees when it reads a d_in-dim affine image (an offset when beta) and writes
        d_out dims: every read map's columns and constant, the writes, less the hidden scalings."""
        m = self.d_ff
        reads = len(self.readers) * m * (d_in + (self.bias or beta))
        return reads + m * d_out + self.bias * d_out - self.hidden_scalings

    @property
    def label(self) -> str:
        return f"ff{self.d_ff}{self.kind}" + ("mb" if self.bias else "")


@dataclass(frozen=True)
class LayerSpec:
    """One block: its attention layer and its MLP (an :class:`MLPSpec`, or another kind with its protocol)."""

    attention: AttentionSpec
    mlp: MLPSpec

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
