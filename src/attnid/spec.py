"""The attention configuration every module speaks: :class:`AttentionSpec`.

One spec fixes the shapes of one self-attention layer (row convention, X in R^{T x d}):

    query head h in KV group g(h) = h // (H / G)
    S_h = RoPE(X W_Q^h + b_Q^h) RoPE(X W_K^g + b_K^g)^T / sqrt(d_k)      (T, T)
    A_h = softmax(S_h) over keys (optionally causal)                      (T, T)
    Y   = sum_h A_h (X W_V^g + b_V^g) W_O^h + b_O                         (T, d)

Counting, the layer, the Jacobian check and the symmetry tools all take a spec.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

BIAS_LETTERS = "qkvo"


class SpecError(ValueError):
    """A spec field has a bad value; the message names the field."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name


def normalize_biases(biases) -> str:
    """Canonical bias string: a subset of 'qkvo' in that order ('' = no bias).

    Accepts 'none', '', an iterable of letters, or a string such as 'vq'.
    """
    if biases is None:
        return ""
    if isinstance(biases, str):
        text = biases.strip().lower()
        if text in ("", "none"):
            return ""
        letters = list(text)
    else:
        letters = [str(b).lower() for b in biases]
    bad = sorted(set(letters) - set(BIAS_LETTERS))
    if bad:
        raise SpecError("biases", f"unknown bias letter(s) {''.join(bad)!r}; use a subset of 'qkvo' or 'none'")
    if len(set(letters)) != len(letters):
        raise SpecError("biases", f"repeated bias letter in {''.join(letters)!r}")
    return "".join(b for b in BIAS_LETTERS if b in letters)


@dataclass(frozen=True)
class AttentionSpec:
    """Shapes and options of one multi-head self-attention layer."""

    d_model: int  # d: width of the residual stream (input and output rows)
    n_heads: int  # H: number of query heads
    n_kv_heads: int | None = None  # G: key/value groups; H = MHA, 1 = MQA (default H)
    d_head_qk: int | None = None  # d_k: query/key head size (default d_model // n_heads)
    d_head_v: int | None = None  # d_v: value head size (default d_head_qk)
    rope_dims: int = 0  # p: rotated dims per query/key head (even, <= d_k; 0 = no RoPE)
    biases: str = ""  # subset of 'qkvo': which of b_Q, b_K, b_V, b_O exist
    causal: bool = False  # mask keys after the query position
    rope_base: float = 10000.0  # RoPE frequencies base^(-2i/p), i = 0..p/2-1

    def __post_init__(self):
        def positive_int(name, value):
            if isinstance(value, bool) or not isinstance(value, int):
                raise SpecError(name, f"must be an integer, got {value!r}")
            if value <= 0:
                raise SpecError(name, f"must be positive, got {value}")

        positive_int("d_model", self.d_model)
        positive_int("n_heads", self.n_heads)
        if self.n_kv_heads is None:
            object.__setattr__(self, "n_kv_heads", self.n_heads)
        positive_int("n_kv_heads", self.n_kv_heads)
        if self.n_heads % self.n_kv_heads:
            raise SpecError("n_kv_heads", f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads}")
        if self.d_head_qk is None:
            if self.d_model % self.n_heads:
                raise SpecError(
                    "d_head_qk",
                    f"no default: d_model={self.d_model} is not divisible by n_heads={self.n_heads}; give it explicitly",
                )
            object.__setattr__(self, "d_head_qk", self.d_model // self.n_heads)
        positive_int("d_head_qk", self.d_head_qk)
        if self.d_head_v is None:
            object.__setattr__(self, "d_head_v", self.d_head_qk)
        positive_int("d_head_v", self.d_head_v)
        if isinstance(self.rope_dims, bool) or not isinstance(self.rope_dims, int):
            raise SpecError("rope_dims", f"must be an integer, got {self.rope_dims!r}")
        if self.rope_dims < 0:
            raise SpecError("rope_dims", f"must be >= 0, got {self.rope_dims}")
        if self.rope_dims % 2:
            raise SpecError("rope_dims", f"must be even (RoPE rotates pairs of dims), got {self.rope_dims}")
        if self.rope_dims > self.d_head_qk:
            raise SpecError("rope_dims", f"{self.rope_dims} exceeds the query/key head size d_head_qk={self.d_head_qk}")
        if not float(self.rope_base) > 1.0:
            raise SpecError("rope_base", f"must be > 1, got {self.rope_base}")
        object.__setattr__(self, "rope_base", float(self.rope_base))
        object.__setattr__(self, "biases", normalize_biases(self.biases))
        if not isinstance(self.causal, bool):
            raise SpecError("causal", f"must be true or false, got {self.causal!r}")

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

    def has_bias(self, letter: str) -> bool:
        return letter in self.biases

    def group_of(self, head: int) -> int:
        """KV group of query head `head` (consecutive heads share a group, as in LLaMA/Mistral)."""
        return head // self.group_size

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def label(self) -> str:
        """A short, unique, filename-safe name, e.g. d16_h4_g2_k4_v4_r2_bqk_c."""
        parts = [f"d{self.d_model}", f"h{self.n_heads}", f"g{self.n_kv_heads}", f"k{self.d_head_qk}", f"v{self.d_head_v}"]
        parts.append(f"r{self.rope_dims}")
        parts.append(f"b{self.biases or 'none'}")
        if self.causal:
            parts.append("c")
        if self.rope_base != 10000.0:
            parts.append(f"base{self.rope_base:g}")
        return "_".join(parts)


def parse_rope(value, d_head_qk: int) -> int:
    """'none' -> 0, 'full' -> d_head_qk, an integer string -> that many dims."""
    text = str(value).strip().lower()
    if text == "none":
        return 0
    if text == "full":
        return d_head_qk
    try:
        return int(text)
    except ValueError:
        raise SpecError("rope_dims", f"expected none, full or an even integer, got {value!r}") from None
