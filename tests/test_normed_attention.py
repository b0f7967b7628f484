"""Gain-free norms, chunks and a query temperature (attnid.layer.counting_variants): the count against the Jacobian of this
project's layer at random shapes (GQA, MQA, every bias subset, partial RoPE), and against the real modules.

* Llama-4: a gain-free RMSNorm ("L2 norm") on q and k after RoPE (`qk_norm` rms_plain): n(q O) = n(q) O only for
  O orthogonal (a scalar is absorbed by the norm: weakly identified), and O must commute with every rotation:
  SO(2) per plane and O(u) on the unrotated dims, per group: G (p/2 + u (u - 1) / 2) (G u (u - 1) / 2 without
  RoPE); a chunk mask (`attention_chunk`) and a fixed query scale per position (`temperature_floor`) leave the
  count as it is.
* Gemma-4: a gain-free RMSNorm on every value head (`v_norm`) leaves of GL(v) per group O(v): G v (v - 1) / 2, sees
  the value bias, and the scale of each group's values is weakly identified (G).
"""

import random

import pytest
import torch

from attnid.layer.forward import attention
from attnid.layer.counting import count
from attnid.jacobian import measure
from attnid.layer.layout import Layout
from attnid.layer.spec import AttentionSpec, SpecError


def random_shapes(seed: int, n: int, causal: bool | None = None) -> list[dict]:
    """n small random shapes (P a few hundred): G groups of r heads, 2 <= d_k, d_v <= d (a norm on one dim is a
    sign), some rotated dims, any bias subset, causal or not (or as given)."""
    rng = random.Random(seed)
    shapes = []
    for _ in range(n):
        d, G, r = rng.randint(3, 6), rng.randint(1, 2), rng.randint(1, 3)
        k, v = rng.randint(2, d), rng.randint(2, d)
        shapes.append(
            {"d_model": d, "n_heads": G * r, "n_kv_heads": G, "d_head_qk": k, "d_head_v": v,
             "rope_dims": 2 * rng.randint(0, k // 2), "biases": "".join(b for b in "qkvo" if rng.random() < 0.5),
             "causal": rng.random() < 0.7 if causal is None else causal}
        )  # fmt: skip
    return shapes


def measured(spec: AttentionSpec, seq_len: int | None = None) -> dict:
    result = measure(spec, seed=1, seq_len=seq_len)[0]
    assert result["gap"] > 6 and result["margin"] > 2, (spec.label, result)  # decided: far from the tolerance
    return result


V_NORM = [
    {"d_model": 8, "n_heads": 4, "n_kv_heads": 2, "d_head_qk": 2, "d_head_v": 4, "rope_dims": 2, "biases": "qkvo",
     "causal": True},
    {"d_model": 5, "n_heads": 3, "n_kv_heads": 1, "d_head_qk": 3, "d_head_v": 5, "biases": "vo", "causal": True},
    {"d_model": 5, "n_heads": 2, "d_head_qk": 3, "d_head_v": 3, "sinks": True, "biases": "qkvo", "causal": True},
] + random_shapes(seed=11, n=4)  # fmt: skip


@pytest.mark.parametrize("shape", V_NORM, ids=lambda s: AttentionSpec(**s).label)
def test_the_value_norm_count_is_the_measured_rank_deficiency(shape):
    spec = AttentionSpec(**shape, v_norm=True)
    c = count(spec)
    G, v = spec.n_kv_heads, spec.d_head_v
    assert c.breakdown["value_output"] == G * v * (v - 1) // 2 and c.breakdown["value_bias"] == 0
    assert measured(spec)["measured"] == c.unidentified and c.weakly_identified == G
    exact = AttentionSpec(**shape, v_norm=True, norm_eps=0.0)  # the scales of the values join
    assert measured(exact)["measured"] == count(exact).unidentified == c.unidentified + G


def test_the_value_norm_leaves_orthogonal_not_general_maps():
    """Neither GL(v) (the plain rule, G v^2) nor the scaled orthogonal group counted as exact (G (v (v - 1)/2 + 1))
    at eps > 0: the measured deficiency is G v (v - 1) / 2."""
    shape = {"d_model": 6, "n_heads": 4, "n_kv_heads": 2, "d_head_qk": 3, "d_head_v": 4, "rope_dims": 2,
             "biases": "v", "causal": True}  # fmt: skip
    plain = count(AttentionSpec(**shape)).breakdown
    spec = AttentionSpec(**shape, v_norm=True)
    got = measured(spec)["measured"]
    assert got == count(spec).unidentified == plain["query_key"] + 2 * 6
    assert got != sum(plain.values()) and got != plain["query_key"] + 2 * 7


LLAMA4 = [
    {"d_model": 8, "n_heads": 4, "n_kv_heads": 2, "d_head_qk": 4, "rope_dims": 4, "causal": True},
    {"d_model": 6, "n_heads": 2, "n_kv_heads": 1, "d_head_qk": 5, "rope_dims": 2, "biases": "qkvo", "causal": True},
] + random_shapes(seed=5, n=4, causal=True)  # fmt: skip


@pytest.mark.parametrize("shape", LLAMA4, ids=lambda s: AttentionSpec(**s).label)
def test_gain_free_qk_norms_with_chunks_count_the_measured_rank_deficiency(shape):
    """Llama-4's RoPE layers: the L2 norm after RoPE inside chunks of 3 positions, measured on 9 positions (three
    chunks); the gained per-head rule (u + p/2 of the shared gains) would count something else."""
    spec = AttentionSpec(**shape, qk_norm="rms_plain", attention_chunk=3, norm_eps=1e-6)
    c = count(spec)
    G, p, u = spec.n_kv_heads, spec.rope_dims, spec.d_head_qk - spec.rope_dims
    assert c.breakdown["query_key"] == G * (p // 2 + u * (u - 1) // 2)
    assert measured(spec, seq_len=9)["measured"] == c.unidentified
    assert c.weakly_identified == spec.n_heads + G


def test_the_gained_norm_formula_would_be_wrong():
    """At d 8, 4 heads in 2 groups of head size 4, 2 rotated dims: no gain keeps SO(2) per plane and O(2) on the two
    unrotated dims per group (G (1 + 1) = 4); a shared gain would leave u + p/2 = 3, a gain per head G (u + p/2) = 6."""
    shape = {"d_model": 8, "n_heads": 4, "n_kv_heads": 2, "d_head_qk": 4, "rope_dims": 2, "causal": True}
    spec = AttentionSpec(**shape, qk_norm="rms_plain", attention_chunk=4)
    got = measured(spec, seq_len=8)["measured"]
    assert count(spec).breakdown["query_key"] == 4 and got == count(spec).unidentified
    for gained in ("rms_head", "rms_all"):
        assert count(AttentionSpec(**shape, qk_norm=gained)).unidentified != got


@pytest.mark.parametrize("shape", random_shapes(seed=3, n=4, causal=True), ids=lambda s: AttentionSpec(**s).label)
def test_a_query_temperature_leaves_the_count(shape):
    """Llama-4's NoPE layers: queries times 1 + 0.5 log(1 + floor((i + 1) / 2)), which differs from 1 on these
    positions; the measured deficiency is the plain count (and so is the chunked one)."""
    shape = {**shape, "rope_dims": 0}
    spec = AttentionSpec(**shape, temperature_floor=2, temperature_scale=0.5)
    assert count(spec).unidentified == count(AttentionSpec(**shape)).unidentified
    assert measured(spec, seq_len=8)["measured"] == count(spec).unidentified


def test_the_layer_computes_what_the_fields_say():
    """A chunk of c is c causal sequences; v_norm rescales each value head to rms 1; the temperature scales the
    query at index i by 1 + s log(1 + floor((i + 1) / f))."""
    base = {"d_model": 6, "n_heads": 2, "n_kv_heads": 1, "biases": "qkvo", "causal": True}
    chunked, plain = AttentionSpec(**base, attention_chunk=3), AttentionSpec(**base)
    theta = Layout(plain).init(torch.Generator().manual_seed(0), dtype=torch.float64)
    x = torch.randn(2, 6, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = attention(theta, x, chunked)
    assert torch.allclose(y[:, :3], attention(theta, x[:, :3], plain))
    assert torch.allclose(y[:, 3:], attention(theta, x[:, 3:], plain))
    assert torch.allclose(attention(theta, x, chunked, last_only=True), y[:, -1:])
    w = Layout(plain).unflatten(theta)
    normed = AttentionSpec(**base, v_norm=True, norm_eps=0.0)
    w_scaled = {**w, "W_V": 3 * w["W_V"], "b_V": 3 * w["b_V"]}
    assert torch.allclose(attention(Layout(plain).flatten(w_scaled), x, normed), attention(theta, x, normed))
    hot = AttentionSpec(**base, temperature_floor=2, temperature_scale=0.5)
    assert torch.allclose(attention(theta, x[:, :1], hot), attention(theta, x[:, :1], plain))  # index 0: scale 1
    assert not torch.allclose(attention(theta, x, hot), attention(theta, x, plain))
    assert torch.allclose(attention(theta, x, hot, last_only=True), attention(theta, x, hot)[:, -1:])


def test_bad_fields_are_refused_by_name():
    for fields, name in (
        ({"v_norm": 1}, "v_norm"),
        ({"v_norm": True, "d_head_v": 5}, "d_head_v"),
        ({"v_norm": True, "d_head_v": 1}, "d_head_v"),
        ({"v_norm": True, "output_gate": "head"}, "output_gate"),
        ({"attention_chunk": 1, "causal": True}, "attention_chunk"),
        ({"attention_chunk": 4}, "attention_chunk"),  # not causal
        ({"attention_chunk": 4, "causal": True, "sliding_window": 3}, "attention_chunk"),
        ({"temperature_floor": -1}, "temperature_floor"),
        ({"temperature_scale": 0.5}, "temperature_scale"),  # without a floor
        ({"temperature_floor": 2, "temperature_scale": 0.0}, "temperature_scale"),
    ):
        with pytest.raises(SpecError, match=f"^{name}:"):
            AttentionSpec(d_model=4, n_heads=2, **fields)
    chunk_too_short = AttentionSpec(d_model=8, n_heads=2, rope_dims=4, causal=True, attention_chunk=2)
    with pytest.raises(SpecError, match="^attention_chunk:"):
        count(chunk_too_short)
    spec = AttentionSpec(d_model=4, n_heads=2, causal=True, v_norm=True, attention_chunk=3, temperature_floor=8)
    assert spec.label.endswith("_vnorm_chunk3_temp8") and AttentionSpec.from_row(spec.to_row()) == spec
    assert spec.has_norm and spec.n_params == AttentionSpec(d_model=4, n_heads=2).n_params


def real_layers_agree(mt: str) -> list[dict]:
    """The self-check of the type's default config, attention layers only (`attnid.hf.check`)."""
    from attnid.hf.check import check_config
    from attnid.hf.coverage import checked_config

    torch.set_num_threads(1)
    rows = check_config(checked_config(mt)[1], whole=False)
    for row in rows:
        assert row["verdict"] == "agree" and row["measured"] == row["count"] and row["P"] == row["P_spec"], row
    return rows


def test_hunyuan_moe_maps_its_norm_after_rope_and_its_experts():
    """HunYuan-MoE: the per-head q/k RMSNorm with one gain each after RoPE (the gain does not commute with the
    rotation: only the product of the two gains is seen, k, and the scales H + G are weak); softmax top-k
    renormalised experts and an ungated shared SwiGLU; the real module agrees with the count."""
    from attnid.hf.coverage import counted, default_config
    from attnid.hf.mapping import REFUSED, model_spec

    assert "hunyuan_v1_moe" not in REFUSED
    spec = model_spec({**default_config("hunyuan_v1_moe"), "num_experts": 4, "moe_topk": 2})
    a, mlp = spec.layer_specs[0].attention, spec.layer_specs[0].mlp
    assert a.qk_norm == "rms_head_rotated" and count(a).breakdown["query_key"] == a.d_head_qk
    assert (mlp.n_experts, mlp.top_k, mlp.norm_topk_prob, mlp.n_shared) == (4, 2, True, 1)
    assert counted("hunyuan_v1_moe")[0] == "whole model"  # two-sided: test_hunyuan_moe_whole_model_is_certified...
    real_layers_agree("hunyuan_v1_moe")


@pytest.mark.parametrize("mt", ["llama4_text", "llama4"])
def test_llama4_maps_its_attention_layers_only(mt):
    """Llama-4 (its text model; llama4's causal LM is that text model): the RoPE layers have the gain-free q/k norm
    after RoPE and the chunk mask, every fourth layer has neither RoPE nor a norm but the query temperature; the
    router's input scaling keeps the whole model out. The real modules agree (the tiny model's chunk is 4 positions
    and its temperature turns from the second position on)."""
    from attnid.hf.coverage import counted, default_config
    from attnid.hf.mapping import REFUSED, model_spec

    assert mt not in REFUSED
    layers = model_spec(default_config(mt)).layer_specs
    rope, nope = layers[0].attention, layers[3].attention
    assert (rope.qk_norm, rope.attention_chunk, rope.temperature_floor, rope.rope_dims) == ("rms_plain", 8192, 0, 128)
    assert (nope.qk_norm, nope.attention_chunk, nope.rope_dims) == ("none", 0, 0)
    assert (nope.temperature_floor, nope.temperature_scale) == (8192, 0.1)
    how, why = counted(mt)
    assert how == "layers only" and why.startswith("moe_layers: Llama4TextMoe")
    rows = real_layers_agree(mt)
    assert [r["count"] for r in rows] == [10, 16]  # 2 + 8: SO(2) per group and GL(v); a gained norm would give 9
    no_norm = {**default_config(mt), "use_qk_norm": False, "attn_temperature_tuning": False}
    if mt == "llama4":
        no_norm = {**no_norm, "text_config": {**no_norm["text_config"], "use_qk_norm": False}}
    assert model_spec(no_norm).layer_specs[0].attention.qk_norm == "none"


@pytest.mark.parametrize("mt", ["gemma4_text", "gemma4_unified_text"])
def test_gemma4_maps_its_attention_layers_only(mt):
    """Gemma-4: per-head q/k RMSNorm with one gain and a gain-free RMSNorm on every value head, sliding layers
    (RoPE on the whole head) and full ones (their own head size, proportional RoPE on a quarter); the layers that
    reuse other layers' keys and values are left out, attention_k_eq_v is refused."""
    from attnid.hf.coverage import counted, default_config
    from attnid.hf.mapping import REFUSED, model_spec

    assert mt not in REFUSED
    cfg = default_config(mt)
    layers = [x.attention for x in model_spec(cfg).layer_specs]
    sliding, full = layers[0], layers[5]
    assert all(a.v_norm and a.qk_norm == "rms_head" for a in layers) and len(layers) == 30
    assert (sliding.d_head_v, sliding.rope_dims, full.d_head_v, full.rope_dims) == (256, 256, 512, 128)
    assert sliding.sliding_window and not full.sliding_window
    assert counted(mt)[0] == "layers only" and counted(mt)[1].startswith("v_norm: ")
    assert len(model_spec({**cfg, "num_kv_shared_layers": 10}).layer_specs) == 20
    assert "num_kv_shared_layers" in dict(model_spec({**cfg, "num_kv_shared_layers": 10}).not_modelled)
    with pytest.raises(SpecError, match="^attention_k_eq_v:"):
        model_spec({**cfg, "attention_k_eq_v": True})


@pytest.mark.selfcheck
@pytest.mark.parametrize("mt", ["gemma4_text", "gemma4_unified_text"])
def test_gemma4_real_attention_agrees(mt):
    """The real modules (about 35 s each): a sliding layer of heads of 6 (33 = 3 + 2 * 15, weak 8) and a full layer
    of heads of 8 with one rotated plane (63 = 7 + 2 * 28, weak 8); GL(v) would count 2 * 36 and 2 * 64."""
    rows = real_layers_agree(mt)
    assert [(r["count"], r["weak_count"]) for r in rows] == [(33, 8), (63, 8)]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("attention", "unidentified", "weak"),
    [
        ({"rope_dims": 4, "qk_norm": "rms_plain", "attention_chunk": 3}, 157, 8),  # Llama-4's RoPE layers
        ({"rope_dims": 0, "biases": "qkvo", "temperature_floor": 2, "temperature_scale": 0.5}, 245, 0),  # its NoPE ones
    ],
)
def test_own_models_with_chunks_and_temperatures_agree(attention, unidentified, weak):
    """This project's whole model (d 8, two pre-LN RMSNorm blocks, SwiGLU) with Llama-4's attention kinds: the
    whole-model count agrees with the Jacobian of the logits; a gain-free value norm is refused there by name."""
    from attnid.gauge.cases import own_case
    from attnid.model.counting import count_model
    from attnid.model.grid import own_spec

    positions = "rope" if attention["rope_dims"] else "none"
    rms = {"norm": "rmsnorm", "norm_bias": False, "mlp": "swiglu", "positions": positions}
    spec = own_spec({**rms, "attention": attention})
    counts = count_model(spec)
    assert (counts.unidentified, counts.weakly_identified) == (unidentified, weak)
    assert own_case("llama4", spec, other_seed=False, oversample=3.0)["agree"]
    with pytest.raises(SpecError, match="^v_norm:"):
        count_model(own_spec({**rms, "attention": {**attention, "v_norm": True}}))


@pytest.mark.slow
def test_hunyuan_moe_whole_model_is_certified_two_sided():
    """The upper side of HunYuan-MoE's certificate (its Jacobian side is `attnid check`: 196 = 196): the explicit
    generators of `Gauge.for_hf_model` (the gain trades on every dim after RoPE, the norm scales, the experts',
    norms' and stream's rules) have rank = the count at a generic point of the real class, and the logits do not
    move along their span."""
    from gauge_checks import gauge_spans_the_count

    from attnid.hf.check import tiny_config
    from attnid.hf.coverage import default_config

    gauge_spans_the_count(tiny_config(default_config("hunyuan_v1_moe")), 196)


@pytest.mark.slow
def test_own_model_with_the_norm_after_rope_is_certified_two_sided():
    """HunYuan's q/k norm after RoPE in this project's model (d 8, two blocks, biases): generators (a gain trade on
    every dim, the scales) of rank = count = the Jacobian's measure."""
    from attnid.gauge.cases import own_case
    from attnid.model.grid import own_spec

    fields = {"norm": "rmsnorm", "norm_bias": False, "positions": "rope", "mlp": "swiglu", "norm_eps": 1e-5,
              "attention": {"rope_dims": 4, "qk_norm": "rms_head_rotated", "biases": "qkvo"}}  # fmt: skip
    row = own_case("hunyuan", own_spec(fields), other_seed=False, oversample=3.0)
    assert row["agree"] and row["two_sided"] and row["generator_rank"] == row["measured"] == 172, row


def test_a_llama4_without_experts_says_why_it_is_still_counted_by_layers():
    from attnid.hf.coverage import default_config
    from attnid.hf.mapping import model_spec

    spec = model_spec({**default_config("llama4_text"), "moe_layers": []})
    assert [key for key, _ in spec.not_modelled] == ["model_type"]
