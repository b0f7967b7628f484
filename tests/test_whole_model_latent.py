"""Multi-head latent attention in the whole model (attnid.model.counting: latent_fibre, latent_token_points): counts against the Jacobian judge,
the real DeepSeek classes, the stored DeepSeek configs, and the refusals."""

import dataclasses
from pathlib import Path

import pytest

from attnid.layer.counting import count
from attnid.gauge.cases import own_case
from attnid.hf import load_config, model_spec
from attnid.model.counting import count_model
from attnid.model.counting.token_points import latent_token_points
from attnid.model.grid import own_spec
from attnid.layer.spec import SpecError

CONFIGS = Path(__file__).resolve().parents[1] / "src" / "attnid" / "hf" / "configs"
LATENT_BASE = {"positions": "rope", "norm": "rmsnorm", "norm_bias": False, "mlp": "swiglu", "n_layers": 1}
# d_model 8, vocab 12, one block; the comment says what each shape exercises.
SHAPES = {
    # 4 heads of nope 2 + rope 2, values 2, kv rank 6 and a plain W_Q: 6 * 7 / 2 + 1 - 12 = 10 token-point directions
    "kv6_h4": {"n_heads": 4, "d_head_qk": 4, "d_head_v": 2, "rope_dims": 2, "kv_lora_rank": 6},
    # two RoPE planes, ranks 3 and 5: only the query latent exceeds the 12 points (5 * 6 / 2 + 1 - 12 = 4)
    "q5_kv3_rope4": {"d_head_qk": 6, "d_head_v": 2, "rope_dims": 4, "kv_lora_rank": 3, "q_lora_rank": 5},
}


def latent_spec(attention: dict, **fields):
    return own_spec({**LATENT_BASE, **fields, "attention": {"n_heads": 2, "causal": True, **attention}})


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_count_agrees_with_the_judge(shape):
    """P - rank at the spec's eps, on half the data, and the weak class at eps = 0, equal the count."""
    spec = latent_spec(SHAPES[shape])
    row = own_case(shape, spec, other_seed=False)
    assert row["agree"], row
    assert row["gap"] > 4, row
    assert count_model(spec).breakdown["latent_token_points"] > 0


def test_no_positions_and_exact_scales():
    """Without RoPE (positions none) and with the latent norms at eps = 0 (their scales exact, no weak class)."""
    attention = {"d_head_qk": 4, "d_head_v": 4, "kv_lora_rank": 4, "q_lora_rank": 5, "norm_eps": 0.0}
    spec = latent_spec(attention, positions="none")
    counts = count_model(spec)
    assert counts.weakly_identified == 0
    row = own_case("nope_only", spec, other_seed=False)
    assert row["agree"], row


def test_token_points_follow_the_vocabulary():
    """max(0, r (r + 1) / 2 + 1 - V) per latent of the first block, which takes the down-projection's
    scale out of the weak class; later blocks and large vocabularies add nothing."""
    small = latent_spec({"d_head_qk": 6, "d_head_v": 4, "rope_dims": 2, "kv_lora_rank": 4, "q_lora_rank": 6})
    assert latent_token_points(small) == (21 + 1 - 12, 1)  # the kv latent: 4 * 5 / 2 + 1 = 11 <= 12 points
    assert latent_token_points(small.replace(vocab_size=22)) == (0, 0)
    assert latent_token_points(small.replace(vocab_size=21)) == (1, 1)
    two = count_model(small.replace(n_layers=2)).breakdown
    assert two["latent_token_points"] == 10 and two["attention"] == 2 * count_model(small).breakdown["attention"]
    exact = small.with_eps(0.0)  # at eps = 0 the scale was exact already: one fewer new direction
    assert latent_token_points(exact) == (9, 0)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"norm": "layernorm", "norm_bias": False}, "norm"),
        ({"norm_position": "post", "final_norm": False}, "norm_position"),
        ({"parallel": True}, "parallel"),
        ({"vocab_size": 5}, "vocab_size"),
    ],
)
def test_refusals_name_the_field(change, field):
    spec = latent_spec({"d_head_qk": 6, "d_head_v": 4, "rope_dims": 2, "kv_lora_rank": 4, "q_lora_rank": 6}, **change)
    with pytest.raises(SpecError) as err:  # a description the count does not cover: refused when counted
        count_model(spec)
    assert err.value.field == field


def test_learned_positions_refused():
    with pytest.raises(SpecError) as err:
        count_model(latent_spec({"d_head_qk": 4, "kv_lora_rank": 4}, positions="learned"))
    assert err.value.field == "positions"


@pytest.mark.parametrize("name", ["deepseek_v2_lite", "deepseek_v3"])
def test_deepseek_configs_count_whole(name):
    """The stored configs count whole (latent attention, dense then routed experts); the first block's
    latents read V token points, each taking its down-projection's scale out of the weak class."""
    cfg = load_config(CONFIGS / f"{name}.json")
    spec = model_spec(cfg)
    a = spec.attention
    ranks = [r for r in (a.kv_lora_rank, a.q_lora_rank) if r]
    assert (a.kv_lora_rank, a.q_lora_rank, a.rope_dims, a.d_head_qk, a.d_head_v) == (
        512,
        cfg["q_lora_rank"] or 0,
        64,
        192,
        128,
    )
    assert all(x.attention == a for x in spec.layer_specs)
    counts = count_model(spec)
    V = cfg["vocab_size"]
    expected = sum(max(0, r * (r + 1) // 2 + 1 - V) for r in ranks)
    assert counts.breakdown["latent_token_points"] == expected
    assert expected == {"deepseek_v2_lite": 28_929, "deepseek_v3": 1_053_186}[name]
    # the residual scale, one scale per latent and block, less those the first block's token points took
    assert counts.weakly_identified == 1 + spec.n_layers * len(ranks) - len(ranks)
    per_block = count_model(spec.replace(vocab_size=10**7)).breakdown["attention"] // spec.n_layers
    assert per_block == count(dataclasses.replace(a, seq_len=None)).unidentified


def test_real_deepseek_agrees():
    pytest.importorskip("transformers")
    from attnid.gauge.cases import real_case

    row = real_case("deepseek_v3", other_seed=False)
    assert row["agree"], row
