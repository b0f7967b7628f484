"""Mixture-of-experts MLPs in the whole-model count (attnid.model.MoESpec, attnid.model.counting.mlp): the count against the Jacobian judge on
our own function and on real transformers classes, the shipped MoE configs, and the refusals by name."""

import pytest

from attnid.gauge.cases import own_case
from attnid.hf import model_spec, stored_config
from attnid.hf.config_tables import shipped_row
from attnid.model import MoESpec
from attnid.model.counting import count_attention_layers, count_model
from attnid.model.grid import own_spec
from attnid.layer.spec import SpecError

# one RMSNorm block of width 8 (2 heads), vocab 12, no positions: the MoE terms are what varies
BLOCK = {"norm": "rmsnorm", "norm_bias": False, "mlp": "swiglu", "positions": "none", "n_layers": 1}

SHAPES = {
    # name: (MoESpec fields, other ModelSpec fields, expected moe_router)
    "mixtral_k2_norm": ({"n_experts": 4, "top_k": 2, "d_expert": 4, "norm_topk_prob": True}, {}, 8),
    "qwen_no_norm_two_layers": ({"n_experts": 4, "top_k": 2, "d_expert": 2}, {"n_layers": 2}, 16),
    "k1_renormalised_router_free": ({"n_experts": 4, "top_k": 1, "d_expert": 4, "norm_topk_prob": True}, {}, 32),
    "router_bias_E3_d6": (
        {"n_experts": 3, "top_k": 2, "d_expert": 4, "norm_topk_prob": True, "router_bias": True},
        {"attention": {"d_model": 6}},
        7,
    ),
    "gpt_oss_experts": (
        {
            "n_experts": 4,
            "top_k": 2,
            "d_expert": 4,
            "scoring": "topk_softmax",
            "router_bias": True,
            "expert_bias": True,
            "activation": "gpt_oss",
        },
        {},
        9,
    ),
    "sigmoid_groups_shared": (
        {
            "n_experts": 4,
            "top_k": 2,
            "d_expert": 4,
            "scoring": "sigmoid",
            "norm_topk_prob": True,
            "n_group": 2,
            "topk_group": 1,
            "n_shared": 1,
            "routed_scaling_factor": 2.5,
        },
        {},
        0,
    ),
    "topk_softmax_one_group_each": (
        {"n_experts": 4, "top_k": 2, "d_expert": 4, "scoring": "topk_softmax", "n_group": 2, "topk_group": 1},
        {},
        16,
    ),
    # Qwen2-MoE: a shared expert 6 wide behind its own sigmoid gate (a reader of width 1, no new symmetry)
    "shared_expert_gate": (
        {"n_experts": 4, "top_k": 2, "d_expert": 4, "n_shared": 1, "shared_width": 6, "shared_expert_gate": True},
        {},
        8,
    ),
    # Ernie-4.5: a selection bias parameter (4 free), renormalised
    "selection_bias": ({"n_experts": 4, "top_k": 2, "d_expert": 4, "norm_topk_prob": True, "selection_bias": True}, {}, 8),
    # DBRX: LayerNorm without bias, chosen weights divided by their 2-norm: the shift of the centred rows (d - 1)
    "layernorm_no_beta_p2": (
        {"n_experts": 4, "top_k": 2, "d_expert": 4, "norm_topk_prob": True, "topk_norm": 2.0},
        {"norm": "layernorm", "norm_bias": False},
        7,
    ),
    # LayerNorm with beta, no router bias: the shift along 1/g is free too (d, not d - 1)
    "layernorm_beta_pins_the_shift": ({"n_experts": 4, "top_k": 2, "d_expert": 4}, {"norm": "layernorm", "norm_bias": True}, 8),
    "layernorm_beta_k1_router_free": (
        {"n_experts": 4, "top_k": 1, "d_expert": 4, "norm_topk_prob": True},
        {"norm": "layernorm", "norm_bias": True},
        32,
    ),
    "layernorm_beta_router_bias_shared": (
        {"n_experts": 4, "top_k": 2, "d_expert": 4, "norm_topk_prob": True, "router_bias": True, "n_shared": 1},
        {"norm": "layernorm", "norm_bias": True},
        8,
    ),
}


def _spec(name):
    moe, fields, _ = SHAPES[name]
    return own_spec({**BLOCK, **fields, "moe": moe})


@pytest.mark.parametrize("name", list(SHAPES))
def test_count_agrees_with_the_judge(name):
    spec = _spec(name)
    counts = count_model(spec)
    assert counts.breakdown.get("moe_router", 0) == SHAPES[name][2]
    row = own_case(name, spec, other_seed=False)
    assert row["measured"] == row["count"] == counts.unidentified, row
    assert row["measured_half"] == row["measured"], row
    assert row["gap"] > 6, row  # decades between the kept and the dropped singular values
    assert row["expert_min_positions"] >= row["expert_need"] > 0, row  # every expert routed enough positions
    assert row["agree"], row


@pytest.mark.parametrize("name", ["mixtral_moe", "qwen3_moe", "gpt_oss_moe"])
def test_real_classes_agree(name):
    from attnid.gauge.cases import real_case

    row = real_case(name, other_seed=False)
    assert row["agree"], row
    assert row["count"] > 0 and row["gap"] > 6, row


# published totals (billions) and the MoE terms: router d (softmax family, +1 with a router bias) per MoE block
# (0 for sigmoid with top-8), hidden units E m (+ shared) per MoE block
SHIPPED = {
    "mixtral_8x7b": (46.7, 32 * 4096, 32 * 8 * 14336),
    "qwen3_30b_a3b": (30.5, 48 * 2048, 48 * 128 * 768),
    "gpt_oss_20b": (20.9, 24 * 2881, 24 * 32 * 2880),
    "deepseek_v2_lite": (15.7, 26 * 2048, 26 * (64 + 2) * 1408),
    "deepseek_v3": (671.0, 0, 58 * (256 + 1) * 2048),
}


