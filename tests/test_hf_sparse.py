"""DeepSeek sparse attention (attnid.hf.mapping.sparse: DeepSeek-V3.2, GLM-MoE-DSA, HY-V4, A.X-K2), the latent-attention
hybrids (attnid.hf.mapping.latent_hybrid: Kimi-Linear, Bailing-hybrid), Dots3-Note (attnid.hf.mapping.dots) and
MiniMax-M3's text model (its block indexer on
GQA attention, attnid.hf.mapping.minimax_m3): each maps its class defaults layers only, its
indexer's layers (own or shared) and kinds as the config classes derive them; on the real module the indexer's
parameter columns of the Jacobian are exactly zero and the layer measures its count. The default run self-checks one
type of each new variant; GLM's shared layer and a top-k shorter than the sequence run under `pytest -m selfcheck`."""

import pytest
import torch

from attnid.errors import SpecError
from attnid.hf.check import attention_modules, check_config, layer_function, real_class, tiny_config
from attnid.hf.coverage import counted, default_config
from attnid.hf.mapping import MAPPERS, REFUSED, model_spec
from attnid.hf.mapping.latent_hybrid import layer_kinds
from attnid.hf.mapping.sparse import indexer_kinds
from attnid.hf.refusals import REASONS
from attnid.jacobian import input_sizing
from attnid.model.counting import count_model
from attnid.model.real import SEQ_LEN, build_real_model

SPARSE = ("deepseek_v32", "glm_moe_dsa", "hy_v4", "axk2", "minimax_m3_vl_text", "dots3_note_text", "dots3_note")
LATENT_HYBRIDS = ("kimi_linear", "bailing_hybrid")


def spec_of(mt, **overrides):
    return model_spec({**default_config(mt), **overrides})


@pytest.mark.parametrize("mt", SPARSE + LATENT_HYBRIDS)
def test_each_type_maps_its_layers_only(mt):
    assert mt in MAPPERS and mt not in REFUSED and mt not in REASONS
    spec = spec_of(mt)
    with pytest.raises(SpecError, match=f"^{spec.not_modelled[0][0]}:"):
        count_model(spec)
    assert counted(mt)[0] == "layers only"
    assert all(x.attention.kv_lora_rank for x in spec.layer_specs) == (mt != "minimax_m3_vl_text")


def test_the_indexer_layers_follow_each_config_class():
    assert {x.attention.index_heads for x in spec_of("deepseek_v32").layer_specs} == {64}
    assert spec_of("deepseek_v32").attention.index_topk == 2048
    assert indexer_kinds({"index_topk_pattern": "FSSF"}, "glm_moe_dsa", 4) == ["full", "shared", "shared", "full"]
    assert indexer_kinds({"index_topk_freq": 2}, "glm_moe_dsa", 5) == ["full", "full", "shared", "full", "shared"]
    assert indexer_kinds({}, "hy_v4", 6) == ["full", "full", "shared", "shared", "shared", "full"]
    hy = spec_of("hy_v4").layer_specs  # a shared layer keeps the top-k mask of the full one before it, no indexer
    assert [x.attention.index_heads for x in hy[:3]] == [16, 16, 0] and hy[2].attention.index_topk == 2048
    assert (hy[0].attention.output_gate, hy[0].attention.sinks) == ("element", True)
    axk2 = spec_of("axk2").attention
    assert (axk2.raw_latent_query, axk2.output_gate, axk2.index_heads) == (True, "element", 16)
    with pytest.raises(SpecError, match="^biases:"):  # q_a_proj, kv_a_proj_with_mqa and o_proj biased
        spec_of("deepseek_v32", attention_bias=True)
    with pytest.raises(SpecError, match="^indexer_types:"):
        spec_of("glm_moe_dsa", indexer_types=["shared"] * 78)


def test_the_latent_hybrids_map_their_latent_layers():
    kimi = spec_of("kimi_linear")
    assert kimi.n_layers == 6 and kimi.attention.shared_key_dims == 64 and kimi.attention.rope_dims == 0
    legacy = {**default_config("kimi_linear"), "layer_types": None,
              "linear_attn_config": {"full_attn_layers": [4, 8], "kda_layers": [1, 2, 3, 5, 6, 7]}}  # fmt: skip
    assert layer_kinds({**legacy, "num_hidden_layers": 8}, "kimi_linear")[3] == "full_attention"
    bailing = spec_of("bailing_hybrid")
    assert bailing.n_layers == 7 and bailing.attention.output_gate == "head"
    assert (bailing.attention.rope_dims, bailing.attention.rope_base) == (64, 6e6)
    with pytest.raises(SpecError, match="^attention_bias:"):
        spec_of("kimi_linear", attention_bias=True)


