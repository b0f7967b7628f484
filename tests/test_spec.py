"""AttentionSpec validation and the flat layout."""

import pytest
import torch

from attnid.layer.layout import Layout
from attnid.layer.spec import AttentionSpec, SpecError, normalize_biases, parse_rope


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"d_model": 0, "n_heads": 1}, "d_model"),
        ({"d_model": 8, "n_heads": -2}, "n_heads"),
        ({"d_model": 8, "n_heads": 4, "n_kv_heads": 3}, "n_kv_heads"),
        ({"d_model": 8, "n_heads": 3}, "d_head_qk"),
        ({"d_model": 8, "n_heads": 2, "rope_dims": 3}, "rope_dims"),
        ({"d_model": 8, "n_heads": 2, "rope_dims": 6}, "rope_dims"),
        ({"d_model": 8, "n_heads": 2, "biases": "qx"}, "biases"),
        ({"d_model": 8, "n_heads": 2, "d_head_v": 0}, "d_head_v"),
        ({"d_model": 8.0, "n_heads": 2}, "d_model"),
        ({"d_model": 8, "n_heads": 2, "causal": "yes"}, "causal"),
    ],
)
def test_bad_specs_name_the_field(kwargs, field):
    with pytest.raises(SpecError) as err:
        AttentionSpec(**kwargs)
    assert err.value.field == field
    assert str(err.value).startswith(field + ":")


def test_defaults_and_label():
    s = AttentionSpec(16, 4, biases="oq")
    assert (s.n_kv_heads, s.d_head_qk, s.d_head_v, s.biases) == (4, 4, 4, "qo")
    assert s.label == "d16_h4_g4_k4_v4_r0_bqo"
    assert normalize_biases("none") == "" and normalize_biases(["v", "k"]) == "kv"


def test_layout_roundtrip_and_sizes():
    spec = AttentionSpec(6, 4, 2, 3, 5, 2, "qkvo")
    layout = Layout(spec)
    d, H, G, k, v = 6, 4, 2, 3, 5
    assert layout.size == H * d * k + H * k + G * d * k + G * k + G * d * v + G * v + H * v * d + d
    theta = torch.arange(layout.size, dtype=torch.float64)
    blocks = layout.unflatten(theta)
    assert blocks["W_O"].shape == (H, v, d) and blocks["b_K"].shape == (G, k)
    assert torch.equal(layout.flatten(blocks), theta)
    assert len(layout.names()) == layout.size
    assert "b_Q" not in Layout(AttentionSpec(6, 2))


@pytest.mark.parametrize(
    "k, full, half", [(1, 0, 0), (2, 2, 0), (4, 4, 2), (5, 4, 2), (6, 6, 2), (7, 6, 2), (8, 8, 4), (128, 128, 64)]
)
def test_rope_words(k, full, half):
    """full = every complete plane, half = the complete planes in the first half (odd sizes round down)."""
    assert (parse_rope("none", k), parse_rope("full", k), parse_rope("half", k)) == (0, full, half)
    assert AttentionSpec(16, 1, d_head_qk=k, rope_dims="full").rope_dims == full
    assert AttentionSpec(16, 1, d_head_qk=k, rope_dims="HALF").rope_dims == half
    assert parse_rope("2", k) == parse_rope(2, k) == 2
    with pytest.raises(SpecError, match="rope_dims"):
        parse_rope("quarter", k)


def test_config_round_trip_and_unknown_key():
    spec = AttentionSpec(
        12, 4, 2, d_head_qk=5, d_head_v=7, rope_dims=4, biases="vk", causal=True, rope_base=500.0, seq_len=9
    )
    assert AttentionSpec.from_config(spec.to_config()) == spec
    assert set(spec.to_config()) == set(AttentionSpec.field_names())
    with pytest.raises(SpecError) as err:
        AttentionSpec.from_config({"d_model": 8, "n_heads": 2, "heads": 2})
    assert err.value.field == "heads" and "unknown" in str(err.value)
    with pytest.raises(SpecError) as err:
        AttentionSpec.from_config({"d_model": 8})
    assert err.value.field == "n_heads"


def test_row_round_trip_through_a_csv(tmp_path):
    """to_row -> CSV -> pandas -> from_row gives back the spec; extra columns are ignored, the label is checked."""
    pd = pytest.importorskip("pandas")
    specs = [
        AttentionSpec(16, 4),
        AttentionSpec(16, 4, 2, rope_dims="full", biases="qkvo", causal=True),
        AttentionSpec(6, 2, d_head_qk=5, d_head_v=3, rope_dims=2, rope_base=10000.5, seq_len=3),
    ]
    rows = [{**s.to_row(), "total": s.n_params} for s in specs]
    assert list(rows[0]) == [
        "label",
        "d_model",
        "n_heads",
        "n_kv_heads",
        "d_head_qk",
        "d_head_v",
        "rope_dims",
        "biases",
        "causal",
        "total",
    ]
    assert rows[0]["biases"] == "none" and "label" not in specs[0].to_row(label=False)
    pd.DataFrame(rows).to_csv(tmp_path / "rows.csv", index=False)
    back = pd.read_csv(tmp_path / "rows.csv", keep_default_na=False)
    assert [AttentionSpec.from_row(r) for _, r in back.iterrows()] == specs
    assert [AttentionSpec.from_row(r) for _, r in pd.read_csv(tmp_path / "rows.csv").iterrows()] == specs  # NaN cells
    with pytest.raises(SpecError, match="label"):
        AttentionSpec.from_row({**rows[0], "d_model": 32})


def test_labels_are_unique_across_bases():
    """The base is written exactly, so bases that agree to six digits still get different labels."""
    labels = {AttentionSpec(8, 2, rope_dims=2, rope_base=b).label for b in (10000.0, 10000.5, 10000.49, 1e6, 500000.0)}
    assert len(labels) == 5
    assert AttentionSpec(8, 2, rope_base=1e6).label.endswith("base1e+06")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"d_model": 6, "n_heads": 4, "n_kv_heads": 2, "d_head_qk": 3, "d_head_v": 5, "rope_dims": 2, "biases": "qkvo"},
        {"d_model": 8, "n_heads": 2},
    ],
)
def test_n_params_is_the_layout_size(kwargs):
    spec = AttentionSpec(**kwargs)
    layout = Layout(spec)
    assert spec.n_params == layout.size
    assert {b.name: b.shape for b in layout} == spec.block_shapes()
