"""A sigmoid gate on the heads' output (`output_gate`, attnid.layer.counting_variants): the count against the Jacobian
of this project's layer at random shapes, GQA and MQA, every kind of bias, value heads wider than d_model.

element (Qwen3-Next): o_h = (A_h V_g) * sigmoid(X W_G^h) per element leaves of GL(v) per group only the diagonal,
G v, and shows every value bias; head (LFM3): one sigmoid(X w_G^h) per head keeps GL(v) and shows each
b_V^g W_O^h, as sinks do. The plain rule would be wrong for both, and these shapes show it.
"""

import random

import pytest
import torch

from attnid.layer.forward import attention
from attnid.layer.counting import count
from attnid.jacobian import measure
from attnid.layer.layout import Layout
from attnid.layer.spec import AttentionSpec, SpecError


def random_shapes(seed: int, n: int) -> list[dict]:
    """n small random shapes (P a few hundred): G groups of r heads, d_k and d_v up to d + 2, some rotated dims,
    any bias subset, causal or not."""
    rng = random.Random(seed)
    shapes = []
    while len(shapes) < n:
        d, G, r = rng.randint(3, 6), rng.randint(1, 2), rng.randint(1, 3)
        k, v = rng.randint(1, d + 2), rng.randint(1, d + 2)
        shapes.append(
            {"d_model": d, "n_heads": G * r, "n_kv_heads": G, "d_head_qk": k, "d_head_v": v,
             "rope_dims": 2 * rng.randint(0, k // 2), "biases": "".join(b for b in "qkvo" if rng.random() < 0.5),
             "causal": rng.random() < 0.7}
        )  # fmt: skip
    return shapes


# hand-picked: GQA with every bias, value heads wider than d (the head gate's bias rule), MQA, sinks too
SHAPES = [
    {"d_model": 8, "n_heads": 4, "n_kv_heads": 2, "d_head_qk": 2, "rope_dims": 2, "biases": "qkvo", "causal": True},
    {"d_model": 4, "n_heads": 3, "n_kv_heads": 1, "d_head_qk": 2, "d_head_v": 6, "biases": "vo", "causal": True},
    {"d_model": 4, "n_heads": 4, "n_kv_heads": 2, "d_head_qk": 2, "d_head_v": 9, "rope_dims": 2, "biases": "qkv",
     "causal": True},
    {"d_model": 5, "n_heads": 2, "n_kv_heads": 2, "d_head_qk": 3, "d_head_v": 2, "sinks": True, "biases": "qkvo",
     "causal": True},
] + random_shapes(seed=7, n=4)  # fmt: skip


@pytest.mark.parametrize("gate", ["element", "head"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: AttentionSpec(**s).label)
def test_the_gated_count_is_the_measured_rank_deficiency(shape, gate):
    spec = AttentionSpec(**shape, output_gate=gate)
    c = count(spec)
    assert sum(c.breakdown.values()) == c.unidentified and min(c.breakdown.values()) >= 0
    result = measure(spec, seed=1)[0]
    assert result["gap"] > 6 and result["margin"] > 3, result  # decided: far from the tolerance
    assert result["measured"] == c.unidentified, (spec.label, c.breakdown)


def test_the_plain_rule_would_be_wrong():
    """Measured at two shapes where both gates change the count: the element gate's value-output fibre is G v,
    not G v^2, and the head gate shows the value bias, which b_O absorbs without it."""
    shape = {"d_model": 6, "n_heads": 2, "n_kv_heads": 1, "d_head_qk": 4, "d_head_v": 3, "rope_dims": 2,
             "biases": "v", "causal": True}  # fmt: skip
    plain = count(AttentionSpec(**shape)).unidentified
    element = AttentionSpec(**shape, output_gate="element")
    assert count(element).breakdown["value_output"] == 3 and measure(element, seed=0)[0]["measured"] == plain - 6
    shape = {"d_model": 4, "n_heads": 2, "n_kv_heads": 1, "d_head_qk": 2, "biases": "vo", "causal": True}
    head = AttentionSpec(**shape, output_gate="head")
    measured = measure(head, seed=0)[0]["measured"]
    assert measured == count(head).unidentified == count(AttentionSpec(**shape)).unidentified - 2


def test_gates_are_sigmoids_of_the_input_on_the_heads_output():
    """The layer computes what the docstring says: a zero W_G halves every head's output (sigmoid(0) = 1/2)."""
    for gate in ("element", "head"):
        spec = AttentionSpec(d_model=6, n_heads=2, n_kv_heads=1, biases="vo", causal=True, output_gate=gate)
        plain = AttentionSpec(d_model=6, n_heads=2, n_kv_heads=1, biases="vo", causal=True)
        theta = Layout(spec).init(torch.Generator().manual_seed(0))
        w = Layout(spec).unflatten(theta)
        w["W_G"].zero_()
        w_plain = {name: w[name] for name in Layout(plain).blocks}
        x = torch.randn(2, 5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        halved = attention(Layout(plain).flatten({**w_plain, "W_O": w["W_O"] / 2}), x, plain)
        gated = attention(Layout(spec).flatten(w), x, spec)
        assert torch.allclose(gated, halved)
        assert torch.allclose(attention(Layout(spec).flatten(w), x, spec, last_only=True), gated[:, -1:])


def test_bad_gates_are_refused_by_field():
    with pytest.raises(SpecError, match="^output_gate:"):
        AttentionSpec(d_model=4, n_heads=2, output_gate="channel")
    with pytest.raises(SpecError, match="^sub_norm:"):
        AttentionSpec(d_model=4, n_heads=2, sub_norm=True, output_gate="head")
    spec = AttentionSpec(d_model=4, n_heads=2, output_gate="head")
    assert spec.label.endswith("_gatehead") and AttentionSpec.from_row(spec.to_row()) == spec
    assert spec.block_shapes()["W_G"] == (2, 4) and spec.n_params == 4 * 16 + 8
