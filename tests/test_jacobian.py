"""The Jacobian judge: rank routine, input sizing, verify calls, null-space directions, certificate, grids."""

import math

import numpy as np
import pytest
import torch

from attnid import AttentionSpec, Layout, count
from attnid import jacobian as jac
from attnid.jacobian import verification


def test_numerical_rank_of_known_rank_matrices():
    gen = torch.Generator().manual_seed(0)
    for m, n, r in [(30, 20, 7), (20, 20, 20), (50, 12, 1), (9, 9, 0)]:
        A = torch.randn(m, r, generator=gen, dtype=torch.float64) @ torch.randn(
            r, n, generator=gen, dtype=torch.float64
        )
        res = jac.numerical_rank(torch.linalg.svdvals(A))
        assert res["rank"] == r
        if 0 < r < min(m, n):
            assert res["sigma_dropped"] < 1e-14 and res["sigma_kept"] > 1e-4 and res["gap"] > 10
    # graded singular values straddling the tolerance, given in any order
    sigma = torch.tensor([1e-12, 1.0, 1e-3, 1e-9, 1e-11])
    res = jac.numerical_rank(sigma)
    assert (
        res["rank"] == 3 and res["sigma_kept"] == pytest.approx(1e-9) and res["sigma_dropped"] == pytest.approx(1e-11)
    )
    assert res["gap"] == pytest.approx(2.0)
    assert jac.numerical_rank(sigma, rtol=1e-6)["rank"] == 2
    assert jac.numerical_rank(torch.ones(4))["gap"] == math.inf


def test_input_sizing_rule():
    spec = AttentionSpec(64, 8)  # info = min(64, 65, 8 (T - 1)) with T = 9
    s = jac.input_sizing(spec, oversample=1.25)
    assert (s.info_per_token, s.seq_len) == (64, 9) and s.tokens == math.ceil(1.25 * 16384 / 64)
    assert s.batch * s.seq_len >= s.tokens
    rope = jac.input_sizing(AttentionSpec(16, 1, rope_dims=16))
    assert rope.seq_len >= 16 + 2  # every RoPE frequency at enough relative offsets
    thin = jac.input_sizing(AttentionSpec(8, 1, d_head_qk=2, d_head_v=1), oversample=3)
    assert thin.info_per_token == 2  # a token's output moves in at most H d_v + 1 = 2 directions
    causal = jac.input_sizing(AttentionSpec(8, 2, causal=True))
    assert causal.seq_len >= 2 * 8 // 2 + 1  # a causal query sees half the keys on average
    with pytest.raises(ValueError, match="^oversample"):
        jac.input_sizing(spec, oversample=0)
    assert jac.input_sizing(AttentionSpec(4, 1, rope_dims=4, causal=True), seq_len=2).seq_len == 2  # the user's T


@pytest.mark.parametrize(
    "spec",
    [
        AttentionSpec(8, 2, biases="qkvo"),  # every bias, no RoPE: b_K and b_V fully unidentified
        AttentionSpec(8, 4, n_kv_heads=1, rope_dims=2, biases="kv", causal=True),  # MQA, partial RoPE, causal
        AttentionSpec(
            4, 2, n_kv_heads=1, d_head_qk=6, d_head_v=6, rope_dims=2, biases="qkv"
        ),  # heads above d_model, b_V without b_O
        AttentionSpec(3, 1, d_head_qk=8, d_head_v=7, rope_dims=4, biases="qkvo"),  # bias/RoPE corner, H d_k >> d
    ],
    ids=lambda s: s.label,
)
def test_verify_agrees(spec):
    row = jac.verify(spec)
    assert row["passed"] and row["status"] == "passed", row
    assert row["margin"] >= jac.MIN_MARGIN and row["gap"] >= jac.MIN_GAP
    assert row["measured"] == row["predicted"] == count(spec).unidentified
    assert row["measured_half"] == row["measured"] and row["measured_other_seeds"] == str(row["measured"])
    assert row["symmetry_rank"] == row["predicted"] and row["symmetry_residual"] < 1e-13
    assert row["outside_min"] > 1e-6
    assert row["sigma_dropped"] < 1e-13 and row["sigma_kept"] > 1e-7


