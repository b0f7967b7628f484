"""config.json -> ModelSpec (every block's AttentionSpec, norms, MLPs, embeddings), for every mapped model type,
from the stored published configs.

The traps are the point: biases fixed in code (Qwen2 q/k/v only, GPT-2 and Phi all four, Mistral none,
Llama's attention_bias also on o_proj), partial rotary under three keys, legacy Falcon keys, head_dim
differing from d_model / n_heads, and refusal by name of what the counting does not model.
"""

import json

import pytest

from attnid.layer.counting import count
from attnid.hf import STORED, SUPPORTED_MODEL_TYPES, load_config, model_spec, model_type, stored_config
from attnid.model import MLPSpec, MoESpec, count_attention_layers
from attnid.layer.spec import SpecError


def spec_of(name, **overrides):
    return model_spec({**stored_config(name), **overrides}).layer_specs[0].attention


def test_every_stored_config_names_its_source_and_maps():
    assert len(STORED) >= 20
    for name in STORED:
        cfg = stored_config(name)
        assert cfg["_source"].startswith("https://huggingface.co/"), name
        spec = model_spec(cfg)
        assert spec.n_layers == cfg.get("num_hidden_layers", cfg.get("n_layer"))
        assert all(b.attention.causal != (model_type(cfg) == "bert") for b in spec.layer_specs)


@pytest.mark.parametrize(
    ("name", "biases"),
    [
        ("qwen2_7b", "qkv"),  # fixed in code: q/k/v with bias, o_proj without
        ("gpt2", "qkvo"),  # Conv1D c_attn / c_proj always biased
        ("phi2", "qkvo"),
        ("mistral_7b", ""),  # bias=False in code whatever the config says
        ("mixtral_8x7b", ""),
        ("phi3_mini", ""),
        ("gemma_7b", ""),
        ("olmo2_7b", ""),
        ("llama3_8b", ""),
        ("gptj_6b", ""),
        ("pythia_1.4b", "qkvo"),
        ("bert_base", "qkvo"),
        ("bloom_176b", "qkvo"),
        ("gpt_oss_20b", "qkvo"),
    ],
)
def test_biases_fixed_in_code(name, biases):
    assert spec_of(name).biases == biases


def test_class_defaults_where_the_config_is_silent():
    oss = {k: v for k, v in stored_config("gpt_oss_20b").items() if k != "attention_bias"}
    assert model_spec(oss).layer_specs[0].attention.biases == "qkvo"  # GptOssConfig defaults attention_bias to True
    gemma = {k: v for k, v in stored_config("gemma_7b").items() if k != "head_dim"}
    assert model_spec(gemma).layer_specs[0].attention.d_head_qk == 256  # GemmaConfig's default, not 3072 / 16
    olmo = {k: v for k, v in stored_config("olmo2_7b").items() if k != "rms_norm_eps"}
    assert model_spec(olmo).layer_specs[0].attention.norm_eps == 1e-5


def test_attention_bias_also_biases_o_proj_but_not_for_mistral():
    assert spec_of("llama3_8b", attention_bias=True).biases == "qkvo"
    assert spec_of("mistral_7b", attention_bias=True).biases == ""
    assert spec_of("qwen2_7b", attention_bias=False).biases == "qkv"


def test_partial_rotary_under_each_key():
    assert spec_of("pythia_1.4b").rope_dims == 32  # rotary_pct 0.25 of 128
    assert spec_of("phi2").rope_dims == 32  # partial_rotary_factor 0.4 of 80
    assert spec_of("gptj_6b").rope_dims == 64  # rotary_dim
    # GPT-NeoX reads rotary_pct (default 0.25) and ignores a top-level partial_rotary_factor
    neox = {k: v for k, v in stored_config("pythia_1.4b").items() if k != "rotary_pct"}
    assert model_spec({**neox, "partial_rotary_factor": 1.0}).layer_specs[0].attention.rope_dims == 32
    # Phi without the key rotates half the head (the class default)
    phi = {k: v for k, v in stored_config("phi2").items() if k != "partial_rotary_factor"}
    assert model_spec(phi).layer_specs[0].attention.rope_dims == 40
    assert spec_of("llama3_8b").rope_dims == 128


