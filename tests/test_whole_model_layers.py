"""Whole models whose blocks differ (ModelSpec.layers): the spec, the function, the count against the judge."""

import dataclasses

import pytest
import torch

from attnid.hf import model_spec, stored_config
from attnid.hf.config_tables import shipped_row
from attnid.model import LayerSpec, MLPSpec
from attnid.model.counting import count_model
from attnid.model.forward import logits
from attnid.model.grid import own_spec
from attnid.model.judge import measure_model
from attnid.model.layout import ModelLayout
from attnid.model.spec import ModelSpec
from attnid.layer.spec import AttentionSpec, SpecError

# Blocks that differ in heads, head sizes, biases, MLP width, kind and bias (LayerNorm, learned positions).
MIXED = {
    "attention": {"biases": "qkvo"},
    "mlp_bias": True,
    "layers": [
        {"d_ff": 4},
        {"attention": {"n_heads": 1, "d_head_qk": 6, "d_head_v": 3, "biases": "qv"}, "d_ff": 10, "mlp": "relu",
         "mlp_bias": False},
    ],
}  # fmt: skip
# Blocks that differ in RoPE base, sliding window, head and KV-group counts and MLP width (RMSNorm, SwiGLU).
ROPE = {
    "attention": {"rope_dims": 4, "n_kv_heads": 1},
    "positions": "rope",
    "norm": "rmsnorm",
    "norm_bias": False,
    "mlp": "swiglu",
    "layers": [
        {"attention": {"rope_base": 1.0e4, "sliding_window": 3}},
        {"attention": {"rope_base": 1.0e6, "n_heads": 4, "n_kv_heads": 2, "d_head_qk": 4, "d_head_v": 4}, "d_ff": 12},
    ],
}


def test_uniform_layers_are_stored_as_uniform():
    spec = own_spec({})
    same = ModelSpec.from_layers(spec.layer_specs, vocab_size=12, max_positions=6, norm_eps=0.0)
    assert same == spec and same.layers == ()
    assert len(spec.layer_specs) == spec.n_layers


def test_layers_are_checked():
    spec = own_spec(MIXED)
    assert spec.layers and spec.layers[0] == spec.uniform_layer
    with pytest.raises(SpecError, match="layers"):
        spec.replace(n_layers=3)
    with pytest.raises(SpecError, match="layers"):
        spec.replace(d_ff=7)  # layer 0 no longer the top-level MLP
    wide = LayerSpec(AttentionSpec(d_model=12, n_heads=2), MLPSpec(8))
    with pytest.raises(SpecError, match="d_model"):
        ModelSpec.from_layers([spec.layers[0], wide], vocab_size=12)
    with pytest.raises(SpecError, match="layers"):
        own_spec({"layers": [{"n_heads": 3}, {}]})  # attention fields belong under `attention`


def test_layout_follows_each_block():
    spec = own_spec(MIXED)
    layout = ModelLayout(spec)
    assert layout.size == spec.n_params
    assert layout.blocks["layers.0.mlp.up"].shape == (8, 4) and layout.blocks["layers.1.mlp.up"].shape == (8, 10)
    assert "layers.1.mlp.down_bias" not in layout.blocks
    sizes = [layout.blocks[f"layers.{i}.attn"].shape[0] for i in range(2)]
    assert sizes == [x.attention.n_params for x in spec.layer_specs] and sizes[0] != sizes[1]


def test_blocks_are_their_own_functions():
    """Changing only layer 1's RoPE base changes the logits: the forward pass reads every block's own spec."""
    spec = own_spec(ROPE)
    other = ModelSpec.from_layers(
        [spec.layers[0], dataclasses.replace(spec.layers[1], attention=dataclasses.replace(spec.layers[1].attention,
                                                                                          rope_base=1.0e4))],
        **{k: getattr(spec, k) for k in ("vocab_size", "max_positions", "norm", "norm_bias", "norm_eps", "positions")},
    )  # fmt: skip
    theta = ModelLayout(spec).init(torch.Generator().manual_seed(0))
    tokens = torch.arange(spec.seq_len) % spec.vocab_size
    assert not torch.allclose(logits(theta, tokens, spec), logits(theta, tokens, other))


@pytest.mark.parametrize("fields", [MIXED, ROPE], ids=["mixed", "rope"])
def test_per_layer_count_agrees_with_jacobian(fields):
    spec = own_spec(fields)
    counts, result = count_model(spec), measure_model(spec)
    assert result["measured"] == result["measured_half"] == counts.unidentified
    assert result["gap"] > 5


def test_gemma3_27b_counts_with_its_local_and_global_layers():
    spec = model_spec(stored_config("gemma3_27b"))
    bases = [x.attention.rope_base for x in spec.layer_specs]
    assert sorted(set(bases)) == [1.0e4, 1.0e6] and bases[:6] == [1.0e4] * 5 + [1.0e6]
    row = shipped_row("gemma3_27b")
    assert row["status"] == "ok" and row["P"] == spec.n_params
    # the two kinds of block differ only in the RoPE base, which no count depends on
    uniform = spec.replace(layers=())
    assert count_model(uniform).unidentified == row["unidentified"]
    # each block's two output norms: 2 d gains more than the pre-norm-only model, 2 weak scales per block
    assert spec.output_norms and row["P"] == spec.replace(output_norms=False).n_params + 2 * spec.n_layers * 5376
    assert row["weakly_identified"] == count_model(spec.replace(output_norms=False)).weakly_identified + 2 * 62