def test_verify_detects_a_wrong_count(monkeypatch):
    """The check is not vacuous: a count off by one fails agree and directions_ok."""
    spec = AttentionSpec(8, 2, rope_dims=2)
    real = count(spec)
    monkeypatch.setattr(
        verification, "count", lambda s, check=True: type(real)(real.total, real.unidentified + 1, real.breakdown)
    )
    row = jac.verify(spec, other_seeds=(), half_batch=False)
    assert not row["passed"] and not row["agree"] and not row["directions_ok"] and row["status"] == "failed"
    assert "d8_h2" in jac.failures_message(__import__("pandas").DataFrame([row]))


def test_too_few_tokens_lose_rank():
    """Fewer rows than the information rule asks for: the measured dimension goes up (so sizing matters)."""
    spec = AttentionSpec(16, 4)
    assert jac.measure(spec, oversample=0.5)[0]["measured"] > count(spec).unidentified


def test_symmetry_directions_span_the_null_space():
    spec = AttentionSpec(4, 4, n_kv_heads=2, d_head_qk=6, d_head_v=5, rope_dims=2, biases="qkv")
    res, J, theta, _, _ = jac.measure(spec)
    V = jac.symmetry_directions(spec, theta)
    Q = jac.orthonormal_basis(V)
    assert V.shape[0] > Q.shape[1] == count(spec).unidentified  # more samples than dim T: rank V = dim T
    assert torch.linalg.matrix_norm(J @ Q, ord=2) < 1e-13 * res["sigma_max"]
    # the null space of J (right singular vectors past the rank) equals span Q
    _, _, vh = torch.linalg.svd(J, full_matrices=False)
    null = vh[J.shape[1] - res["measured"] :].mT
    assert torch.linalg.svdvals(Q.mT @ null).min() > 1 - 1e-8
    for name, vec in jac.outside_directions(spec, theta).items():
        assert (J @ vec).norm() > 1e-6 * res["sigma_max"] * vec.norm(), name


def test_orbit_tangents_lie_in_the_predicted_null_space():
    """Independent derivations: the linearised group action (orbit_tangent) lies in the projector's range."""
    from attnid import symmetry

    spec = AttentionSpec(4, 2, n_kv_heads=1, d_head_qk=6, d_head_v=3, rope_dims=2, biases="qvo")
    theta = Layout(spec).init(torch.Generator().manual_seed(4))
    gen = torch.Generator().manual_seed(5)
    X = symmetry.commutant(spec, torch.randn(3, 6, 6, generator=gen, dtype=torch.float64))
    Y = torch.randn(3, 3, 3, generator=gen, dtype=torch.float64)
    tangents = symmetry.orbit_tangent(spec, theta, qk=X, vo=Y)  # (3, P)
    torch.testing.assert_close(symmetry.project(spec, theta, tangents), tangents, rtol=1e-9, atol=1e-9)


def test_commutant_basis_commutes_with_rope():
    from attnid.layer.forward import apply_rope, rope_angles
    from attnid.symmetry import commutant_basis

    spec = AttentionSpec(8, 1, d_head_qk=6, rope_dims=4)
    basis = commutant_basis(spec)
    assert basis.shape == (2 * 2 + 4, 6, 6)  # u^2 + p
    R = apply_rope(
        torch.eye(6, dtype=torch.float64), rope_angles(spec, 5, torch.float64, "cpu")[3:4]
    )  # a rotation (6, 6)
    for M in basis:
        torch.testing.assert_close(R @ M, M @ R)


def test_certificate_matches_dense():
    spec = AttentionSpec(8, 4, n_kv_heads=2, rope_dims=2, biases="qkvo")
    row = jac.verify(spec, method="certificate")
    assert row["certified"] and row["passed"] and row["measured"] == count(spec).unidentified
    assert row["sigma_kept"] > jac.CERT_RTOL and row["sigma_dropped"] < 1e-13 and row["margin"] > 0
    assert row["peak_memory_bytes"] > 0 and row["seconds_gram"] >= 0


def test_certificate_fails_without_enough_rows():
    """With too few tokens J[:, S^c] is rank deficient: the shifted Cholesky must refuse."""
    row = jac.certify(AttentionSpec(16, 4), oversample=0.4, log=lambda *a: None)
    assert not row["certified"] and row["measured"] is None