def test_minimax_m3_maps_its_full_and_sparse_layers():
    spec = spec_of("minimax_m3_vl_text")  # every layer full by default; rotary_dim does not reach the rotary class
    assert spec.n_layers == 60 and (spec.attention.rope_dims, spec.attention.qk_norm) == (128, "rms_head")
    half = {"rope_theta": 5e6, "partial_rotary_factor": 0.5}
    assert spec_of("minimax_m3_vl_text", rope_parameters=half).attention.rope_dims == 64
    freq = {"sparse_attention_freq": [0, 1] * 30}
    legacy = spec_of("minimax_m3_vl_text", layer_types=None, sparse_attention_config=freq)
    sparse = legacy.layer_specs[1].attention
    assert (sparse.index_topk, sparse.index_heads, sparse.index_head_dim) == (128 * 16, 4, 128)
    assert legacy.layer_specs[0].attention.index_heads == 0
    with pytest.raises(SpecError, match="^mlp_layer_types:"):
        count_model(legacy)


def test_dots3_note_maps_its_indexed_and_sliding_layers():
    spec = spec_of("dots3_note_text")
    kinds = {(x.attention.sliding_window, x.attention.index_heads, x.attention.n_heads) for x in spec.layer_specs}
    assert kinds == {(0, 64, 128), (512, 0, 64)}  # per_layer_config: the sliding layers' own sizes
    assert all(x.attention.shared_key_norm and x.attention.output_gate == "head" for x in spec.layer_specs)
    legacy = {**default_config("dots3_note_text"), "per_layer_config": None, "layer_types": None}
    legacy = {k: v for k, v in legacy.items() if v is not None}
    same = model_spec({**legacy, "swa_num_attention_heads": 32}).layer_specs  # swa_* keys, the class's pattern
    assert [x.attention.n_heads for x in same[:6]] == [128, 128, 32, 32, 32, 128]
    assert model_spec(default_config("dots3_note")).layer_specs == spec.layer_specs  # its causal LM: the text model


def _indexer_columns(cfg: dict) -> tuple[torch.Tensor, list[bool]]:
    """The real tiny model's first attention layer: its Jacobian (B T d, P) and which columns are the indexer's."""
    tiny = tiny_config(cfg)
    spec = model_spec(tiny, seq_len=SEQ_LEN).layer_specs[0].attention
    real = build_real_model(real_class(tiny), tiny, seed=0)
    f, theta, x, _ = layer_function(real, 0, spec, input_sizing(spec, 1.0), seed=0)
    names = [name for name, p in attention_modules(real.module)[0][1].named_parameters() for _ in range(p.numel())]
    J = torch.func.jacrev(lambda th: f(th, x).reshape(-1))(theta)
    return J, [name.startswith("indexer.") for name in names]


def test_the_real_indexer_moves_no_output_and_the_layer_measures_its_count():
    torch.set_num_threads(1)
    J, indexer = _indexer_columns(default_config("deepseek_v32"))
    columns = torch.tensor(indexer)
    assert columns.sum() == 2 * 6 * 4 + 8 * 4 + 2 * 4 + 8 * 2  # wq_b, wk, k_norm, weights_proj at the tiny size
    assert torch.count_nonzero(J[:, columns]) == 0 and J[:, ~columns].abs().amax(0).min() > 0
    rows = check_config(default_config("deepseek_v32"), whole=False)
    assert [(r["count"], r["measured"], r["verdict"]) for r in rows] == [(201, 201, "agree")], rows


@pytest.mark.parametrize("mt", ["hy_v4", "axk2", "dots3_note_text", "kimi_linear", "bailing_hybrid"])  # a new variant
def test_each_latent_variant_agrees_on_its_real_module(mt):
    """HY-V4: an element gate and sinks beside the latents, a shared layer; A.X-K2: the query and its gate reading
    the normed and the raw query latent; Dots3-Note: a normed shared key, sliding layers of their own sizes; Kimi: the
    unrotated shared key;
    Bailing: a gate per head (a few seconds each)."""
    _assert_agrees(default_config(mt))


@pytest.mark.selfcheck  # about 20 s: both layers (the full one is the default config's, in test_hf_selfcheck)
def test_minimax_m3s_sparse_layer_agrees_on_its_real_module():
    """Its block indexer keeps every key of the check's sequences (top 16 blocks of 2 keys at the tiny size)."""
    kinds = ["minimax_m3_sparse", "full_attention"] * 30
    _assert_agrees({**default_config("minimax_m3_vl_text"), "layer_types": kinds})


@pytest.mark.selfcheck  # a few seconds each
@pytest.mark.parametrize(
    "overrides", [{"indexer_types": ["full"] + ["shared"] * 77}, {"index_topk": 3}], ids=["glm_shared", "dsv32_top3"]
)
def test_a_shared_selection_and_a_short_top_k_agree(overrides):
    """GLM-MoE-DSA's shared layer (the previous layer's top-k, no indexer); DeepSeek-V3.2 with index_topk 3 on the
    check's 9 positions, where the indexer masks keys: the count is measured there too (observed at this size; the
    count claims T <= index_topk only)."""
    _assert_agrees({**default_config("glm_moe_dsa" if "indexer_types" in overrides else "deepseek_v32"), **overrides})


def _assert_agrees(cfg: dict) -> None:
    torch.set_num_threads(1)
    for row in check_config(cfg, whole=False):
        assert row["verdict"] == "agree" and row["measured"] == row["count"] and row["P"] == row["P_spec"], row
