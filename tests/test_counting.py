"""Exact counts: hand-checked cases, invariants over random specs, hypotheses, closed forms, architectures."""

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import attention_specs

from attnid.layer.counting import check_hypotheses, count, frequency_problem, hypotheses, min_seq_len, ratio_grid
from attnid.hf.config_tables import ARCHITECTURE_MODELS, architecture_table
from attnid.layer.spec import AttentionSpec, SpecError
from attnid.layer.symbolic import check_against_counts


@pytest.mark.parametrize(
    "kwargs, total, unidentified",
    [
        ({"d_model": 4, "n_heads": 1}, 64, 32),  # one head: GL(4) twice, ratio 1/2
        ({"d_model": 8, "n_heads": 2}, 256, 64),  # 2 heads of 4: 2 (16 + 16)
        ({"d_model": 8, "n_heads": 4, "n_kv_heads": 2}, 192, 16),  # GQA: one GL(2) pair per group
        ({"d_model": 8, "n_heads": 2, "rope_dims": 4}, 256, 40),  # full RoPE: 2 planes x 2 per head + 16
        ({"d_model": 8, "n_heads": 2, "biases": "k"}, 264, 72),  # key bias: all 8 entries unidentified
        ({"d_model": 8, "n_heads": 2, "biases": "k", "rope_dims": 4}, 264, 40),  # with full RoPE the key bias is seen
        ({"d_model": 8, "n_heads": 2, "biases": "vo"}, 272, 72),  # value bias next to an output bias: all 8
        ({"d_model": 8, "n_heads": 2, "biases": "v"}, 264, 64),  # value bias alone: G v = 8 <= d, all seen
        (
            {"d_model": 4, "n_heads": 2, "d_head_qk": 2, "d_head_v": 6, "biases": "v"},
            140,
            80,
        ),  # G v = 12 > d = 4: 8 unseen
        ({"d_model": 3, "n_heads": 2, "d_head_qk": 5, "d_head_v": 4}, 108, 72),  # heads wider than d_model
        ({"d_model": 4096, "n_heads": 32, "rope_dims": 128}, 4 * 4096**2, 32 * (128 + 128**2)),  # LLaMA-2-7B layer
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
    config = {**spec.to_config(), "causal": not spec.causal, "rope_base": 500.0}
    assert count(AttentionSpec.from_config(config)).to_dict(flat=True) == c.to_dict(flat=True)
    assert c.conditions == hypotheses(spec) and any("T_min" in line for line in c.conditions)


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
    ratios = [count(AttentionSpec(d, h, rope_dims=rope, biases=biases)).ratio for h in heads]
    assert all(b <= a for a, b in itertools.pairwise(ratios)), ratios


@pytest.mark.parametrize(
    "kwargs, t_min",
    [
        ({"d_model": 8, "n_heads": 2}, 2),  # no RoPE: one query that sees two keys
        ({"d_model": 8, "n_heads": 2, "causal": True}, 2),
        ({"d_model": 8, "n_heads": 2, "rope_dims": 4}, 2),  # narrow heads (d_k <= d), no mask: offsets -1 and +1
        ({"d_model": 8, "n_heads": 1, "rope_dims": 8, "causal": True}, 3),  # causal: offsets -1 and -2
        ({"d_model": 8, "n_heads": 2, "rope_dims": 4, "causal": True}, 2),  # d_k = d / 2: offset -1 is enough
        ({"d_model": 4, "n_heads": 1, "d_head_qk": 8, "rope_dims": 8, "causal": True}, 4),  # wide: delta(3) = 14
        ({"d_model": 4, "n_heads": 1, "d_head_qk": 10, "rope_dims": 8}, 3),  # wide with unrotated dims
        ({"d_model": 4, "n_heads": 1, "d_head_qk": 10, "rope_dims": 8, "causal": True}, 5),
        (
            {"d_model": 4, "n_heads": 1, "d_head_qk": 8, "rope_dims": 8, "biases": "k"},
            3,
        ),  # wide with a key bias
    ],
)
def test_seq_len_boundary(kwargs, t_min):
    """T_min - 1 is refused naming seq_len, T_min and the default (long enough) are accepted."""
    assert min_seq_len(AttentionSpec(**kwargs)) == t_min
    with pytest.raises(SpecError) as err:
        count(AttentionSpec(**kwargs, seq_len=t_min - 1))
    assert err.value.field == "seq_len" and f"T_min = {t_min}" in str(err.value)
    at_bound = count(AttentionSpec(**kwargs, seq_len=t_min))
    assert at_bound == count(AttentionSpec(**kwargs))  # the same count: T only has to be long enough
    assert count(AttentionSpec(**kwargs, seq_len=t_min - 1), check=False) == at_bound


def test_sliding_window_is_a_short_sequence():
    """A causal window of w keys shows the offsets of a sequence of length w: with RoPE, w >= T_min."""
    spec = {"d_model": 4, "n_heads": 1, "rope_dims": 4, "causal": True}
    with pytest.raises(SpecError) as err:
        count(AttentionSpec(**spec, sliding_window=2))
    assert err.value.field == "sliding_window"
    assert count(AttentionSpec(**spec, sliding_window=3)).unidentified == count(AttentionSpec(**spec)).unidentified
    count(AttentionSpec(4, 1, causal=True, sliding_window=2))  # no RoPE: every window >= 2 is enough
    pytest.importorskip("torch")
    from attnid.jacobian import verify

    options = {"positions": "contiguous", "other_seeds": (), "half_batch": False, "directions": False}
    row = verify(AttentionSpec(**spec, sliding_window=2), check_validity=False, **options)
    assert (row["predicted"], row["measured"]) == (20, 22)


def test_frequency_condition():
    """omega_i not in pi Z and omega_i != +-omega_j mod 2 pi; step 2 (offsets -1, +1) doubles the angles."""
    assert frequency_problem([1.0, 0.1, 0.01]) is None
    for bad in (
        [1.0, 1.0],
        [1.0, 1.0 + 2 * math.pi],
        [1.0, 2 * math.pi - 1.0],
        [math.pi],
        [0.0, 1.0],
        [1.0, 3 * math.pi],
    ):
        assert frequency_problem(bad) is not None, bad
    assert frequency_problem([math.pi / 2]) is None and frequency_problem([math.pi / 2], step=2) is not None


@settings(max_examples=200, deadline=None)
@given(st.floats(1.01, 1e7), st.integers(1, 64))
def test_standard_frequencies_meet_the_condition(base, planes):
    """omega_i = base^(-2i/p) lie in (0, 1] and are distinct: the condition holds at steps 1 and 2."""
    spec = AttentionSpec(8, 1, d_head_qk=2 * planes, rope_dims=2 * planes, rope_base=base)
    assert frequency_problem(spec.rope_frequencies()) is None
    assert frequency_problem(spec.rope_frequencies(), step=2) is None


def test_repeated_frequency_refused():
    """A base so close to 1 that two planes share a frequency is refused, naming rope_base; one plane is fine."""
    base = 1 + 1e-13
    with pytest.raises(SpecError) as err:
        count(AttentionSpec(8, 2, rope_dims=4, rope_base=base))
    assert err.value.field == "rope_base" and "same frequency" in str(err.value)
    check_hypotheses(AttentionSpec(8, 2, rope_dims=2, rope_base=base))
    # counted anyway, the two planes are one GL(2, C) per group: 8 instead of 2 x 2
    collided = count(AttentionSpec(8, 2, rope_dims=4, rope_base=base), check=False)
    assert collided.unidentified == count(AttentionSpec(8, 2, rope_dims=4)).unidentified + 2 * (8 - 4)


@pytest.mark.parametrize(
    "kwargs, frequencies, unidentified",
    [
        ({"d_model": 4, "n_heads": 1, "rope_dims": 4}, [1.0, 1.0], 24),  # gl(2, C): 8 instead of 4
        ({"d_model": 4, "n_heads": 1, "rope_dims": 4}, [1.0, 1.0 + 2 * math.pi], 24),  # equal mod 2 pi
        ({"d_model": 4, "n_heads": 1, "rope_dims": 4}, [1.0, 2 * math.pi - 1.0], 24),  # equal up to sign
        ({"d_model": 4, "n_heads": 1, "rope_dims": 4}, [math.pi, 1.0], 22),  # a half turn: GL(2, R)
        ({"d_model": 4, "n_heads": 1, "rope_dims": 4}, [0.0, 1.0], 22),  # a plane that never turns
        ({"d_model": 6, "n_heads": 1, "rope_dims": 6}, [1.0, 1.0, 1.0], 54),  # gl(3, C): 18 instead of 6
        ({"d_model": 6, "n_heads": 1, "rope_dims": 6}, [math.pi, math.pi, 1.0], 54),  # GL(4, R) + C^*
        ({"d_model": 6, "n_heads": 1, "d_head_qk": 6, "rope_dims": 4}, [0.0, 1.0], 54),  # GL(4) + C^*
    ],
)
def test_collided_frequencies(kwargs, frequencies, unidentified):
    """Refused by default (naming `frequencies`); counted by their commutant with check=False, as measured."""
    spec = AttentionSpec(**kwargs)
    with pytest.raises(SpecError) as err:
        count(spec, frequencies=frequencies)
    assert err.value.field == "frequencies"
    assert count(spec, check=False, frequencies=frequencies).unidentified == unidentified


@pytest.mark.parametrize("frequencies", [[1.0, 1.0], [math.pi, 1.0], [0.0, 1.0]])
def test_collided_frequencies_against_the_jacobian(frequencies):
    pytest.importorskip("torch")
    from attnid.jacobian import verify

    spec = AttentionSpec(4, 1, rope_dims=4)
    options = {"positions": "contiguous", "other_seeds": (), "half_batch": False, "directions": False}
    row = verify(spec, frequencies=frequencies, check_validity=False, **options)
    assert row["measured"] == count(spec, check=False, frequencies=frequencies).unidentified > row["predicted"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"d_model": 4, "n_heads": 1, "rope_dims": 4, "causal": True},  # narrow, two planes: tight at 3
        {"d_model": 4, "n_heads": 1, "rope_dims": 4},  # narrow, no mask: 2
        {
            "d_model": 4,
            "n_heads": 1,
            "d_head_qk": 8,
            "d_head_v": 2,
            "rope_dims": 8,
            "causal": True,
            "rope_base": 10.0,
        },  # wide
    ],
)
def test_t_min_against_the_jacobian(kwargs):
    """At T_min the Jacobian measures the count; below it (where the rule is tight) it measures more."""
    pytest.importorskip("torch")
    from attnid.jacobian import verify

    spec = AttentionSpec(**kwargs)
    options = {
        "positions": "contiguous",
        "other_seeds": (),
        "half_batch": False,
        "directions": False,
        "check_validity": False,
    }
    t_min = min_seq_len(spec)
    at = verify(AttentionSpec.from_config({**spec.to_config(), "seq_len": t_min}), **options)
    assert at["measured"] == at["predicted"] == count(spec).unidentified
    if t_min == 3 and spec.causal:  # the narrow causal bound is tight from two planes on (22 vs 20 for d4 k4 full)
        below = verify(AttentionSpec.from_config({**spec.to_config(), "seq_len": 2}), **options)
        assert below["measured"] > below["predicted"]


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
    assert len(df) == len(ARCHITECTURE_MODELS) >= 8
    llama = df.set_index("model").loc["LLaMA-2-7B"]
    assert llama.model_total == 32 * 4 * 4096**2  # 2.1 B attention parameters in 32 layers
    falcon = df.set_index("model").loc["Falcon-7B"]
    assert falcon.n_kv_heads == 1 and falcon.unidentified == 64 + 64**2  # MQA: one C* per plane, one GL(64)
    assert (df.unidentified > 0).all() and (df.ratio < 0.05).all()


