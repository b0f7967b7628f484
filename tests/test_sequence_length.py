"""The sequence-length rule, measured: below T_min the Jacobian finds `short_sequence_excess` more directions.

Per KV group (r query heads, m_q = d + [b_Q], m_k = d + [b_K]) the query-key parameters reach the
output only through the forms B_n = [W_Q; b_Q] R_n [W_K; b_K]^T at the n_T offsets a query sees
(T - 1 causal, 2 (T - 1) without a mask) and the symmetric part of B_0, less what is constant along
the keys, so

    N(T) >= count + G * delta(T),
    delta(T) = [(r m_q + m_k) k - c_qk - r (n_T m_q m_k + d (d + 1) / 2 + d [b_Q, no b_K])]^+,

and a causal T = 2 with d_k <= d and r = 1 has
delta = [c (c - 1) / 2 - a^2 + w (w + 1) / 2 - p - [b_K] min(u, p - 1)]^+, c = 2 d_k - d - [b_Q, no b_K],
a = min(u, c), w = [2 a - c]^+. `attnid.layer.counting.short_sequence_excess` is that number and `min_seq_len` the least T
where it vanishes (from T = 3 where a causal T = 2 is only bounded: d_k > d). Each case below is measured at
T where the excess is positive and at T_min, where it is zero; the property test does the same on
random specs. The Jacobian is taken directly on :func:`attnid.layer.forward.attention` with a small RoPE
base so that every plane turns at these short lengths.
"""

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.func import jacrev, vmap

from attnid.layer.forward import attention
from attnid.layer.counting import count, min_seq_len, short_sequence_excess
from attnid.layer.layout import Layout
from attnid.layer.spec import AttentionSpec

RTOL = 1e-10


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


def exact_at(spec: AttentionSpec, T: int) -> bool:
    """Is short_sequence_excess exact at T (everywhere but a causal T = 2 with heads wider than d)?"""
    return not (spec.causal and T == 2) or spec.d_head_qk <= spec.d_model


CASES = [  # (spec fields, T with an excess, T_min)
    ({"d_model": 4, "n_heads": 1, "d_head_qk": 4, "rope_dims": 4, "causal": True}, 2, 3),  # d_k = d, causal
    ({"d_model": 6, "n_heads": 1, "d_head_qk": 5, "rope_dims": 4, "causal": True}, 2, 3),  # d_k < d: c = 2k - d
    ({"d_model": 7, "n_heads": 1, "d_head_qk": 6, "d_head_v": 2, "rope_dims": 6, "causal": True}, 2, 3),
    ({"d_model": 4, "n_heads": 1, "d_head_qk": 8, "d_head_v": 4, "rope_dims": 8, "causal": True}, 3, 4),  # wide
    ({"d_model": 4, "n_heads": 1, "d_head_qk": 8, "d_head_v": 4, "rope_dims": 8}, 2, 3),  # wide, no mask
    ({"d_model": 4, "n_heads": 1, "d_head_qk": 8, "d_head_v": 4, "rope_dims": 4, "causal": True}, 3, 4),  # partial
    ({"d_model": 4, "n_heads": 1, "d_head_qk": 10, "d_head_v": 2, "rope_dims": 8, "causal": True}, 4, 5),
    (
        {"d_model": 4, "n_heads": 2, "n_kv_heads": 1, "d_head_qk": 8, "d_head_v": 2, "rope_dims": 8, "causal": True},
        3,
        4,
    ),
    ({"d_model": 4, "n_heads": 1, "d_head_qk": 8, "rope_dims": 8, "biases": "k"}, 2, 3),  # key bias
    (
        {"d_model": 3, "n_heads": 2, "d_head_qk": 5, "d_head_v": 2, "rope_dims": 4, "biases": "qkvo", "causal": True},
        2,
        3,
    ),
    ({"d_model": 4, "n_heads": 1, "d_head_qk": 7, "d_head_v": 2, "rope_dims": 4, "biases": "v", "causal": True}, 3, 4),
    ({"d_model": 9, "n_heads": 1, "d_head_qk": 8, "d_head_v": 1, "rope_dims": 4, "causal": True}, 2, 3),  # w = 1
    ({"d_model": 9, "n_heads": 1, "d_head_qk": 9, "d_head_v": 1, "rope_dims": 4, "biases": "q", "causal": True}, 2, 3),
    ({"d_model": 8, "n_heads": 1, "d_head_qk": 8, "d_head_v": 1, "rope_dims": 4, "biases": "k", "causal": True}, 2, 3),
]


@pytest.mark.parametrize("fields,short,t_min", CASES)
def test_extra_directions_below_t_min_are_the_excess(fields, short, t_min):
    spec = AttentionSpec(**fields, rope_base=10.0)
    base = count(spec).unidentified
    assert min_seq_len(spec) == t_min
    assert short_sequence_excess(spec, short) > 0 and short_sequence_excess(spec, t_min) == 0
    assert measured(spec, short) == base + short_sequence_excess(spec, short)
    assert measured(spec, t_min) == base


def test_causal_pair_is_only_a_bound_for_wide_heads():
    """Causal T = 2 outside the measured class: the formula says 0, the Jacobian 8 more, so T_min = 3."""
    spec = AttentionSpec(6, 4, 2, d_head_qk=8, d_head_v=3, rope_dims=2, causal=True, rope_base=10.0)
    base = count(spec).unidentified
    assert short_sequence_excess(spec, 2) == 0 and min_seq_len(spec) == 3
    assert (measured(spec, 2), measured(spec, 3)) == (base + 8, base)


def test_narrow_causal_heads_of_a_group_need_two_positions():
    """Narrow causal heads whose shared span c = 2 d_k - d is small (c (c - 1) / 2 <= u^2 + p): T = 2 is enough."""
    for spec in (
        AttentionSpec(8, 2, rope_dims=4, causal=True),
        AttentionSpec(7, 1, d_head_qk=5, rope_dims=4, causal=True),
    ):
        assert min_seq_len(spec) == 2 and short_sequence_excess(spec, 2) == 0


@st.composite
def small_specs(draw):
    """RoPE specs with P below ~700: GQA, wide and narrow heads, d_k != d_v, partial RoPE, any bias subset."""
    G, r = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    k = draw(st.integers(2, 8))
    return AttentionSpec(
        draw(st.integers(2, 5)),
        G * r,
        G,
        d_head_qk=k,
        d_head_v=draw(st.integers(1, 4)),
        rope_dims=2 * draw(st.integers(1, k // 2)),
        biases="".join(b for b in "qkvo" if draw(st.booleans())),
        causal=draw(st.booleans()),
        rope_base=10.0,
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_specs())
def test_t_min_is_the_least_length_on_random_specs(spec):
    """At T_min the Jacobian measures the count; at T_min - 1 (>= 2) it measures count + excess where
    the excess is exact (so strictly more when T_min > 2 was set by it) and at least that elsewhere."""
    base = count(spec).unidentified
    t_min = min_seq_len(spec)
    assert measured(spec, t_min) == base, spec.label
    if t_min > 2:
        T, excess = t_min - 1, short_sequence_excess(spec, t_min - 1)
        below = measured(spec, T)
        assert below == base + excess if exact_at(spec, T) else below >= base + excess, (spec.label, below)
        if exact_at(spec, T):
            assert below > base, spec.label
