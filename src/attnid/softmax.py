"""Softmax over a short last dimension, in the layout the CPU kernel is fast in: :func:`softmax_last`.

PyTorch's CPU softmax over the innermost dimension runs row by row; over an outer dimension it vectorises
across the inner one. For attention scores (..., T_q, T_k) with a short key axis the second is several times
faster, so the scores are laid out (..., T_k, T_q), normalised over dim -2 and viewed back: the same numbers up
to rounding (measured max difference 5.6e-17 in float64). Measured here, forward + backward of 2M float64
entries, one thread, ms: T_k = 8: 86 -> 15; 16: 68 -> 21; 32: 44 -> 29; 64: 24 -> 26; float32 gains only at
T_k <= 8 (48 against 88 at 4). So the transposed layout is taken up to SHORT[dtype] keys.

:class:`ShortSoftmax` applies it to library code (a `transformers` attention) without editing it: inside that
TorchFunctionMode, a softmax over the last dimension goes through :func:`softmax_last`.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

SHORT = {torch.float64: 32}  # the longest last dimension taken through the transposed layout (others: DEFAULT_SHORT)
DEFAULT_SHORT = 8


def softmax_last(x: torch.Tensor) -> torch.Tensor:
    """softmax(x, dim=-1), computed over dim -2 of x's transpose when the last dimension is short."""
    if x.dim() < 2 or x.shape[-1] > SHORT.get(x.dtype, DEFAULT_SHORT):
        return x.softmax(dim=-1)
    return x.transpose(-1, -2).contiguous().softmax(dim=-2).transpose(-1, -2)


_SOFTMAX = (torch.nn.functional.softmax, torch.softmax, torch.Tensor.softmax)


class ShortSoftmax(TorchFunctionMode):
    """Inside this mode a softmax over the last dimension (dim -1 or ndim - 1) is :func:`softmax_last` (a dtype
    argument casts first, so a mode underneath, `attnid.float64.KeepFloat64`, still sees the cast)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _SOFTMAX:
            x = args[0]
            dim = kwargs.get("dim", args[1] if len(args) > 1 else None)
            dtype = kwargs.get("dtype")
            if dtype is None and func is not torch.nn.functional.softmax and len(args) > 2:
                dtype = args[2]  # torch.softmax(x, dim, dtype), x.softmax(dim, dtype); F.softmax's third is _stacklevel
            if dim is not None and dim in (-1, x.dim() - 1):
                return softmax_last(x if dtype is None else x.to(dtype))
        return func(*args, **kwargs)