def test_accumulate_gram_lower_triangle():
    rows = torch.randn(40, 13, dtype=torch.float64)
    A = torch.zeros(13, 13, dtype=torch.float64)
    jac.accumulate_gram(A, rows[:25], block=4)
    jac.accumulate_gram(A, rows[25:], block=4)
    torch.testing.assert_close(A.tril(), (rows.T @ rows).tril())


def test_grid_expansion():
    families = [
        {"name": "a", "d_model": [8], "n_heads": [4], "n_kv_heads": [1, 3, 4], "rope": ["none", "full", 6]},
        {"name": "b", "d_model": [8], "n_heads": [4], "biases": ["all"]},
    ]
    specs = jac.expand_grid(families)
    labels = [s.label for _, s in specs]
    assert len(labels) == len(set(labels))  # the MHA no-bias spec appears once, under family a
    assert sum(f == "a" for f, _ in specs) == 4  # G = 3 skipped; rope 6 > d_head 2 skipped
    assert sum(f == "b" for f, _ in specs) == 15
    with pytest.raises(ValueError, match="no valid spec"):
        jac.expand_family({"name": "c", "d_model": [8], "n_heads": [3]})
    with pytest.raises(ValueError, match="unknown"):
        jac.expand_family({"name": "c", "d_model": [8], "n_heads": [2], "heads": [1]})
    assert jac.spec_from_fields({"d_model": 16, "n_heads": 4, "rope": "half"}).rope_dims == 2


def test_bias_effects_table():
    df = jac.bias_effects([{"d_model": 4, "n_heads": 2}], ["none", "full"], log=lambda *a: None)
    assert len(df) == 2 * 4 * 2 and df["agree"].all()
    key = df[(df.bias == "k") & (df.others == "none")].set_index("rope")["measured"]
    assert key["none"] == 4 and key["full"] == 0  # b_K fully unidentified without RoPE, fully seen with
    value = df[(df.bias == "v") & (df.rope == "none")].set_index("others")["measured"]
    assert value["none"] == 0 and value["qko"] == 4  # b_V is absorbed only when b_O is there