def test_counting_table():
    """The paper's ratio table: the MHA column is 1/(2H); half RoPE lies between full RoPE and none."""
    from attnid.report.tables import counting_table

    table, formats = counting_table(ratio_grid(16, [1, 2, 4, 8], [1, 2], ["none", "half", "full"], ["none", "qkvo"]))
    assert list(table.columns) == ["$H$", "MHA", "MHA+bias", "RoPE half", "RoPE full", "MQA", "$1/(2H)$"]
    assert (table["MHA"] == table["$1/(2H)$"]).all()
    both = table.dropna()  # H = 8 has head size 2: half of it holds no complete plane
    assert len(both) == 3 and table["RoPE half"].isna().sum() == 1
    assert (both["RoPE full"] < both["RoPE half"]).all() and (both["RoPE half"] < both["MHA"]).all()
    assert set(formats) == set(table.columns[1:])


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(attention_specs(d=(2, 6), groups=(1, 2), heads_per_group=(1, 2), head=(1, 8)))
def test_t_min_is_enough_on_random_specs(spec):
    """At T = T_min (contiguous positions) the Jacobian measures the count, for random small specs:
    GQA, wide heads, d_k != d_v, partial RoPE, any bias subset, causal or not."""
    pytest.importorskip("torch")
    from attnid.jacobian import verify

    at_bound = AttentionSpec.from_config({**spec.to_config(), "seq_len": min_seq_len(spec), "rope_base": 10.0})
    options = {"positions": "contiguous", "other_seeds": (), "half_batch": False, "directions": False}
    row = verify(at_bound, **options)
    assert row["measured"] == row["predicted"] == count(spec).unidentified, (at_bound.label, row)
