"""The paper's sequence-length bound, measured: below T_min the Jacobian finds G * delta(T) extra directions.

Without biases the query-key parameters of a KV group reach the output only through the forms
B_n = W_Q^h R_n W_K^T at the offsets n != 0 that a query sees (T - 1 of them causal, 2 (T - 1)
without a mask) and the symmetric part of B_0. The (r + 1) d k - c_qk dimensions the group's
query-key side determines (c_qk: its count) must fit in r (n_T d^2 + d (d + 1) / 2) numbers, so

    N(T) >= count + G * delta(T),  delta(T) = max(0, (r + 1) d k - c_qk - r (n_T d^2 + d (d + 1) / 2)).

Each case below is measured at a T where delta > 0 and where delta = 0, and the measured N equals
count + G delta(T) in both (equality is what the paper reports; the bound alone is proved).
The Jacobian is taken directly on :func:`attnid.attention.attention` with a small RoPE base so
that every plane turns at these short lengths.
"""

import math

import pytest
import torch
from torch.func import jacrev, vmap

from attnid.attention import attention
from attnid.counting import count
from attnid.layout import Layout
from attnid.spec import AttentionSpec

RTOL = 1e-10


def deficit(spec: AttentionSpec, T: int) -> int:
    """G * delta(T) of the paper's sequence-length proposition (no biases)."""
    d, k, r, G = spec.d_model, spec.d_head_qk, spec.group_size, spec.n_kv_heads
    offsets = T - 1 if spec.causal else 2 * (T - 1)
    c_qk = count(spec).breakdown["query_key"] // G
    return G * max(0, (r + 1) * d * k - c_qk - r * (offsets * d * d + d * (d + 1) // 2))


def measured(spec: AttentionSpec, T: int, seed: int = 0, oversample: int = 4) -> int:
    """P - rank of the Jacobian of all outputs over B random sequences of length T."""
    layout = Layout(spec)
    P = layout.size
    gen = torch.Generator().manual_seed(seed)
    theta = layout.init(gen)
    pairs = spec.n_heads * (T * (T - 1) // 2 if spec.causal else T * (T - 1))  # query-key pairs per sequence
    batch = max(4, math.ceil(oversample * P / (T * spec.d_model)), math.ceil(oversample * P / pairs))
    x = torch.randn(batch, T, spec.d_model, generator=gen, dtype=torch.float64)
    jac = vmap(jacrev(lambda th, xs: attention(th, xs, spec, layout)), in_dims=(None, 0))(theta, x)
    sigma = torch.linalg.svdvals(jac.reshape(-1, P))  # (B T d, P) -> singular values
    return P - int((sigma > RTOL * sigma.max()).sum())


CASES = [  # (spec fields, T with a deficit, T without)
    ({"d_model": 4, "n_heads": 1, "d_head_qk": 4, "rope_dims": 4, "causal": True}, 2, 3),  # d_k = d, causal
    ({"d_model": 4, "n_heads": 1, "d_head_qk": 8, "d_head_v": 4, "rope_dims": 8, "causal": True}, 3, 4),  # wide
    ({"d_model": 4, "n_heads": 1, "d_head_qk": 8, "d_head_v": 4, "rope_dims": 8}, 2, 3),  # wide, no mask
    ({"d_model": 4, "n_heads": 1, "d_head_qk": 8, "d_head_v": 4, "rope_dims": 4, "causal": True}, 3, 4),  # partial
    (
        {"d_model": 4, "n_heads": 2, "n_kv_heads": 1, "d_head_qk": 8, "d_head_v": 2, "rope_dims": 8, "causal": True},
        3,
        4,
    ),
]


@pytest.mark.parametrize("fields,short,enough", CASES)
def test_extra_directions_below_t_min_are_the_deficit(fields, short, enough):
    spec = AttentionSpec(**fields, rope_base=10.0)
    base = count(spec).unidentified
    assert deficit(spec, short) > 0 and deficit(spec, enough) == 0
    assert measured(spec, short) == base + deficit(spec, short)
    assert measured(spec, enough) == base
