"""The words an AttentionSpec accepts for its fields: bias subsets ('qkvo', 'none', letters in any order), RoPE
words ('none', 'half', 'full', an even integer) and positive integers, each a SpecError naming the field when wrong
(torch-free; `attnid.layer.spec` builds the spec from them)."""

from __future__ import annotations

import math
from numbers import Integral, Real

from ..errors import SpecError

BIAS_LETTERS = "qkvo"


def normalize_biases(biases) -> str:
    """Canonical bias string: a subset of 'qkvo' in that order ('' = no bias).

    Accepts 'none', '', None, an iterable of letters, or a string such as 'vq'.
    """
    if biases is None or (isinstance(biases, float) and math.isnan(biases)):
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


def bias_text(biases) -> str:
    """How tables and configs write a bias subset: canonical letters, or 'none' for no bias."""
    return normalize_biases(biases) or "none"


def parse_rope(value, d_head_qk: int) -> int:
    """Rotated dims per query/key head from the one RoPE vocabulary.

    'none' -> 0; 'full' -> every complete plane of the head, 2 floor(k/2); 'half' -> the complete
    planes inside the first half of the head, 2 floor(floor(k/2) / 2); an integer (or its string)
    -> that many dims. So for an odd head size k = 5 'full' is 4 and 'half' is 2; for k = 6 'half'
    is 2 (three dims hold one complete plane). Evenness and p <= k are checked by AttentionSpec.
    """
    if isinstance(value, bool):
        raise SpecError("rope_dims", f"expected none, half, full or an even integer, got {value!r}")
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real) and float(value).is_integer():
        return int(value)
    text = str(value).strip().lower()
    if text == "none":
        return 0
    if text == "full":
        return d_head_qk // 2 * 2
    if text == "half":
        return (d_head_qk // 2) // 2 * 2
    try:
        return int(text)
    except ValueError:
        raise SpecError("rope_dims", f"expected none, half, full or an even integer, got {value!r}") from None


def checked_rope(p: int, d_head_qk: int) -> int:
    """p itself, or a SpecError naming rope_dims when it is negative, odd or above the head size."""
    for ok, why in ((p >= 0, f"must be >= 0, got {p}"), (p % 2 == 0, f"must be even (RoPE rotates pairs of dims), got {p}"),
                    (p <= d_head_qk, f"{p} exceeds the query/key head size d_head_qk={d_head_qk}")):  # fmt: skip
        if not ok:
            raise SpecError("rope_dims", why)
    return p


def positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise SpecError(name, f"must be an integer, got {value!r}")
    if value <= 0:
        raise SpecError(name, f"must be positive, got {value}")
    return int(value)