def test_verify_command_line_json(capsys):
    from attnid.cli import main

    assert (
        main(
            [
                "verify",
                "--d-model",
                "4",
                "--heads",
                "2",
                "--rope",
                "full",
                "--bias",
                "qkvo",
                "--no-invariance",
                "--json",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert '"status": "passed"' in out and '"margin"' in out


def test_random_small_specs():
    """A fixed random sample of small specs (any head sizes, groups, RoPE, biases, mask) all pass."""
    import random

    rng = random.Random(11)
    for _ in range(12):
        G, r, k = rng.randint(1, 3), rng.randint(1, 3), rng.randint(1, 7)
        spec = AttentionSpec(
            rng.randint(2, 5), G * r, G, k, rng.randint(1, 7), rope_dims=rng.choice([0, *range(2, k + 1, 2)]),
            biases=rng.choice(jac.BIAS_SUBSETS), causal=rng.random() < 0.3,
        )  # fmt: skip
        row = jac.verify(spec, other_seeds=(), half_batch=False)
        assert row["passed"], row


@pytest.mark.parametrize(
    "spec",
    [AttentionSpec(8, 2, rope_dims="full", biases="qkvo"), AttentionSpec(4, 2, 1, 6, 6, rope_dims=2, biases="qkv")],
    ids=lambda s: s.label,
)
def test_qr_reduced_singular_values_equal_the_direct_ones(spec):
    sizing = jac.input_sizing(spec)
    theta, x = jac.random_point(spec, sizing, seed=0)
    J = jac.jacobian_rows(spec, theta, x, jac.position_ids(spec, sizing, 0))  # (3P-ish rows, P)
    direct = torch.linalg.svdvals(J)
    reduced = jac.tall_svdvals(J)
    rank = jac.numerical_rank(direct)
    assert jac.numerical_rank(reduced)["rank"] == rank["rank"] == J.shape[1] - count(spec).unidentified
    k = rank["rank"]
    assert torch.allclose(reduced[:k], direct[:k], rtol=1e-12, atol=0)  # the kept side, to many digits
    floor = float(reduced[k:].max() / reduced[0])  # the rounding floor stays where it was
    assert floor < 1e-13 and float(direct[k:].max() / direct[0]) < 1e-13
    # the two-step factor (first half, then [R_half; rest]) has the same singular values as J
    half = J.shape[0] // 2
    R_half = jac.triangular_factor(J[:half])
    assert torch.allclose(jac.tall_svdvals(torch.cat((R_half, J[half:])))[:k], direct[:k], rtol=1e-12, atol=0)
    assert (
        jac.numerical_rank(torch.linalg.svdvals(R_half))["rank"]
        == jac.numerical_rank(torch.linalg.svdvals(J[:half]))["rank"]
    )


def test_measure_counts_unchanged_by_the_qr_path():
    """measure() (QR path) decides as the direct SVD of the same J did, for the full and the half batch."""
    for spec in [
        AttentionSpec(4, 2, rope_dims="full", biases="qkvo"),
        AttentionSpec(3, 1, d_head_qk=4, d_head_v=5, biases="qv", causal=True),
    ]:
        res, J, *_ = jac.measure(spec, seed=1, half=True)
        P = J.shape[1]
        assert res["measured"] == P - jac.numerical_rank(torch.linalg.svdvals(J))["rank"] == count(spec).unidentified
        sizing = jac.input_sizing(spec)
        rows = (sizing.batch // 2) * sizing.seq_len * spec.d_model
        assert res["measured_half"] == P - jac.numerical_rank(torch.linalg.svdvals(J[:rows]))["rank"]


def test_ratio_points_measure_what_the_figure_draws_at_a_cheap_width():
    from attnid.layer.counting import ratio_grid

    ratios = ratio_grid(8, [1, 2, 4, 8], [1, 2], ["none", "half", "full"], ["none", "k", "qkvo"])
    drawn = jac.ratio_figure_rows(ratios)
    assert (drawn["d_head_qk"] * drawn["n_heads"] == 8).all() and (drawn["d_head_v"] == drawn["d_head_qk"]).all()
    gqa = drawn["n_kv_heads"] < drawn["n_heads"]
    assert ((drawn.loc[gqa, "rope"] == "none") & (drawn.loc[gqa, "biases"] == "none")).all()  # groups: plain only
    assert not ((drawn["rope"] == "half") & (drawn["biases"] != "none")).any()  # half RoPE: no bias panel
    assert 0 < len(drawn) < len(ratios)
    small = jac.ratio_grid_at_width(drawn, 4)  # the same (H, G, RoPE, biases) at d_model 4, H | 4 only
    assert set(small["d_model"]) == {4} and set(small["n_heads"]) <= {1, 2, 4}
    keys = ["n_heads", "n_kv_heads", "rope", "biases"]
    assert set(map(tuple, small[keys].values)) <= set(map(tuple, drawn[keys].values))
    assert (small["d_head_qk"] * small["n_heads"] == 4).all()
    points = jac.ratio_points(small, max_params=10**6, log=lambda *a: None)
    assert len(points) == len(small) and points["passed"].all()
    assert (points["measured"] == small["unidentified"].values).all()
    assert list(points["rope"]) == list(small["rope"])


def test_ratio_figure_draws_points_of_another_width_on_their_own_count():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow" / "scripts"))
    import fig_ratio

    from attnid.layer.counting import ratio_grid

    ratios = ratio_grid(16, [1, 2, 4, 8, 16], [1, 2], ["none", "full"], ["none", "qkvo"])
    small = jac.ratio_grid_at_width(jac.ratio_figure_rows(ratios), 4)
    points = small.assign(predicted=small["unidentified"], ratio_measured=small["unidentified"] / small["total"])
    df = fig_ratio.prepare(
        ratios, points[["label", "d_model", *jac.grids.RATIO_KEYS, "total", "predicted", "ratio_measured"]]
    )
    drawn = df.dropna(subset=["ratio_measured"])
    assert set(drawn["n_heads"]) == {1, 2, 4} and (drawn["width_measured"] == 4).all()
    assert np.allclose(drawn["ratio_measured"], drawn["ratio_width"])  # on the count at d = 4
    qkvo = drawn[(drawn["biases"] == "qkvo") & (drawn["rope"] == "none") & (drawn["n_heads"] == 2)]
    assert len(qkvo) == 1 and abs(qkvo["ratio_width"].item() - qkvo["ratio"].item()) > 1e-3  # not the d = 16 count
    fig = fig_ratio.plot(ratios, points)
    assert any("d = 4" in t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts())
