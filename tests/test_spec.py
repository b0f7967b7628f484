"""AttentionSpec validation and the flat layout."""

import pytest
import torch

from attnid.layout import Layout
from attnid.spec import AttentionSpec, SpecError, normalize_biases


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(d_model=0, n_heads=1), "d_model"),
        (dict(d_model=8, n_heads=-2), "n_heads"),
        (dict(d_model=8, n_heads=4, n_kv_heads=3), "n_kv_heads"),
        (dict(d_model=8, n_heads=3), "d_head_qk"),
        (dict(d_model=8, n_heads=2, rope_dims=3), "rope_dims"),
        (dict(d_model=8, n_heads=2, rope_dims=6), "rope_dims"),
        (dict(d_model=8, n_heads=2, biases="qx"), "biases"),
        (dict(d_model=8, n_heads=2, d_head_v=0), "d_head_v"),
        (dict(d_model=8.0, n_heads=2), "d_model"),
        (dict(d_model=8, n_heads=2, causal="yes"), "causal"),
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
