"""config.json -> ModelSpec for the GPT-style decoders and the mixtures of experts mapped from their class
defaults (the `transformers` config class of each type, as `attnid check --model-type` builds it): the facts
each class fixes in code, and the refusals. The self-check (`attnid check --model-type TYPE`) measures every one
of them against the Jacobian; these tests pin what the mapping reads."""

import math

import pytest

from attnid.hf.coverage import default_config
from attnid.hf.mapping import REFUSED, SUPPORTED_MODEL_TYPES, model_spec
from attnid.model import MLPSpec, MoESpec
from attnid.model.counting import count_attention_layers, count_model
from attnid.layer.spec import SpecError

# types mapped here whose published config.json is not stored (no network when they were mapped): each is
# checked through its class defaults below and by the self-check
CLASS_DEFAULT_TYPES = (
    "gpt-sw3", "gpt_bigcode", "gpt_neo", "openai-gpt", "codegen", "gpt_neox_japanese", "biogpt", "xglm", "ctrl",
    "mpt", "dbrx", "qwen2_moe", "olmoe", "flex_olmo", "granitemoe", "granitemoeshared", "granitemoe_swa",
    "ernie4_5_moe", "glm4_moe", "glm4_moe_lite", "sarvam_moe", "solar_open", "dots1", "exaone_moe", "minimax_m2",
    "mimo_v2_flash", "phimoe", "flint",
)  # fmt: skip


def spec_of(mt, **overrides):
    return model_spec({**default_config(mt), **overrides})


def test_every_type_maps_and_counts_its_attention():
    for mt in CLASS_DEFAULT_TYPES:
        assert mt in SUPPORTED_MODEL_TYPES
        spec = spec_of(mt)
        assert count_attention_layers(spec).unidentified > 0, mt


def test_gpt_style_facts():
    bigcode = spec_of("gpt_bigcode")
    assert bigcode.attention.n_kv_heads == 1 and bigcode.attention.biases == "qkvo"
    assert spec_of("gpt_bigcode", multi_query=False).attention.n_kv_heads == 12
    neo = spec_of("gpt_neo")  # [[global, local], 12]: local layers see their last window_size keys
    assert [x.attention.sliding_window for x in neo.layer_specs[:4]] == [0, 256, 0, 256]
    assert neo.attention.biases == "o"
    with pytest.raises(SpecError, match="^attention_types:"):
        spec_of("gpt_neo", num_layers=4)
    gpt1 = spec_of("openai-gpt")
    assert (gpt1.norm_position, gpt1.final_norm, gpt1.d_ff, gpt1.tied) == ("post", False, 4 * 768, True)
    codegen = spec_of("codegen")
    assert (codegen.attention.rope_dims, codegen.shared_norm, codegen.lm_head_bias) == (64, True, True)
    japanese = spec_of("gpt_neox_japanese")
    assert [x.attention.biases for x in japanese.layer_specs[-2:]] == ["", "o"]  # the last layer's dense bias
    assert not japanese.parallel and not japanese.layer_specs[0].mlp.bias
    mpt = spec_of("mpt", no_bias=False, expansion_ratio=8)  # the class reads neither
    assert (mpt.attention.biases, mpt.attention.alibi, mpt.norm_bias, mpt.d_ff) == ("", True, False, 4 * 2048)
    biogpt = spec_of("biogpt", layer_norm_eps=1e-12)  # nn.LayerNorm's default eps, whatever the config says
    assert (biogpt.norm_eps, biogpt.embed_scale, biogpt.max_positions - biogpt.seq_len) == (1e-5, math.sqrt(1024), 2)
    for mt in ("xglm", "ctrl"):
        spec = spec_of(mt)
        assert spec.positions == "sinusoidal" and spec.embed_scale == math.sqrt(spec.d_model)
        with pytest.raises(SpecError, match="^positions:"):
            count_model(spec)


def test_mixture_facts():
    qwen = spec_of("qwen2_moe", decoder_sparse_step=2, mlp_only_layers=[3])
    kinds = [type(x.mlp) for x in qwen.layer_specs[:6]]
    assert kinds == [MLPSpec, MoESpec, MLPSpec, MLPSpec, MLPSpec, MoESpec]
    moe = qwen.layer_specs[1].mlp
    assert (moe.shared_expert_gate, moe.d_shared, moe.norm_topk_prob) == (True, 5632, False)
    assert qwen.attention.biases == "qkv"
    ernie = spec_of("ernie4_5_moe")
    assert isinstance(ernie.layer_specs[0].mlp, MLPSpec) and ernie.layer_specs[-1].mlp.selection_bias
    assert count_model(ernie).breakdown["moe_selection_bias"] == 27 * 64
    glm = spec_of("glm4_moe", head_dim=2, partial_rotary_factor=0.5)  # int(2 * 0.5) = 1 dim: one plane, both dims
    assert glm.attention.rope_dims == 2 and glm.layer_specs[1].mlp.scoring == "sigmoid"
    dbrx = spec_of("dbrx", ffn_config={"moe_num_experts": 16, "moe_top_k": 4, "moe_normalize_expert_weights": 2})
    moe = dbrx.layer_specs[0].mlp
    assert (dbrx.norm, dbrx.norm_bias, moe.n_experts, moe.top_k, moe.topk_norm) == ("layernorm", False, 16, 4, 2.0)
    phimoe = spec_of("phimoe")
    assert (phimoe.norm, phimoe.norm_bias) == ("layernorm", True)
    assert [key for key, _ in phimoe.not_modelled] == ["router_jitter_noise"]
    exaone = spec_of("exaone_moe")  # global layers without RoPE while sliding_window is set
    assert [x.attention.rope_dims for x in exaone.layer_specs[:4]] == [128, 128, 128, 0]
    mimo = spec_of("mimo_v2_flash")
    full, sliding = mimo.layer_specs[0].attention, mimo.layer_specs[1].attention
    assert (full.n_kv_heads, full.sinks, sliding.n_kv_heads, sliding.sinks) == (4, False, 8, True)
    assert (sliding.d_head_qk, sliding.d_head_v, sliding.rope_dims, sliding.sliding_window) == (192, 128, 64, 129)
    swa = spec_of("granitemoe_swa", layer_rope_theta=[0.0] + [10000.0] * 31)
    assert swa.layer_specs[0].attention.rope_dims == 0 and all(x.attention.sinks for x in swa.layer_specs)
    assert [key for key, _ in spec_of("flex_olmo").not_modelled] == ["model_type"]
    flint = spec_of("flint")  # RoPE on the sliding layers only, sinks everywhere, the first two blocks dense
    assert [(x.attention.rope_dims, x.attention.sinks) for x in flint.layer_specs[1:3]] == [(0, True), (128, True)]
    assert [type(x.mlp) for x in flint.layer_specs[1:3]] == [MLPSpec, MoESpec]


@pytest.mark.parametrize("mt", sorted(REFUSED))
def test_refused_types_say_why(mt):
    with pytest.raises(SpecError, match=f"^model_type: '{mt}' is not mapped: "):
        model_spec({"model_type": mt})
