"""verify's doors (options, size guard, device) and its verdict (margin, undecided), RoPE positions,
and the counting's hypotheses: where they fail, the Jacobian disagrees with the naive count in
exactly the predicted way."""

import math
import time

import pytest
import torch

from attnid import AttentionSpec, count
from attnid import jacobian as jac


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"oversample": 0.1}, "oversample"),
        ({"oversample": -1}, "oversample"),
        ({"seed": -1}, "seed"),
        ({"threads": -3}, "threads"),
        ({"threads": 1.5}, "threads"),
        ({"seq_len": 1}, "seq_len"),
        ({"max_memory_gb": 0}, "max_memory_gb"),
        ({"positions": "random"}, "positions"),
        ({"method": "svd"}, "method"),
        ({"device": "tpu"}, "device"),
    ],
)
def test_bad_options_name_themselves(options, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        jac.verify(AttentionSpec(4, 2), **options)


def test_cuda_without_a_gpu_is_refused_by_name():
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    with pytest.raises(ValueError, match="^device: 'cuda'.*is_available"):
        jac.verify(AttentionSpec(4, 2), device="cuda")


@pytest.mark.parametrize(("d_model", "heads"), [(4096, 32), (100000, 1)])
def test_too_large_is_refused_before_any_work(d_model, heads):
    start = time.perf_counter()
    with pytest.raises(jac.TooLargeError, match="^max_memory_gb: .* GiB"):
        jac.verify(AttentionSpec(d_model, heads))
    assert time.perf_counter() - start < 0.5


def test_cost_estimate_grows_with_the_spec():
    small = jac.estimate_cost(AttentionSpec(8, 2), "dense", 3.0)
    large = jac.estimate_cost(AttentionSpec(64, 8), "certificate", 1.25)
    assert small.bytes < 2**30 and small.seconds < 5
    assert 1 * 2**30 < large.bytes < 8 * 2**30 and 10 < large.seconds < 1000  # measured: 4.2 GiB, ~80 s


def test_spread_positions():
    """Distinct sorted integers inside the context, which one full turn of the slowest plane covers."""
    spec = AttentionSpec(4, 1, d_head_qk=16, rope_dims=16)  # w_min = 1e4^(-14/16)
    sizing = jac.input_sizing(spec)
    pos = jac.position_ids(spec, sizing, seed=0)
    L = jac.context_length(spec, sizing.seq_len)
    assert L >= 2 * math.pi * 1e4 ** (14 / 16)
    assert pos.shape == (sizing.batch, sizing.seq_len) and pos.min() >= 0 and pos.max() < L
    assert (pos.diff(dim=1) > 0).all() and (pos == pos.round()).all()
    assert not torch.equal(pos[0], pos[1])  # each sequence its own positions
    contiguous = jac.position_ids(spec, sizing, 0, "contiguous")
    assert torch.equal(contiguous[0], torch.arange(sizing.seq_len, dtype=torch.float64))


def test_slow_planes_undecided_on_contiguous_positions_certified_when_spread():
    """d4 h1 k16 full RoPE at base 1e4: on 0..T-1 the slowest planes barely turn, the smallest kept
    singular value sits at the tolerance and half the batch measures one more; verify must call that
    undecided, not passed. Spread positions give the same count with a margin of decades."""
    spec = AttentionSpec(4, 1, d_head_qk=16, rope_dims=16)
    near = jac.verify(spec, positions="contiguous")
    assert near["margin"] < jac.MIN_MARGIN and near["status"] == "undecided" and not near["passed"]
    spread = jac.verify(spec)
    assert spread["status"] == "passed" and spread["measured"] == count(spec).unidentified == 128
    assert spread["margin"] > 5 and spread["measured_half"] == 128


def test_a_real_head_at_a_real_base():
    """32 rotated planes at base 5e5 (d_head 64): on 0..T-1 the slow planes do not turn and the rank
    is meaningless (the margin is nil, so undecided); spread positions certify the count by decades."""
    spec = AttentionSpec(4, 1, d_head_qk=64, d_head_v=4, rope_dims="full", rope_base=5e5)
    near = jac.verify(spec, positions="contiguous", other_seeds=(), half_batch=False)
    assert near["status"] == "undecided" and near["margin"] < 1
    row = jac.verify(spec, other_seeds=(), half_batch=False)
    assert row["status"] == "passed" and row["measured"] == count(spec).unidentified == 80 and row["margin"] > 5


def test_real_heads_table():
    specs = [AttentionSpec(8, 2, n_kv_heads=1, d_head_qk=16, d_head_v=8, rope_dims=16, rope_base=5e5)]
    rows = jac.verify_grid([("real", s) for s in specs], log=lambda *a: None, method="certificate", half_batch=False)
    table = jac.real_heads_table(rows)
    assert count(specs[0]).unidentified == 80  # 2 per plane + v^2 = 16 + 64
    assert table.iloc[0][["planes", "base", "$H/G$", "count", "measured"]].tolist() == [8, "500000", "2/1", 80, 80]
    assert table.iloc[0]["margin"] > 0


def test_a_tolerance_too_close_to_the_kept_values_is_undecided():
    row = jac.verify(AttentionSpec(8, 2, rope_dims=4), rtol=1e-3, other_seeds=(), half_batch=False)
    assert row["margin"] < jac.MIN_MARGIN and row["status"] == "undecided" and not row["passed"]


# --- the hypotheses of the counts ----------------------------------------------------------------
# count: 2 per rotated plane (the complex scalars commuting with distinct rotations). With k planes
# sharing a frequency the commutant is gl(k, C): 2 k^2 instead of 2 k.


def measured(spec, **options):
    row = jac.measure(spec, **options)[0]
    assert row["margin"] > jac.MIN_MARGIN and row["gap"] > jac.MIN_GAP  # decided, so the disagreement is real
    return row["measured"]


def test_two_planes_sharing_a_frequency():
    spec = AttentionSpec(4, 1, rope_dims="full")
    assert count(spec).unidentified == 20 == measured(spec)
    assert measured(spec, frequencies=[1.0, 1.0]) == 24  # gl(2, C): 8 instead of 4
    assert measured(spec, frequencies=[1.0, 1.0 + 2 * math.pi]) == 24  # the same rotations at integer positions


def test_three_planes_sharing_a_frequency():
    spec = AttentionSpec(6, 1, rope_dims="full")
    assert count(spec).unidentified == 42 == measured(spec)
    assert measured(spec, frequencies=[0.7, 0.7, 0.7]) == 54  # gl(3, C): 18 instead of 6


@pytest.mark.parametrize("omega", [math.pi, 0.0])
def test_a_frequency_in_pi_z(omega):
    """A plane turning by pi (R = +-I) or not at all commutes with all of gl(2): 4 instead of 2."""
    assert measured(AttentionSpec(4, 1, rope_dims="full"), frequencies=[1.0, omega]) == 22


def test_short_sequences():
    """Full RoPE d4 k4 causal on positions 0, 1 only: one offset cannot separate two planes (22, not
    20); from T = 3 on the count holds. With spread positions every sequence has its own offset."""
    spec = AttentionSpec(4, 1, rope_dims="full", causal=True)
    assert count(spec).unidentified == 20
    assert measured(spec, seq_len=2, positions="contiguous") == 22
    assert measured(spec, seq_len=3, positions="contiguous") == 20
    assert measured(spec, seq_len=2) == 20
    with pytest.raises(ValueError, match="^seq_len"):  # the count refuses T below its T_min ...
        jac.verify(spec, seq_len=2, positions="contiguous")
    # ... and verify can still measure it, to show the naive count fails there
    row = jac.verify(spec, seq_len=2, positions="contiguous", check_validity=False, other_seeds=(), half_batch=False)
    assert (row["predicted"], row["measured"], row["status"]) == (20, 22, "failed")