def test_head_dim_differs_from_d_model_over_heads():
    gemma = spec_of("gemma_7b")
    assert (gemma.d_model, gemma.n_heads, gemma.d_head_qk) == (3072, 16, 256)
    assert spec_of("gemma3_27b").d_head_qk == 128 != 5376 // 32
    assert spec_of("qwen3_30b_a3b").d_head_qk == 128 != 2048 // 32


def test_legacy_falcon_keys_are_read():
    falcon7 = spec_of("falcon_7b")  # RefinedWebModel: n_head 71, multi_query
    assert (falcon7.n_heads, falcon7.n_kv_heads, falcon7.rope_dims) == (71, 1, 64)
    falcon40 = model_spec(stored_config("falcon_40b"))  # RefinedWeb: new decoder architecture, n_head_kv 8
    assert (falcon40.attention.n_heads, falcon40.attention.n_kv_heads) == (128, 8)
    assert falcon40.n_layers == 60 and falcon40.parallel and not falcon40.shared_norm  # ln_attn and ln_mlp
    falcon7 = model_spec(stored_config("falcon_7b"))  # RefinedWebModel: one input_layernorm for both branches
    assert falcon7.parallel and falcon7.shared_norm and falcon7.n_params == 6_921_720_704  # FalconForCausalLM
    assert spec_of("falcon_7b", alibi=True).alibi and spec_of("falcon_7b", alibi=True).rope_dims == 0


def test_modern_variants_are_mapped():
    assert spec_of("qwen3_8b").qk_norm == "rms_head"
    assert spec_of("gemma3_27b").qk_norm == "rms_head"
    assert spec_of("olmo2_7b").qk_norm == "rms_all"
    assert spec_of("phi2", qk_layernorm=True).qk_norm == "layernorm_head"
    oss = model_spec(stored_config("gpt_oss_20b"))
    assert oss.layer_specs[0].attention.sinks and oss.layer_specs[0].attention.sliding_window == 128
    assert oss.layer_specs[1].attention.sliding_window == 0  # alternating sliding / full layers
    gemma2 = model_spec(stored_config("gemma2_9b"))
    assert gemma2.layer_specs[0].attention.softcap == 50.0
    assert [b.attention.sliding_window for b in gemma2.layer_specs[:2]] == [4096, 0]
    gemma3 = model_spec(stored_config("gemma3_27b"))
    assert [b.attention.sliding_window > 0 for b in gemma3.layer_specs[:6]] == [True] * 5 + [False]
    assert [b.attention.rope_base for b in gemma3.layer_specs[4:6]] == [
        10000.0,
        1e6,
    ]  # local layers: rope_local_base_freq
    ds = spec_of("deepseek_v3")
    assert (ds.kv_lora_rank, ds.q_lora_rank, ds.d_head_qk, ds.rope_dims, ds.d_head_v) == (512, 1536, 192, 64, 128)
    assert spec_of("bloom_176b").alibi
    assert spec_of("deepseek_v2_lite").q_lora_rank == 0  # q_lora_rank null: a full query projection
    qwen2 = model_spec({**stored_config("qwen2_7b"), "use_sliding_window": True, "max_window_layers": 20})
    assert [b.attention.sliding_window for b in qwen2.layer_specs[19:21]] == [0, 131072]  # from max_window_layers on
    assert spec_of("qwen2_7b").sliding_window == 0  # use_sliding_window false: no window