# Gemma-2/3 blocks: h + Norm(Attn(Norm h)), h + Norm(MLP(Norm h)) (attnid.model.counting.residual.residual_gauge).
OUTPUT_NORMS = {"norm": "rmsnorm", "norm_bias": False, "output_norms": True, "positions": "rope",
                "attention": {"rope_dims": 4}, "mlp": "geglu"}  # fmt: skip


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_output_norms_agree_with_jacobian(tied):
    """Untied: no residual rotation survives the output norms' gains (141, not 141 + 28)."""
    spec = own_spec({**OUTPUT_NORMS, "tied": tied, "gemma_gain": tied})
    counts, result = count_model(spec), measure_model(spec)
    assert result["measured"] == result["measured_half"] == counts.unidentified == (133 if tied else 141)
    assert "residual_rotations" not in counts.breakdown and counts.breakdown["residual_scale"] == 1 + 2 * 2


def test_real_gemma2_agrees():
    """transformers' Gemma2ForCausalLM (output norms, softcaps): the output norms' scales are weak with eps."""
    pytest.importorskip("transformers")
    from attnid.gauge.cases import real_case

    row = real_case("gemma2", other_seed=False)
    assert row["agree"], row
    assert row["weak_count"] == row["weak_measured"] == 1 + 2 * 2


# A parallel block at layer 0 without learned positions (attnid.model.counting.token_points.first_mlp_table): d_model 8 unless
# set, one layer; the MLP's whole V x d_out output table is reachable (excess > 0) or not (excess 0).
PARALLEL = {"parallel": True, "positions": "none", "n_layers": 1}
FIRST_MLP = {
    "untied_free_table": ({"vocab_size": 12}, 99),
    "untied_near_crossover": ({"vocab_size": 24, "attention": {"d_model": 6}}, 7),
    "untied_data_limited": ({"vocab_size": 26, "attention": {"d_model": 6}}, 0),
    "tied_free_table_rmsnorm": ({"vocab_size": 12, "tied": True, "norm": "rmsnorm", "norm_bias": False}, 57),
    "tied_near_crossover": ({"vocab_size": 19, "tied": True}, 6),
    "tied_data_limited": ({"vocab_size": 20, "tied": True}, 0),
    "tied_shared_norm_gqa_rope": (
        {"vocab_size": 12, "tied": True, "shared_norm": True, "positions": "rope",
         "attention": {"n_kv_heads": 1, "rope_dims": 2}},
        59,
    ),
    "biases_swiglu": ({"vocab_size": 12, "attention": {"biases": "qkvo"}, "mlp": "swiglu", "mlp_bias": True}, 155),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(FIRST_MLP))
def test_parallel_first_mlp_table_agrees_with_jacobian(name):
    fields, excess = FIRST_MLP[name]
    spec = own_spec({**PARALLEL, **fields})
    counts, result = count_model(spec), measure_model(spec, half=False)
    assert counts.breakdown.get("first_mlp_table", 0) == excess
    assert result["measured"] == counts.unidentified and result["gap"] > 5


def test_falcon_40b_counts_in_the_free_table_regime():
    """At Falcon-40B's sizes V d is below the layer-0 MLP's parameters: the table is free, and the
    excess is the MLP's surplus plus the tied reading gauge; Falcon-7B's table stays data-limited."""
    spec = model_spec(stored_config("falcon_40b"), seq_len=2048)
    V, d, m = spec.vocab_size, spec.d_model, spec.d_ff
    assert (V, d, m, spec.tied, spec.shared_norm) == (65024, 8192, 32768, True, False)
    assert V * d < 2 * d * m  # the table has fewer entries than the MLP has parameters
    row = shipped_row("falcon_40b")
    d_out = d - 1
    surplus = m * d + m * d_out - V * d_out  # effective parameters (LayerNorm beta, no biases) beyond the table
    quadric = (d - 1) * d // 2
    shift = min(spec.attention.n_kv_heads * spec.attention.d_head_v, d_out)  # the value bias (beta) through W_O
    assert row["status"] == "ok" and row["src_first_mlp_table"] == surplus + quadric + 3 - V + shift
    falcon_7b = shipped_row("falcon_7b")
    assert falcon_7b["status"] == "ok" and falcon_7b.get("src_first_mlp_table", 0) == 0


def test_real_falcon_block_with_a_free_table_agrees():
    """transformers' FalconForCausalLM with Falcon-40B's block (two norms, GQA, RoPE, tied) at vocab 12."""
    pytest.importorskip("transformers")
    from attnid.gauge.cases import real_case, tiny_spec

    assert count_model(tiny_spec("falcon_free_table")).breakdown["first_mlp_table"] > 0
    row = real_case("falcon_free_table", other_seed=False)
    assert row["agree"], row
    # the table's directions from the per-token factorisation, not from J: the certificate is two-sided
    assert row["two_sided"] and row["generator_rank"] == row["count"] and row["fallback_gap"] > 6, row
