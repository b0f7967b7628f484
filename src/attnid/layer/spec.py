"""The attention configuration every module speaks: :class:`AttentionSpec`, and every conversion.

One spec fixes the shapes of one self-attention layer (row convention, X in R^{T x d}):

    query head h in KV group g(h) = h // (H / G)
    S_h = RoPE(X W_Q^h + b_Q^h) RoPE(X W_K^g + b_K^g)^T / sqrt(d_k)      (T, T)
    A_h = softmax(S_h) over keys (optionally causal)                      (T, T)
    Y   = sum_h A_h (X W_V^g + b_V^g) W_O^h + b_O                         (T, d)

RoPE rotates the first p = rope_dims dims of each query/key head in planes (0,1), (2,3), ...
at frequencies omega_i = rope_base^(-2i/p), i = 0..p/2-1. The number of parameters is

    P = H d k + G d k + G d v + H v d  +  [b_Q] H k + [b_K] G k + [b_V] G v + [b_O] d   (d_cross for d in G d)

(arithmetic: no torch here). This module owns every conversion to and from a spec, so no other
module builds one from loose fields:

    config mapping  <->  AttentionSpec.from_config / spec.to_config   (keys = field names)
    table row       <->  AttentionSpec.from_row / spec.to_row         (label + fields)
    RoPE words          parse_rope: "none" | "half" | "full" | an even integer (`.spec_words`, with bias subsets)
    a short name        spec.label

Modern variants (q/k norms, sinks, softcapping, sliding windows, ALiBi, latent attention and its indexer, a norm on
the heads' output, a sigmoid gate on the heads' output, a gain-free norm on the values, chunks, a query temperature,
cross-attention: K_g, V_g read a second input C (S, d_cross), W_K^g (d_cross, k), W_V^g (d_cross, v)): fields after
seq_len, checked and shaped in :mod:`attnid.layer.spec_variants` (latent: `attnid.layer.spec_latent`).

Glossary of the layer level (one name, one meaning, across the package; the model level's is
`attnid.model.spec`):

    spec              an AttentionSpec: the shapes and options of one layer (never loose fields)
    P, n_params       the parameters of a spec (`spec.n_params`, the one definition), flat in the order of
                      `block_shapes` (`attnid.layer.layout.Layout`)
    label             a spec's short, unique, filename-safe name
    count             `attnid.layer.counting.count`: the exact numbers of a spec (`Counts`)
    unidentified      the dimension of the fibre: parameter directions that leave the function unchanged
                      (P - rank of the Jacobian at a generic point); identified = P - unidentified
    weakly identified exact symmetries that a norm's eps > 0 breaks (singular values ~ eps): their own class
    breakdown, source the parts of the unidentified count, by what explains them (query_key, value_output, ...)
    part              query_key or value_output: the two halves of a layer's symmetry (`attnid.symmetry.PARTS`)
    hypotheses        what a count assumes (generic inputs, RoPE frequencies, T >= T_min); T_min is
                      `attnid.layer.counting.min_seq_len`
    measured, judge   P - numerical rank of the Jacobian, with its singular-value gap (`attnid.jacobian`)
    tangent, orbit    the directions of the symmetry group's action at a point (`attnid.symmetry`)
    SpecError         a bad value, the message naming the field, key or flag (`attnid.errors`)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from numbers import Real

from ..errors import SpecError
from .spec_latent import latent_block_shapes
from .spec_words import BIAS_LETTERS, positive_int, bias_text, checked_rope, normalize_biases, parse_rope
from .spec_variants import VARIANT_DEFAULTS, VARIANT_LABEL, checked_variants, variant_block_shapes

DEFAULT_ROPE_BASE = 10000.0
# Flat parameter blocks in layout order, and the bias letter that switches each bias block on.
BLOCK_ORDER = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O")
BIAS_OF_BLOCK = {"b_Q": "q", "b_K": "k", "b_V": "v", "b_O": "o"}
# Columns of a table row, in order (to_row); rope_base and seq_len follow only when not default.
ROW_COLUMNS = ("label", "d_model", "n_heads", "n_kv_heads", "d_head_qk", "d_head_v", "rope_dims", "biases", "causal")


_INT_FIELDS = ("d_model", "n_heads", "n_kv_heads", "d_head_qk", "d_head_v", "rope_dims", "seq_len")
_INT_FIELDS += ("sliding_window", "kv_lora_rank", "q_lora_rank", "attention_chunk", "temperature_floor", "d_cross")
_INT_FIELDS += ("shared_key_dims", "index_topk", "index_heads", "index_head_dim")
_BOOL_FIELDS = ("causal", "sinks", "alibi", "sub_norm", "v_norm", "raw_latent_query", "shared_key_norm")


@dataclass(frozen=True)
class AttentionSpec:
    """Shapes and options of one multi-head self-attention layer."""

    d_model: int  # d: width of the residual stream (input and output rows)
    n_heads: int  # H: number of query heads
    n_kv_heads: int | None = None  # G: key/value groups; H = MHA, 1 = MQA (default H)
    d_head_qk: int | None = None  # d_k: query/key head size (default d_model // n_heads)
    d_head_v: int | None = None  # d_v: value head size (default d_head_qk)
    rope_dims: int | str = 0  # p: rotated dims per query/key head (even, <= d_k; 0 = no RoPE), or a RoPE word
    biases: str = ""  # subset of 'qkvo': which of b_Q, b_K, b_V, b_O exist
    causal: bool = False  # mask keys after the query position
    rope_base: float = DEFAULT_ROPE_BASE  # RoPE frequencies base^(-2i/p), i = 0..p/2-1
    seq_len: int | None = None  # T: positions per sequence; None = long enough for every count
    # Modern variants (module docstring); the defaults are plain attention.
    # none | rms_head (one gain for all heads) | rms_all (across heads) | layernorm_head | layernorm_heads (a gain
    # per head) | rms_head_rotated (after RoPE) | rms_plain (no gain): attnid.layer.spec_variants
    qk_norm: str = "none"
    norm_eps: float = 1e-6  # eps of the norms inside the layer; 0 makes their scale symmetries exact
    sinks: bool = False  # one learnable logit per head joins every softmax row (GPT-OSS)
    softcap: float = 0.0  # scores -> softcap * tanh(scores / softcap) (Gemma-2); 0 = off
    sliding_window: int = 0  # a query sees its last `sliding_window` keys, itself included; 0 = all
    alibi: bool = False  # fixed bias -m_h (i - j) on the scores, slopes m_h = 2^(-8 (h+1) / H)
    kv_lora_rank: int = 0  # multi-head latent attention: rank of the compressed key/value (0 = off)
    q_lora_rank: int = 0  # MLA: rank of the compressed query (0 = a full query projection)
    sub_norm: bool = False  # an RMSNorm with a gain (H, v) across all heads' outputs, before W_O (BitNet)
    # none | element (each head's output times sigmoid(X W_G^h), W_G^h (d, v): Qwen3-Next) | head (times one
    # sigmoid(X w_G^h) per head and token, W_G (H, d): LFM3): attnid.layer.spec_variants
    output_gate: str = "none"
    v_norm: bool = False  # an RMSNorm without a gain on every value head (Gemma-4)
    attention_chunk: int = 0  # causal attention within chunks of this many positions (Llama-4); 0 = off
    # queries at index i times 1 + temperature_scale log(1 + floor((i + 1) / temperature_floor)) (Llama-4's NoPE layers)
    temperature_floor: int = 0  # 0 = off
    temperature_scale: float = 0.1
    gate_fn: str = "sigmoid"  # the output gate's function: sigmoid | softplus (Laguna): attnid.layer.spec_gates
    gate_bias: bool = False  # one bias per head inside the output gate (Beam)
    diff_lambda_init: float = 0.0  # differential attention (DiffLlama) with this lambda_init; 0 = off
    d_cross: int = 0  # cross-attention: keys and values read the encoder's states C (S, d_cross), no mask; 0 = off
    # latent attention's unrotated shared key (Kimi), DeepSeek's sparse-attention indexer: attnid.layer.spec_latent
    shared_key_dims: int = 0  # key dims X W_KR shared by all heads that no RoPE turns; 0 = none
    shared_key_norm: bool = False  # an RMSNorm with a gain on the shared key X W_KR before RoPE (Dots3-Note)
    raw_latent_query: bool = False  # the query and the output gate read [c_Q, X W_DQ] (A.X-K2's q_gate_proj)
    index_topk: int = 0  # an indexer keeps index_topk keys per query (counted on T <= index_topk); 0 = off
    index_heads: int = 0  # the indexer's heads (0: none of its own, the layer reuses another layer's selection)
    index_head_dim: int = 0  # the indexer's head size

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "d_model", positive_int("d_model", self.d_model))
        set_(self, "n_heads", positive_int("n_heads", self.n_heads))
        set_(
            self,
            "n_kv_heads",
            positive_int("n_kv_heads", self.n_heads if self.n_kv_heads is None else self.n_kv_heads),
        )
        if self.n_heads % self.n_kv_heads:
            raise SpecError("n_kv_heads", f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads}")
        if self.d_head_qk is None:
            if self.d_model % self.n_heads:
                raise SpecError(
                    "d_head_qk",
                    f"no default: d_model={self.d_model} is not divisible by n_heads={self.n_heads}; give it explicitly",
                )
            set_(self, "d_head_qk", self.d_model // self.n_heads)
        set_(self, "d_head_qk", positive_int("d_head_qk", self.d_head_qk))
        set_(self, "d_head_v", positive_int("d_head_v", self.d_head_qk if self.d_head_v is None else self.d_head_v))
        set_(self, "rope_dims", checked_rope(parse_rope(self.rope_dims, self.d_head_qk), self.d_head_qk))
        base = self.rope_base
        if isinstance(base, bool) or not isinstance(base, Real) or not 1.0 < float(base) < math.inf:
            raise SpecError("rope_base", f"must be a finite number > 1, got {base!r}")
        set_(self, "rope_base", float(base))
        set_(self, "biases", normalize_biases(self.biases))
        if not isinstance(self.causal, bool):
            if type(self.causal).__name__ == "bool_":  # numpy bool from a table
                set_(self, "causal", bool(self.causal))
            else:
                raise SpecError("causal", f"must be true or false, got {self.causal!r}")
        if self.seq_len is not None:
            set_(self, "seq_len", positive_int("seq_len", self.seq_len))
        for name, value in checked_variants(self).items():
            set_(self, name, value)

    def variants(self) -> dict:
        """The variant fields that differ from plain attention, name -> value."""
        return {k: getattr(self, k) for k, v in VARIANT_DEFAULTS.items() if getattr(self, k) != v}

    @property
    def has_norm(self) -> bool:
        """Does the layer hold a norm (q/k norms, or MLA's latent norms), so that norm_eps matters?"""
        return self.qk_norm != "none" or self.kv_lora_rank > 0 or self.sub_norm or self.v_norm or self.diff_lambda_init > 0

    # Short names used in formulas.
    @property
    def d(self) -> int:
        return self.d_model

    @property
    def H(self) -> int:
        return self.n_heads

    @property
    def G(self) -> int:
        return self.n_kv_heads

    @property
    def group_size(self) -> int:
        """r = H / G: query heads sharing one key/value head."""
        return self.n_heads // self.n_kv_heads

    @property
    def rope_planes(self) -> int:
        """p / 2: rotation planes per query/key head."""
        return self.rope_dims // 2

    def rope_frequencies(self) -> list[float]:
        """omega_i = rope_base^(-2i/p), i = 0..p/2-1 (radians per position), as the layer computes them."""
        p = self.rope_dims
        return [self.rope_base ** (-i / p) for i in range(0, p, 2)]

    def has_bias(self, letter: str) -> bool:
        return letter in self.biases

    def group_of(self, head: int) -> int:
        """KV group of query head `head` (consecutive heads share a group, as in LLaMA/Mistral)."""
        return head // self.group_size

    def block_shapes(self) -> dict[str, tuple[int, ...]]:
        """The flat layout's blocks in order, name -> shape; absent biases are left out.

        W_Q (H, d, k), b_Q (H, k), W_K (G, c, k), b_K (G, k), W_V (G, c, v), b_V (G, v), W_O (H, v, d), b_O (d,)
        with c = d_cross for cross-attention, else d.
        """
        d, H, G, k, v = self.d_model, self.n_heads, self.n_kv_heads, self.d_head_qk, self.d_head_v
        c = self.d_cross or d  # the width of the input keys and values read
        if self.kv_lora_rank:
            return latent_block_shapes(self, variant_block_shapes(self))  # sinks and output gates too
        shapes = {
            "W_Q": (H, d, k),
            "b_Q": (H, k),
            "W_K": (G, c, k),
            "b_K": (G, k),
            "W_V": (G, c, v),
            "b_V": (G, v),
            "W_O": (H, v, d),
            "b_O": (d,),
        }
        blocks = {n: shapes[n] for n in BLOCK_ORDER if n not in BIAS_OF_BLOCK or self.has_bias(BIAS_OF_BLOCK[n])}
        return blocks | variant_block_shapes(self)

    @property
    def n_params(self) -> int:
        """P: all parameters of the layer (weights and the biases the spec has)."""
        return sum(math.prod(shape) for shape in self.block_shapes().values())

    @property
    def label(self) -> str:
        """A short, unique, filename-safe name, e.g. d16_h4_g2_k4_v4_r2_bqk_c.

        A non-default RoPE base is appended as base<value> (shortest exact form, so two different
        bases never share a label) and a fixed sequence length as T<value>.
        """
        parts = [
            f"d{self.d_model}",
            f"h{self.n_heads}",
            f"g{self.n_kv_heads}",
            f"k{self.d_head_qk}",
            f"v{self.d_head_v}",
        ]
        parts.append(f"r{self.rope_dims}")
        parts.append(f"b{self.biases or 'none'}")
        if self.causal:
            parts.append("c")
        if self.rope_base != DEFAULT_ROPE_BASE:
            short = f"{self.rope_base:g}"
            parts.append(f"base{short if float(short) == self.rope_base else repr(self.rope_base)}")
        if self.seq_len is not None:
            parts.append(f"T{self.seq_len}")
        parts += [VARIANT_LABEL[name](value) for name, value in self.variants().items()]
        return "_".join(parts)

    # Conversions.
    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_config(cls, mapping) -> AttentionSpec:
        """A spec from a mapping whose keys are field names; an unknown key is a SpecError naming it."""
        known = cls.field_names()
        for key in mapping:
            if key not in known:
                raise SpecError(str(key), f"unknown spec key; expected one of {', '.join(known)}")
        for key in ("d_model", "n_heads"):
            if key not in mapping:
                raise SpecError(key, "missing (required)")
        return cls(**dict(mapping))

    def to_config(self) -> dict:
        """Every field by name (biases 'none' when empty); from_config(to_config()) == self."""
        config = {name: getattr(self, name) for name in self.field_names()}
        config["biases"] = bias_text(self.biases)
        return config

    def to_row(self, label: bool = True) -> dict:
        """A flat table row: ROW_COLUMNS (biases 'none' when empty; without `label` if label=False),
        then rope_base and seq_len when they are not the default."""
        row = {c: getattr(self, c) for c in ROW_COLUMNS[1:]}
        row["biases"] = bias_text(self.biases)
        if label:
            row = {"label": self.label, **row}
        if self.rope_base != DEFAULT_ROPE_BASE:
            row["rope_base"] = self.rope_base
        if self.seq_len is not None:
            row["seq_len"] = self.seq_len
        row.update(self.variants())
        return row

    @classmethod
    def from_row(cls, row) -> AttentionSpec:
        """The spec of a table row (a dict or a pandas row): field columns are read, others ignored.

        Missing or empty cells (NaN, None, '') mean the default; integral floats (pandas turns an int
        column with gaps into floats) become ints. A `label` column, when present, must match.
        """
        get = row.get if hasattr(row, "get") else lambda key, default=None: getattr(row, key, default)
        values = {}
        for name in cls.field_names():
            value = get(name, None)
            if (
                value is None
                or (isinstance(value, float) and math.isnan(value))
                or (isinstance(value, str) and not value.strip())
            ):
                continue
            if hasattr(value, "item") and not isinstance(value, str):  # numpy scalar -> Python scalar
                value = value.item()
            if isinstance(value, float) and value.is_integer() and name != "rope_base":
                value = int(value)
            if isinstance(value, str) and name in _INT_FIELDS:
                try:  # '3' or '3.0' (an int column with gaps, read as text)
                    number = float(value)
                except ValueError:
                    number = None
                if number is not None and number.is_integer():
                    value = int(number)
            if isinstance(value, str) and name == "rope_base":
                try:
                    value = float(value)
                except ValueError:
                    raise SpecError("rope_base", f"must be a number > 1, got {value!r}") from None
            if name in _BOOL_FIELDS and isinstance(value, str):
                if value.strip().lower() not in ("true", "false"):
                    raise SpecError(name, f"must be true or false, got {value!r}")
                value = value.strip().lower() == "true"
            values[name] = value
        spec = cls.from_config(values)
        label = get("label", None)
        if isinstance(label, str) and label and label != spec.label:
            raise SpecError("label", f"row label {label!r} does not match its fields ({spec.label})")
        return spec
