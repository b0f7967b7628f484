"""The whole-model vocabulary: :class:`ModelSpec`, one transformer language model as a function.

A model maps token ids (B, T), T <= seq_len <= max_positions, to logits (B, T, V):

    h_0 = s E[tok] (+ E_pos[0..T-1] if positions == "learned")      (B, T, d)   s = embed_scale
    (h_0 = Norm_emb(h_0) if embedding_norm)
    block, pre-LN sequential:   h = h + Attn(Norm_1 h);  h = h + MLP(Norm_2 h)
           pre-LN parallel:     h = h + Attn(Norm_1 h) + MLP(Norm_2 h)   (Norm_2 = Norm_1 if shared_norm)
           post-LN:             h = Norm_1(h + Attn h);  h = Norm_2(h + MLP h)
    logits = Norm_f(h) U (+ c)        U = E^T if tied, else its own (d, V) matrix; Norm_f if final_norm

Norm: LayerNorm (x - mean) / sqrt(var + eps) * g (+ b), or RMSNorm x / sqrt(mean x^2 + eps) * g;
Gemma stores the gain as w with g = 1 + w (a change of coordinates: counts are unchanged).
MLP: relu / gelu: act(x W_up + b_up) W_down + b_down; swiglu / geglu: (act(x W_gate) * (x W_up)) W_down
(act = SiLU / GELU(tanh)), biases on every map when mlp_bias. Attention: the project's layer,
one :class:`attnid.spec.AttentionSpec` shared by every block.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass

from ..spec import AttentionSpec, SpecError

NORMS = ("layernorm", "rmsnorm")
MLPS = ("relu", "gelu", "swiglu", "geglu")
POSITIONS = ("learned", "rope", "none")
NORM_POSITIONS = ("pre", "post")


@dataclass(frozen=True)
class ModelSpec:
    """Shapes and options of one decoder (or encoder) language model; fields as in the module docstring."""

    vocab_size: int  # V
    n_layers: int  # L
    attention: AttentionSpec  # every block's attention layer (its d_model is the model width d)
    d_ff: int  # m: MLP hidden width
    mlp: str = "gelu"  # relu | gelu | swiglu | geglu
    mlp_bias: bool = False
    norm: str = "layernorm"  # layernorm | rmsnorm
    norm_bias: bool = True  # LayerNorm's additive b (RMSNorm has none)
    norm_eps: float = 1e-5
    gemma_gain: bool = False  # gain stored as w, applied as 1 + w
    norm_position: str = "pre"  # pre | post
    parallel: bool = False  # attention and MLP read the same stream (GPT-J, GPT-NeoX, Falcon)
    shared_norm: bool = False  # parallel blocks with one norm for both branches (GPT-J, Falcon)
    positions: str = "learned"  # learned | rope | none
    max_positions: int = 8  # rows of the learned position table (the longest sequence the model takes)
    tied: bool = False  # unembedding = E^T
    final_norm: bool = True
    embedding_norm: bool = False  # a norm right after the embeddings (BERT)
    embed_scale: float = 1.0  # Gemma multiplies the embeddings by sqrt(d)
    lm_head_bias: bool = False
    seq_len: int | None = (
        None  # positions the model is used on (default max_positions); learned rows beyond it are unread
    )

    def __post_init__(self):
        if self.seq_len is None:
            object.__setattr__(self, "seq_len", self.max_positions)
        for name in ("vocab_size", "n_layers", "d_ff", "max_positions", "seq_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise SpecError(name, f"must be a positive integer, got {value!r}")
        if not isinstance(self.attention, AttentionSpec):
            raise SpecError("attention", f"must be an AttentionSpec, got {type(self.attention).__name__}")
        for name, allowed in (
            ("mlp", MLPS),
            ("norm", NORMS),
            ("positions", POSITIONS),
            ("norm_position", NORM_POSITIONS),
        ):
            if getattr(self, name) not in allowed:
                raise SpecError(name, f"must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if self.norm == "rmsnorm" and self.norm_bias:
            raise SpecError("norm_bias", "RMSNorm has no additive bias; set norm_bias false")
        if not (self.norm_eps >= 0 and math.isfinite(self.norm_eps)):
            raise SpecError("norm_eps", f"must be finite and >= 0, got {self.norm_eps!r}")
        if (self.positions == "rope") != (self.attention.rope_dims > 0):
            raise SpecError(
                "positions", f"'{self.positions}' but the attention spec has rope_dims={self.attention.rope_dims}"
            )
        if self.shared_norm and not self.parallel:
            raise SpecError("shared_norm", "only parallel blocks share a norm")
        if self.parallel and self.norm_position == "post":
            raise SpecError("parallel", "parallel blocks are modelled pre-LN only")
        if self.norm_position == "post" and self.final_norm:
            raise SpecError("final_norm", "a post-LN model ends with its last block's norm; set final_norm false")
        if self.seq_len > self.max_positions:
            raise SpecError("seq_len", f"{self.seq_len} exceeds max_positions={self.max_positions}")
        if self.attention.seq_len is not None and self.attention.seq_len < self.seq_len:
            raise SpecError("seq_len", f"{self.seq_len} exceeds the attention spec's seq_len={self.attention.seq_len}")

    @property
    def d_model(self) -> int:
        return self.attention.d_model

    @property
    def gated(self) -> bool:
        return self.mlp in ("swiglu", "geglu")

    def with_eps(self, scale: float) -> ModelSpec:
        """Every norm's eps (the model's and the attention layer's q/k norms) multiplied by `scale`;
        scale 0 is the exact-symmetry limit, where the weakly identified directions become exact."""
        attention = dataclasses.replace(self.attention, norm_eps=self.attention.norm_eps * scale)
        return self.replace(norm_eps=self.norm_eps * scale, attention=attention)

    def replace(self, **changes) -> ModelSpec:
        fields = asdict(self)
        fields["attention"] = self.attention
        fields.update(changes)
        return ModelSpec(**fields)

    def block_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """The flat layout's blocks in order, (name, shape) (the layout is `attnid.model.layout`)."""
        d, V, m, T = self.d_model, self.vocab_size, self.d_ff, self.max_positions
        shapes: list[tuple[str, tuple[int, ...]]] = [("embed", (V, d))]
        if self.positions == "learned":
            shapes.append(("pos", (T, d)))

        def norm(name):
            shapes.append((f"{name}.gain", (d,)))
            if self.norm_bias:
                shapes.append((f"{name}.bias", (d,)))

        if self.embedding_norm:
            norm("embed_norm")
        for layer in range(self.n_layers):
            prefix = f"layers.{layer}"
            norm(f"{prefix}.norm_1")
            shapes.append((f"{prefix}.attn", (self.attention.n_params,)))
            if not self.shared_norm:
                norm(f"{prefix}.norm_2")
            maps = (("gate", (d, m)), ("up", (d, m))) if self.gated else (("up", (d, m)),)
            for name, shape in maps:
                shapes.append((f"{prefix}.mlp.{name}", shape))
                if self.mlp_bias:
                    shapes.append((f"{prefix}.mlp.{name}_bias", (m,)))
            shapes.append((f"{prefix}.mlp.down", (m, d)))
            if self.mlp_bias:
                shapes.append((f"{prefix}.mlp.down_bias", (d,)))
        if self.final_norm:
            norm("final_norm")
        if not self.tied:
            shapes.append(("unembed", (d, V)))
        if self.lm_head_bias:
            shapes.append(("unembed_bias", (V,)))
        return shapes

    @property
    def n_params(self) -> int:
        """P: every parameter, including rows nothing reads."""
        return sum(math.prod(shape) for _, shape in self.block_shapes())

    def norm_names(self) -> list[str]:
        """Every norm of the model, in layout order."""
        names = ["embed_norm"] if self.embedding_norm else []
        for layer in range(self.n_layers):
            names.append(f"layers.{layer}.norm_1")
            if not self.shared_norm:
                names.append(f"layers.{layer}.norm_2")
        if self.final_norm:
            names.append("final_norm")
        return names

    @property
    def label(self) -> str:
        a = self.attention
        parts = [f"V{self.vocab_size}", f"L{self.n_layers}", a.label, f"ff{self.d_ff}{self.mlp}"]
        parts += ["mb" if self.mlp_bias else "", self.norm + ("" if self.norm_bias or self.norm == "rmsnorm" else "nb")]
        parts += [
            self.norm_position,
            "par" + ("1" if self.shared_norm else "2") if self.parallel else "",
            self.positions,
        ]
        parts += [
            f"T{self.seq_len}" + (f"of{self.max_positions}" if self.seq_len < self.max_positions else ""),
            "tied" if self.tied else "",
            "" if self.final_norm else "nofinal",
        ]
        parts += ["embnorm" if self.embedding_norm else "", "hb" if self.lm_head_bias else "", f"eps{self.norm_eps:g}"]
        return "_".join(p for p in parts if p)

    def to_row(self) -> dict:
        """A flat dict for a table row (the attention spec as its label)."""
        row = {k: v for k, v in asdict(self).items() if k != "attention"}
        return {"label": self.label, "attention": self.attention.label, "d_model": self.d_model, **row}
