"""Latent attention's variants (attnid.layer.spec_latent, counts in attnid.layer.counting_variants): an unrotated shared
key (Kimi-Linear: GL(s) where a rotated one keeps C^* per plane), output gates and sinks beside the latents (HY-V4,
Bailing-hybrid), and DeepSeek sparse attention's indexer (MiniMax-M3's on GQA attention too), whose parameters are
all unidentified on T <= index_topk.
Each count is measured by the Jacobian of this project's layer (the real modules: tests/test_hf_sparse.py)."""

import pytest
import torch

from attnid.errors import SpecError
from attnid.jacobian import measure
from attnid.layer.counting import count
from attnid.layer.forward import attention
from attnid.layer.layout import Layout
from attnid.layer.spec import AttentionSpec
from attnid.layer.spec_latent import indexer_params

LATENT = {"d_model": 8, "n_heads": 2, "d_head_qk": 6, "d_head_v": 4, "causal": True, "kv_lora_rank": 4}
INDEXER = {"q_lora_rank": 6, "rope_dims": 2, "index_topk": 64, "index_heads": 2, "index_head_dim": 4}
COUNTED = [  # (variant, its count at LATENT's shape): Kimi's shared key, HY-V4's layer, the indexer
    ({"shared_key_dims": 2}, 78),
    ({"q_lora_rank": 6, "rope_dims": 2, "output_gate": "element", "sinks": True}, 73),
    (INDEXER, 201),
]
SWEEP = [
    {"shared_key_dims": 2, "q_lora_rank": 6},
    {"shared_key_dims": 4, "d_head_v": 2},  # s > v, the nope head of 2
    {"shared_key_dims": 2, "output_gate": "head", "norm_eps": 0.0},  # exact scales
    {"rope_dims": 2, "output_gate": "head"},  # Bailing-hybrid
    {"rope_dims": 2, "output_gate": "element", "gate_fn": "softplus", "gate_bias": True},
    {**INDEXER, "output_gate": "head"},  # Dots' gate per head with an indexer
    {"q_lora_rank": 6, "rope_dims": 2, "index_topk": 64},  # a layer reusing another's selection: no parameters
    {"q_lora_rank": 4, "rope_dims": 2, "raw_latent_query": True, "output_gate": "element"},  # A.X-K2
    {"q_lora_rank": 4, "rope_dims": 2, "raw_latent_query": True, "output_gate": "head", "norm_eps": 0.0},
    {"rope_dims": 2, "shared_key_norm": True},  # Dots3-Note's normed shared key: p/2, W_KR's scale weak
    {"rope_dims": 4, "d_head_qk": 8, "shared_key_norm": True, "norm_eps": 0.0},
    {**INDEXER, "shared_key_norm": True, "output_gate": "head"},  # Dots3-Note's indexed layer
    {"d_model": 8, "n_heads": 4, "n_kv_heads": 2, "d_head_qk": 4, "rope_dims": 2, "qk_norm": "rms_head",
     "kv_lora_rank": 0, "index_topk": 64, "index_heads": 2, "index_head_dim": 4},  # MiniMax-M3's sparse layer
    {"d_model": 10, "n_heads": 3, "d_head_qk": 5, "d_head_v": 3, "kv_lora_rank": 5, "q_lora_rank": 4,
     "shared_key_dims": 2, "output_gate": "element"},  # fmt: skip
]


def _measured(variant) -> tuple[AttentionSpec, dict]:
    torch.set_num_threads(1)
    spec = AttentionSpec(**{**LATENT, **variant})
    result = measure(spec, seed=1)[0]
    assert result["gap"] > 6 and result["margin"] > 2, result  # decided: far from the tolerance
    return spec, result


@pytest.mark.parametrize(("variant", "unidentified"), COUNTED, ids=lambda v: str(v)[:40])
def test_each_latent_variant_measures_its_count(variant, unidentified):
    spec, result = _measured(variant)
    assert result["measured"] == count(spec).unidentified == unidentified, (spec.label, count(spec).breakdown)


@pytest.mark.parametrize("variant", SWEEP, ids=lambda v: str(v)[:40])
def test_more_latent_variants_measure_their_counts(variant):
    spec, result = _measured(variant)
    assert result["measured"] == count(spec).unidentified, (spec.label, count(spec).breakdown)