def test_the_whole_model_of_a_config():
    gpt2 = model_spec(stored_config("gpt2"))
    assert (gpt2.vocab_size, gpt2.positions, gpt2.norm, gpt2.tied, gpt2.norm_position, gpt2.seq_len) == (
        50257, "learned", "layernorm", True, "pre", 1024,
    )  # fmt: skip
    bert = model_spec(stored_config("bert_base"))
    assert bert.norm_position == "post" and bert.token_types == 2 and not bert.final_norm and bert.norm_eps == 1e-12
    assert bert.embedding_norm and bert.mlm_head and bert.lm_head_bias
    assert model_spec(stored_config("bloom_176b")).embedding_norm and not gpt2.embedding_norm
    llama = model_spec(stored_config("llama3_8b"))
    assert (llama.norm, llama.tied, llama.mlp, llama.gemma_gain) == ("rmsnorm", False, "swiglu", False)
    gemma = model_spec(stored_config("gemma_7b"))
    assert gemma.gemma_gain and gemma.tied and gemma.mlp == "geglu"
    assert model_spec(stored_config("gptj_6b")).parallel
    ds = model_spec(stored_config("deepseek_v3")).layer_specs
    assert isinstance(ds[2].mlp, MLPSpec) and isinstance(ds[3].mlp, MoESpec) and ds[3].mlp.n_experts == 256
    assert model_spec(stored_config("mixtral_8x7b")).layer_specs[0].mlp.n_experts == 8


def test_qwen3_moe_dense_blocks_between_routed_ones():
    """Qwen3MoeDecoderLayer: a dense MLP in mlp_only_layers and where (i + 1) % decoder_sparse_step != 0."""
    cfg = stored_config("qwen3_30b_a3b")
    mlps = [b.mlp for b in model_spec({**cfg, "mlp_only_layers": [0], "decoder_sparse_step": 2}).layer_specs]
    assert isinstance(mlps[0], MLPSpec) and isinstance(mlps[1], MoESpec) and isinstance(mlps[2], MLPSpec)
    assert mlps[0].d_ff == cfg["intermediate_size"] and mlps[1].d_expert == cfg["moe_intermediate_size"]


def test_attention_layers_summed_and_the_layers_that_differ(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(stored_config("gpt_oss_20b")))
    spec = model_spec(load_config(path))
    per_layer = count(spec.layer_specs[0].attention)
    summed = count_attention_layers(spec)
    assert summed.total == 24 * per_layer.total
    differ = [i for i, b in enumerate(spec.layer_specs) if b.attention != spec.layer_specs[0].attention]
    assert differ == list(range(1, 24, 2))  # the full-attention layers differ in spec (no window)
    assert summed.unidentified == sum(count(b.attention).unidentified for b in spec.layer_specs)


def test_refused_by_name():
    with pytest.raises(SpecError, match="^model_type:"):
        model_spec({"model_type": "t5"})
    with pytest.raises(SpecError, match="^rope_scaling.rope_type:"):
        model_spec({**stored_config("llama3_8b"), "rope_scaling": {"rope_type": "mrope"}})
    with pytest.raises(SpecError, match="^position_embedding_type:"):
        model_spec({**stored_config("bert_base"), "position_embedding_type": "relative_key"})
    with pytest.raises(SpecError, match="^add_cross_attention:"):
        model_spec({**stored_config("gpt2"), "add_cross_attention": True})
    with pytest.raises(SpecError, match="^hidden_size:"):
        model_spec({"model_type": "llama", "num_attention_heads": 4})
    with pytest.raises(SpecError, match="^layer_types:"):
        model_spec({**stored_config("gpt_oss_20b"), "layer_types": ["chunked_attention"] * 24})


def test_every_supported_model_type_has_a_stored_config_or_maps_its_class_defaults():
    """A type without a published config here maps the default config of its `transformers` class (what
    `attnid check --model-type` measures)."""
    stored_types = {stored_config(n)["model_type"] for n in STORED}
    # Falcon is stored with its legacy keys; its modern keys are checked below.
    missing = set(SUPPORTED_MODEL_TYPES) - stored_types - {"falcon"}
    if missing:
        pytest.importorskip("transformers")
        from attnid.hf.coverage import default_config  # the class defaults, completed where the class needs it

        for mt in sorted(missing):
            spec = model_spec(default_config(mt))
            assert spec.n_layers >= 1, mt


def test_legacy_and_modern_falcon_keys_map_alike():
    from attnid.hf.mapping import class_config

    for name in ("falcon_7b", "falcon_40b"):
        legacy = stored_config(name)
        modern = class_config(legacy)
        assert modern["model_type"] == "falcon" and "n_head" not in modern
        assert model_spec(modern) == model_spec(legacy)