@pytest.mark.parametrize("name", list(SHIPPED))
def test_shipped_moe_configs_count(name):
    row = shipped_row(name)
    assert row["status"] == "ok", row["status"]
    total, router, hidden = SHIPPED[name]
    assert abs(row["P"] / 1e9 - total) < 0.05 * total
    assert row.get("src_moe_router", 0) == router
    assert row["src_moe_hidden_units"] == hidden
    assert 0 < row["unidentified"] < row["P"]


def test_config_keys_reach_the_spec():
    cfg = stored_config("deepseek_v3")
    moe = model_spec(cfg, seq_len=16).layer_specs[-1].mlp
    assert (moe.scoring, moe.n_group, moe.topk_group, moe.norm_topk_prob) == ("sigmoid", 8, 4, True)
    assert moe.routed_scaling_factor == 2.5 and moe.n_shared == 1
    oss = model_spec(stored_config("gpt_oss_20b"), seq_len=16).layer_specs[0].mlp
    assert (oss.scoring, oss.router_bias, oss.expert_bias, oss.activation) == ("topk_softmax", True, True, "gpt_oss")
    qwen = model_spec({**stored_config("qwen3_30b_a3b"), "norm_topk_prob": True}, seq_len=16).layer_specs[0].mlp
    assert qwen.norm_topk_prob and qwen.n_experts == 128 and qwen.top_k == 8


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"n_experts": 4, "top_k": 5, "d_expert": 2}, "moe.top_k"),
        ({"n_experts": 4, "top_k": 2, "d_expert": 0}, "moe.d_expert"),
        ({"n_experts": 4, "top_k": 2, "d_expert": 2, "scoring": "relu"}, "moe.scoring"),
        ({"n_experts": 6, "top_k": 2, "d_expert": 2, "n_group": 4}, "moe.n_group"),
        ({"n_experts": 4, "top_k": 2, "d_expert": 2, "n_group": 2, "topk_group": 3}, "moe.topk_group"),
        ({"n_experts": 4, "top_k": 2, "d_expert": 2, "capacity": 2}, "moe.capacity"),
        ({"n_experts": 4, "top_k": 2, "d_expert": 2, "shared_expert_gate": True}, "moe.n_shared"),
        ({"n_experts": 4, "top_k": 2, "d_expert": 2, "topk_norm": 0.5}, "moe.topk_norm"),
    ],
)
def test_bad_moe_fields_are_refused_by_name(fields, field):
    with pytest.raises(SpecError) as err:
        MoESpec.from_config(fields)
    assert err.value.field == field


def test_unmodelled_settings_are_refused_by_name():
    moe = {"n_experts": 4, "top_k": 2, "d_expert": 2}
    with pytest.raises(SpecError) as err:
        count_model(own_spec({"moe": {**moe, "expert_bias": True}}))  # expert biases behind a LayerNorm
    assert err.value.field == "moe"
    with pytest.raises(SpecError) as err:
        count_model(own_spec({**BLOCK, "parallel": True, "moe": moe}))
    assert err.value.field == "moe"
    # what the class ignores or the count does not model: the attention layers are counted, the model refused
    for name, key, value in (
        ("deepseek_v2_lite", "norm_topk_prob", True),
        ("deepseek_v3", "scoring_func", "softmax"),
        ("mixtral_8x7b", "hidden_act", "gelu"),
    ):
        spec = model_spec({**stored_config(name), key: value}, seq_len=16)
        assert count_attention_layers(spec).unidentified > 0
        with pytest.raises(SpecError) as err:
            count_model(spec)
        assert err.value.field == key


@pytest.mark.parametrize("name", ["mixtral_moe", "qwen3_moe", "gpt_oss_moe", "deepseek_v3_moe"])
def test_real_routers_run_in_float64(name):
    """The routers' float32 casts (softmax(dtype=float), .float(), .type(float32)) become float64 ones."""
    import torch

    from attnid.model.forward import expert_loads
    from attnid.model.real import build_real

    model = build_real(name)
    dtypes = []
    for sub in model.module.modules():
        if type(sub).__name__.lower().endswith("router"):
            sub.register_forward_hook(lambda module, args, out: dtypes.extend(t.dtype for t in out[:2]))
    with expert_loads() as loads:
        model.forward(model.theta, torch.arange(6) % 16)
    assert dtypes and set(dtypes) == {torch.float64}
    assert loads and all(int(x.sum()) == 6 * model.module.config.num_experts_per_tok for x in loads)


def test_a_real_class_without_a_name_map_gets_a_one_sided_certificate_row(monkeypatch):
    """A class whose parameter names have no map gets the Jacobian's side only (the row says why) instead of
    stopping the whole-model grid; DeepSeek's routed experts have their map and a two-sided row."""
    from attnid.errors import SpecError
    from attnid.gauge import certificate, name_map
    from attnid.gauge.cases import tiny_spec

    def unmapped(spec, cfg):
        raise SpecError("model_type", f"{cfg['model_type']!r}: no name map between its class and the layout is written")

    monkeypatch.setattr(name_map, "name_map", unmapped)
    row = certificate.real_certificate("deepseek_v3_moe", tiny_spec("deepseek_v3_moe"), None, None, 1.0)
    assert row["two_sided"] is False and row["generators_agree"] is None
    assert row["generators_note"].startswith("not written: model_type:")
