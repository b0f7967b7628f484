"""Exact counts: hand-checked cases, invariants over random specs, closed forms, architectures."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import attention_specs

from attnid.architectures import ARCHITECTURES, architecture_table
from attnid.counting import count, ratio_grid, rope_dims_for
from attnid.spec import AttentionSpec
from attnid.symbolic import check_against_counts


@pytest.mark.parametrize(
    "kwargs, total, unidentified",
    [
        (dict(d_model=4, n_heads=1), 64, 32),  # one head: GL(4) twice, ratio 1/2
        (dict(d_model=8, n_heads=2), 256, 64),  # 2 heads of 4: 2 (16 + 16)
        (dict(d_model=8, n_heads=4, n_kv_heads=2), 192, 16),  # GQA: one GL(2) pair per group
        (dict(d_model=8, n_heads=2, rope_dims=4), 256, 40),  # full RoPE: 2 planes x 2 per head + 16
        (dict(d_model=8, n_heads=2, biases="k"), 264, 72),  # key bias: all 8 entries unidentified
        (dict(d_model=8, n_heads=2, biases="k", rope_dims=4), 264, 40),  # with full RoPE the key bias is seen
        (dict(d_model=8, n_heads=2, biases="vo"), 272, 72),  # value bias next to an output bias: all 8
        (dict(d_model=8, n_heads=2, biases="v"), 264, 64),  # value bias alone: G v = 8 <= d, all seen
        (dict(d_model=4, n_heads=2, d_head_qk=2, d_head_v=6, biases="v"), 140, 80),  # G v = 12 > d = 4: 8 unseen
        (dict(d_model=3, n_heads=2, d_head_qk=5, d_head_v=4), 108, 72),  # heads wider than d_model
        (dict(d_model=4096, n_heads=32, rope_dims=128), 4 * 4096**2, 32 * (128 + 128**2)),  # LLaMA-2-7B layer
    ],
)
def test_hand_checked(kwargs, total, unidentified):
    c = count(AttentionSpec(**kwargs))
    assert (c.total, c.unidentified) == (total, unidentified)


def test_wide_heads_break_the_naive_formula():
    """Above d_model the group GL(k) no longer acts freely: the fibre is 2 d k - d^2, not k^2."""
    spec = AttentionSpec(d_model=3, n_heads=1, d_head_qk=5, d_head_v=1)
    assert count(spec).breakdown["query_key"] == 2 * 3 * 5 - 3**2
    assert count(spec).breakdown["query_key"] < 5**2


@settings(max_examples=400, deadline=None)
@given(attention_specs())
def test_invariants(spec):
    c = count(spec)
    assert c.identified + c.unidentified == c.total
    assert c.unidentified > 0  # never fully identified
    assert c.identified > 0
    assert sum(c.breakdown.values()) == c.unidentified
    assert all(v >= 0 for v in c.breakdown.values())
    # the mask and the RoPE base do not change what is identified
    twin = AttentionSpec(spec.d_model, spec.n_heads, spec.n_kv_heads, spec.d_head_qk, spec.d_head_v, spec.rope_dims, spec.biases, not spec.causal, 500.0)
    assert count(twin).to_dict() == c.to_dict()


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 64), st.integers(1, 8), st.sampled_from(["", "qkvo", "k", "vo"]))
def test_gqa_with_one_head_per_group_is_mha(d, H, biases):
    mha = AttentionSpec(d, H, None, 4, 3, 2, biases)
    gqa = AttentionSpec(d, H, H, 4, 3, 2, biases)
    assert count(mha) == count(gqa)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 6), st.sampled_from(["none", "half", "full"]), st.sampled_from(["", "qkvo", "q", "kv"]))
def test_more_heads_never_raise_the_ratio(log2_d, rope, biases):
    d = 2 ** (log2_d + 1)
    heads = [h for h in range(1, d + 1) if d % h == 0]
    ratios = [count(AttentionSpec(d, h, rope_dims=rope_dims_for(rope, d // h), biases=biases)).ratio for h in heads]
    assert all(b <= a for a, b in zip(ratios, ratios[1:])), ratios


def test_mha_ratio_is_one_over_two_h():
    for d, H in [(64, 1), (64, 2), (64, 8), (4096, 32)]:
        assert count(AttentionSpec(d, H)).ratio == pytest.approx(1 / (2 * H), abs=0)


def test_closed_forms_match_counts():
    assert check_against_counts(scales=(1, 2, 3, 8)) == []


def test_ratio_grid_columns_and_variants():
    df = ratio_grid(16, [1, 2, 4, 16], [1, 2], ["none", "half", "full"], ["none", "qkvo"])
    assert set(df.variant) == {"MHA", "GQA G=2", "MQA"}
    assert df.label.is_unique
    assert (df.identified + df.unidentified == df.total).all()
    assert not ((df.n_heads == 16) & (df.rope != "none")).any()  # head size 1 cannot rotate
    with pytest.raises(ValueError, match="counting.heads: 3 does not divide"):
        ratio_grid(16, [3], [1])


def test_architectures():
    df = architecture_table()
    assert len(df) == len(ARCHITECTURES) >= 8
    llama = df.set_index("model").loc["LLaMA-2-7B"]
    assert llama.model_total == 32 * 4 * 4096**2  # 2.1 B attention parameters in 32 layers
    falcon = df.set_index("model").loc["Falcon-7B"]
    assert falcon.n_kv_heads == 1 and falcon.unidentified == 64 + 64**2  # MQA: one C* per plane, one GL(64)
    assert (df.unidentified > 0).all() and (df.ratio < 0.05).all()
