"""The gate's function and bias (`gate_fn`, `gate_bias`: attnid.layer.counting_gates) and the gated mixtures of experts
mapped by attnid.hf.mapping.gated (AfMoE, Laguna, Beam).

A softplus gate (Laguna) or a bias per head inside a sigmoid gate (Beam) changes no count: the element gate still
leaves of GL(v) per group only the diagonal and shows every value bias, the head gate still keeps GL(v) and shows
each b_V^g W_O^h, and b_G is seen. Measured at random shapes (GQA, MQA, every bias subset, RoPE, value heads wider
than d_model) against the Jacobian of this project's layer, and on the real Laguna and Beam modules (opt-in:
`pytest -m selfcheck`; AfMoE's sigmoid element gate is Qwen3-Next's, checked in tests/test_hf_hybrid.py).
"""

import math

import pytest
import torch

from attnid.layer.forward import attention
from attnid.layer.counting import count
from attnid.errors import SpecError
from attnid.hf.check import check_config
from attnid.hf.coverage import counted, default_config
from attnid.hf.mapping import MAPPERS, REFUSED, model_spec
from attnid.hf.refusals import REASONS
from attnid.jacobian import measure
from attnid.layer.layout import Layout
from attnid.model.counting import count_model
from attnid.layer.spec import AttentionSpec
from test_output_gate import random_shapes

GATES = [
    {"output_gate": "element", "gate_fn": "softplus"},
    {"output_gate": "head", "gate_fn": "softplus"},
    {"output_gate": "element", "gate_bias": True},
    {"output_gate": "head", "gate_fn": "softplus", "gate_bias": True},
]
SHAPES = [
    {"d_model": 8, "n_heads": 4, "n_kv_heads": 2, "d_head_qk": 2, "rope_dims": 2, "biases": "qkvo", "causal": True},
    {"d_model": 4, "n_heads": 3, "n_kv_heads": 1, "d_head_qk": 2, "d_head_v": 6, "biases": "vo", "causal": True},
] + random_shapes(seed=11, n=3)  # fmt: skip


@pytest.mark.parametrize("gate", GATES, ids=lambda g: AttentionSpec(d_model=2, n_heads=1, **g).label[18:])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: AttentionSpec(**s).label)
def test_the_gate_function_and_bias_keep_the_gated_count(shape, gate):
    spec = AttentionSpec(**shape, **gate)
    sigmoid = AttentionSpec(**shape, output_gate=gate["output_gate"])
    assert count(spec).breakdown == count(sigmoid).breakdown
    result = measure(spec, seed=1)[0]
    assert result["gap"] > 6 and result["margin"] > 3, result  # decided: far from the tolerance
    assert result["measured"] == count(spec).unidentified, (spec.label, count(spec).breakdown)


def test_the_plain_rule_would_be_wrong_for_a_softplus_gate():
    """Measured: a softplus element gate with a gate bias leaves G v value-output directions, not the plain G v^2."""
    shape = {"d_model": 6, "n_heads": 2, "n_kv_heads": 1, "d_head_qk": 4, "d_head_v": 3, "rope_dims": 2,
             "biases": "v", "causal": True}  # fmt: skip
    spec = AttentionSpec(**shape, output_gate="element", gate_fn="softplus", gate_bias=True)
    measured = measure(spec, seed=0)[0]["measured"]
    assert measured == count(spec).unidentified == count(AttentionSpec(**shape)).unidentified - 6


