"""Float64 through library code that casts down: :class:`KeepFloat64`.

Hugging Face attention code casts to float32 inside softmax (``softmax(..., dtype=torch.float32)``),
q/k norms (``.to(torch.float32)``) and rotary tables (``.float()``). Inside this
``torch.overrides.TorchFunctionMode`` each such cast becomes a float64 one, so rounding stays at 1e-16 and
a rank read at 1e-10 is not spoiled (a float32 cast reads a Llama attention module with biases as 40
instead of 48), without editing the library's code. A float filled by ``torch.full`` without a dtype is made
float64 too (XGLM fills float64's smallest value, which the default float32 cannot hold).
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

DTYPE = torch.float64
_LOW = (torch.float32, torch.float16, torch.bfloat16)


class KeepFloat64(TorchFunctionMode):
    """Inside this mode every cast to a lower float type becomes a cast to float64."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if kwargs.get("dtype") in _LOW:
            kwargs["dtype"] = DTYPE
        if func in (torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16):
            return args[0].to(DTYPE)
        if func is torch.full and "dtype" not in kwargs and len(args) > 1 and isinstance(args[1], float):
            kwargs["dtype"] = DTYPE
        if func in (torch.Tensor.to, torch.Tensor.type):
            args = tuple(DTYPE if a in _LOW else a for a in args)
        return func(*args, **kwargs)