def test_an_unrotated_shared_key_keeps_gl_not_one_scale_per_plane():
    """Kimi's shared key of s dims: GL(s), s^2 directions; rotated (DeepSeek) only C^* per plane, s."""
    shape = {**LATENT, "d_head_v": 2}
    kimi, rotated = AttentionSpec(**shape, shared_key_dims=4), AttentionSpec(**shape, rope_dims=4)
    assert kimi.n_params == rotated.n_params
    assert count(kimi).breakdown["query_key"] - count(rotated).breakdown["query_key"] == 16 - 4


def test_a_norm_on_the_rotated_shared_key_keeps_one_scale_per_plane():
    """Dots3-Note: of C^* per plane only the scale is left (traded with the norm's gain), W_KR's scale is weak."""
    shape = {**LATENT, "rope_dims": 4, "d_head_qk": 8}
    normed, plain = AttentionSpec(**shape, shared_key_norm=True), AttentionSpec(**shape)
    assert normed.n_params - plain.n_params == 4
    assert count(normed).unidentified - count(plain).unidentified == 2 - 4  # p/2 in place of p
    assert count(normed).weakly_identified == count(plain).weakly_identified + 1


def test_the_indexer_is_unidentified_and_moves_no_output():
    spec, plain = AttentionSpec(**LATENT, **INDEXER), AttentionSpec(**LATENT, q_lora_rank=6, rope_dims=2)
    assert count(spec).unidentified - count(plain).unidentified == indexer_params(spec) == 2 * 6 * 4 + 8 * 4 + 8 + 16
    assert spec.n_params - plain.n_params == indexer_params(spec)
    layout = Layout(spec)
    theta = layout.init(torch.Generator().manual_seed(0))
    moved = layout.unflatten(theta.clone())
    for name in ("W_IQ", "W_IK", "gain_IK", "shift_IK", "W_IW"):
        moved[name] += 1.0
    x = torch.randn(3, 7, 8, dtype=torch.float64)
    assert torch.equal(attention(theta, x, spec), attention(layout.flatten(moved), x, spec))


def test_what_the_latent_variants_do_not_model_is_refused_by_field():
    with pytest.raises(SpecError, match="^shared_key_dims:"):
        AttentionSpec(**LATENT, shared_key_dims=2, rope_dims=2)  # a shared key partly rotated
    with pytest.raises(SpecError, match="^causal:"):
        AttentionSpec(d_model=8, n_heads=2, index_topk=64)  # the selection is modelled on causal attention
    with pytest.raises(SpecError, match="^raw_latent_query:"):
        AttentionSpec(d_model=8, n_heads=2, raw_latent_query=True)  # no latent attention
    with pytest.raises(SpecError, match="^shared_key_norm:"):
        AttentionSpec(**LATENT, shared_key_dims=2, shared_key_norm=True)  # a norm on an unrotated shared key
    with pytest.raises(SpecError, match="^q_lora_rank:"):
        AttentionSpec(**LATENT, rope_dims=2, index_topk=64, index_heads=2, index_head_dim=4)  # it reads c_Q
    with pytest.raises(SpecError, match="^index_heads:"):
        AttentionSpec(**LATENT, q_lora_rank=6, rope_dims=2, index_topk=64, index_heads=2)
    short = AttentionSpec(**LATENT, rope_dims=2, index_topk=2)  # T_min = 3 > index_topk
    with pytest.raises(SpecError, match="^index_topk:"):
        count(short)
    with pytest.raises(SpecError, match="^seq_len:"):
        count(AttentionSpec(**LATENT, rope_dims=2, index_topk=8, seq_len=9))
    with pytest.raises(ValueError, match="index_topk"):  # the layer would have to drop keys
        spec = AttentionSpec(**LATENT, rope_dims=2, index_topk=4)
        attention(Layout(spec).init(), torch.randn(1, 5, 8, dtype=torch.float64), spec)


def test_the_new_fields_round_trip():
    spec = AttentionSpec(**LATENT, **INDEXER, output_gate="element", sinks=True)
    assert spec.label.endswith("_gateelement_top64_ih2_id4")
    assert AttentionSpec.from_row(spec.to_row()) == spec == AttentionSpec.from_config(spec.to_config())
    assert AttentionSpec(**LATENT, shared_key_dims=2).block_shapes()["W_KR"] == (8, 2)
    axk2 = AttentionSpec(**LATENT, rope_dims=2, q_lora_rank=6, raw_latent_query=True, output_gate="element")
    assert (axk2.block_shapes()["W_UQ"], axk2.block_shapes()["W_G"]) == ((2, 12, 6), (2, 12, 4))
    with pytest.raises(SpecError, match="^raw_latent_query:"):
        AttentionSpec(**LATENT, rope_dims=2, raw_latent_query=True)  # no query latent to read
