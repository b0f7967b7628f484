"""attnid.softmax: the transposed-layout softmax equals torch's to rounding (values and gradients, masked rows
included), and ShortSoftmax reroutes library softmax calls over the last dimension only, keeping their dtypes."""

import pytest
import torch
import torch.nn.functional as F

from attnid.float64 import KeepFloat64
from attnid.softmax import SHORT, ShortSoftmax, softmax_last


@pytest.mark.parametrize("shape", [(3, 5, 8, 8), (2, 4, 1, 12), (7, 32, 32), (4, 40), (6,)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_softmax_last_is_softmax(shape, dtype):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    if len(shape) >= 2 and shape[-1] == shape[-2]:  # a causal mask: -inf above the diagonal
        x = x.masked_fill(torch.ones(shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ours, theirs = softmax_last(a), b.softmax(-1)
    weights = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    (ours * weights).sum().backward()
    (theirs * weights).sum().backward()
    eps = torch.finfo(dtype).eps
    assert ours.dtype == dtype and ours.shape == theirs.shape
    assert float((ours - theirs).detach().abs().max()) <= 8 * eps
    assert float((a.grad - b.grad).abs().max()) <= 32 * eps * float(weights.abs().max())


def test_the_transposed_layout_is_taken_for_short_float64_rows_only():
    x = torch.randn(2, 3, SHORT[torch.float64])
    assert not softmax_last(x.double()).is_contiguous()  # the transposed layout, viewed back
    assert softmax_last(torch.randn(2, 3, SHORT[torch.float64] + 1, dtype=torch.float64)).is_contiguous()


def test_short_softmax_reroutes_last_dim_calls_and_keeps_the_cast():
    x = torch.randn(4, 6, 6, dtype=torch.float64)
    with ShortSoftmax():
        y = F.softmax(x, dim=-1, dtype=torch.float32)
        z = torch.softmax(x, 0)  # not the last dimension: torch's own
    assert y.dtype == torch.float32 and not y.is_contiguous()
    assert torch.allclose(y, x.float().softmax(-1), atol=1e-6) and torch.equal(z, x.softmax(0))
    with KeepFloat64(), ShortSoftmax():  # the library's float32 cast becomes a float64 one underneath
        w = x.softmax(dim=2, dtype=torch.float32)
    assert w.dtype == torch.float64 and float((w - x.softmax(-1)).abs().max()) < 1e-15