def test_the_layer_computes_the_gate_it_names():
    """With W_G zero, each head's output is scaled by softplus(b_G^h) or sigmoid(b_G^h), the gate it names."""
    x = torch.randn(2, 5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    plain = AttentionSpec(d_model=6, n_heads=2, biases="vo", causal=True)
    softplus, sigmoid = (lambda b: math.log1p(math.exp(b))), (lambda b: 1 / (1 + math.exp(-b)))
    for extra, fn in (({"gate_fn": "softplus"}, softplus), ({}, sigmoid)):
        gate = {"output_gate": "element", "gate_bias": True, **extra}
        spec = AttentionSpec(d_model=6, n_heads=2, biases="vo", causal=True, **gate)
        w = Layout(spec).unflatten(Layout(spec).init(torch.Generator().manual_seed(0)))
        w["W_G"].zero_()
        scale = torch.tensor([fn(b) for b in w["b_G"].tolist()], dtype=torch.float64)
        w_plain = {name: w[name] for name in Layout(plain).blocks} | {"W_O": w["W_O"] * scale[:, None, None]}
        gated = attention(Layout(spec).flatten(w), x, spec)
        assert torch.allclose(gated, attention(Layout(plain).flatten(w_plain), x, plain))


def test_bad_gate_fields_are_refused_by_field():
    with pytest.raises(SpecError, match="^gate_fn:"):
        AttentionSpec(d_model=4, n_heads=2, output_gate="head", gate_fn="tanh")
    with pytest.raises(SpecError, match="^gate_fn:"):
        AttentionSpec(d_model=4, n_heads=2, gate_fn="softplus")  # no gate to apply it to
    with pytest.raises(SpecError, match="^gate_bias:"):
        AttentionSpec(d_model=4, n_heads=2, gate_bias=True)
    spec = AttentionSpec(d_model=4, n_heads=2, output_gate="element", gate_fn="softplus", gate_bias=True)
    assert spec.label.endswith("_gateelement_gsoftplus_gbias") and AttentionSpec.from_row(spec.to_row()) == spec
    assert spec.block_shapes()["b_G"] == (2,) and spec.n_params == 4 * 16 + 2 * 4 * 2 + 2


def spec_of(mt, **overrides):
    return model_spec({**default_config(mt), **overrides})


def test_each_type_maps_its_gate_rope_and_heads():
    afmoe = {x.attention.rope_dims: x.attention for x in spec_of("afmoe").layer_specs}
    assert set(afmoe) == {0, 128} and afmoe[128].sliding_window == 1024 and afmoe[0].sliding_window == 0
    assert (afmoe[0].output_gate, afmoe[0].gate_fn, afmoe[0].qk_norm) == ("element", "sigmoid", "rms_head")
    laguna = spec_of("laguna").attention  # the class's rope_parameters: full layers rotate half the head
    assert (laguna.output_gate, laguna.gate_fn, laguna.rope_dims, laguna.rope_base) == ("head", "softplus", 64, 5e5)
    layered = spec_of(
        "laguna", num_hidden_layers=2, layer_types=["full_attention", "sliding_attention"],
        num_attention_heads_per_layer=[48, 16], mlp_layer_types=["dense", "sparse"], gating="per-element",
    )  # fmt: skip
    full, sliding = (x.attention for x in layered.layer_specs)
    assert (full.n_heads, sliding.n_heads, sliding.rope_dims, sliding.sliding_window) == (48, 16, 128, 512)
    assert full.output_gate == "element"
    with pytest.raises(SpecError, match="^gating:"):
        spec_of("laguna", gating="per-token")
    beam = {x.attention.rope_dims: x.attention for x in spec_of("beam").layer_specs}
    assert set(beam) == {0, 128} and beam[0].gate_bias and beam[128].sliding_window == 512
    assert spec_of("beam").layer_specs[-1].attention.rope_dims == 0  # the last layer is full (NoPE)


@pytest.mark.parametrize("mt", ["afmoe", "laguna", "beam"])
def test_the_gated_types_are_mapped_layers_only(mt):
    assert mt in MAPPERS and mt not in REFUSED and mt not in REASONS
    spec = spec_of(mt)
    assert spec.not_modelled[0][1].startswith("gated attention: ")
    with pytest.raises(SpecError, match="^model_type:"):
        count_model(spec)
    assert counted(mt)[0] == "layers only"


@pytest.mark.selfcheck  # tens of seconds: opt-in (pytest -m selfcheck)
@pytest.mark.parametrize("mt", ["laguna", "beam"])  # a softplus gate per head; a sigmoid gate with a bias per head
def test_the_real_gated_modules_agree_with_the_count(mt):
    """Every distinct attention layer of the class's tiny model (Beam's NoPE layer with its query scaling too)."""
    torch.set_num_threads(1)
    rows = check_config(default_config(mt), whole=False)
    for row in rows:
        assert row["verdict"] == "agree" and row["measured"] == row["count"] and row["P"] == row["P_spec"], row
