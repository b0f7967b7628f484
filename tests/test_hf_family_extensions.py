"""Model types mapped by extending the family of their closest relative: what each mapping reads from its class
defaults (Aria's, Mellum's, HY-V3's and Kolibri-1's mixtures; A.X-K1 and LongCat-Flash's
latent attention; Cohere-2-MoE; Moshi's text decoder; HRM-Text; Gemma-3n's text model; GIT's decoder; XLM), how much of
each is counted, and the real attention modules of one type of each new kind agreeing with the count (the full
self-check of every type runs under `pytest -m selfcheck`, tests/test_hf_selfcheck.py)."""

import pytest
import torch
from gauge_checks import gauge_spans_the_count

from attnid.errors import SpecError
from attnid.hf.check import check_config
from attnid.hf.coverage import counted, default_config
from attnid.hf.mapping import model_spec
from attnid.hf.tiny import tiny_config
from attnid.model import MLPSpec, MoESpec
from attnid.model.counting import count_model
from attnid.model.real import SEQ_LEN

WHOLE = ("aria_text", "mellum", "hy_v3", "kolibri1")
LAYERS_ONLY = {
    "axk1": "post_mlp_layernorm", "longcat_flash": "num_layers",
    "moshi": "vocab_size", "hrm_text": "H_cycles", "gemma3n_text": "v_norm", "git": "vision_config",
    "cohere2_moe": "moe", "xlm": "pad_token_id",
}  # fmt: skip
# one type of each new kind, its attention layers measured by default: latent-attention sublayers found by their
# class (LongcatFlashMLA), two stacks with an element gate, RoPE computed inside the module, a gain-free value norm
DEFAULT_RUN = ("longcat_flash", "hrm_text", "moshi", "gemma3n_text")


def spec_of(mt, **overrides):
    return model_spec({**default_config(mt), **overrides})


@pytest.mark.parametrize("mt", WHOLE + tuple(LAYERS_ONLY))
def test_how_much_of_each_type_is_counted(mt):
    how, why = counted(mt)
    assert how == ("whole model" if mt in WHOLE else "layers only"), why
    if mt in LAYERS_ONLY:
        assert why.startswith(f"{LAYERS_ONLY[mt]}:"), why


def test_the_mixtures_read_their_routers():
    aria = spec_of("aria_text").layer_specs[0].mlp
    assert (aria.scoring, aria.d_expert, aria.d_shared) == ("topk_softmax", 4096, 2 * 4096)
    mellum = spec_of("mellum", layer_types=["sliding_attention", "full_attention"] * 14)
    sliding, full = mellum.layer_specs[0].attention, mellum.layer_specs[1].attention
    assert (sliding.sliding_window, sliding.rope_base, full.sliding_window, full.rope_base) == (1024, 1e4, 0, 5e5)
    assert mellum.layer_specs[0].mlp.norm_topk_prob and sliding.qk_norm == "rms_head"
    hy = spec_of("hy_v3")
    assert isinstance(hy.layer_specs[0].mlp, MLPSpec) and isinstance(hy.layer_specs[1].mlp, MoESpec)
    moe = hy.layer_specs[1].mlp
    assert (moe.scoring, moe.norm_topk_prob, moe.routed_scaling_factor, moe.n_shared) == ("sigmoid", True, 2.826, 1)
    kolibri = spec_of("kolibri1")  # EXAONE-4's global NoPE layers in GLM-4's sandwich-norm blocks
    assert [x.attention.rope_dims for x in kolibri.layer_specs[3:6]] == [128, 0, 128] and kolibri.output_norms
    assert kolibri.layer_specs[0].mlp.d_shared == 512 and not kolibri.layer_specs[0].mlp.norm_topk_prob
    cohere = spec_of("cohere2_moe", mlp_layer_types=["dense"] + ["sparse"] * 39)
    assert [x.attention.rope_dims for x in cohere.layer_specs[:4]] == [128, 128, 128, 0]
    assert cohere.layer_specs[3].mlp.scoring == "topk_softmax" and cohere.norm == "layernorm"
    assert spec_of("cohere2_moe", rms_norm_eps=1e-6).norm == "rmsnorm"


def test_the_latent_and_dense_relatives():
    axk1 = spec_of("axk1")
    assert isinstance(axk1.layer_specs[0].mlp, MLPSpec) and axk1.layer_specs[1].mlp.n_group == 8
    assert axk1.attention.q_lora_rank == 1536
    with pytest.raises(SpecError, match="^q_lora_rank:"):
        spec_of("axk1", q_lora_rank=None)
    longcat = spec_of("longcat_flash")
    assert longcat.n_layers == 2 * 28 and longcat.attention.kv_lora_rank == 512
    moshi = spec_of("moshi")
    assert (moshi.attention.biases, moshi.attention.sliding_window, moshi.d_ff, moshi.norm_eps) == ("", 0, 11264, 1e-8)
    hrm = spec_of("hrm_text")
    assert hrm.n_layers == 2 * 16 and hrm.attention.output_gate == "element" and hrm.attention.n_kv_heads == 12
    with pytest.raises(SpecError, match="^attention_bias:"):
        spec_of("hrm_text", attention_bias=True)
    gemma3n = spec_of("gemma3n_text")  # the last 15 of 35 layers read other layers' keys and values
    assert gemma3n.n_layers == 20 and gemma3n.attention.v_norm
    git = spec_of("git")
    assert git.attention.causal and git.attention.biases == "qkvo" and git.token_types == 0
    xlm = spec_of("xlm")  # emb_dim, n_heads, n_layers; an MLP of 4 d
    assert (xlm.d_model, xlm.attention.n_heads, xlm.n_layers, xlm.d_ff, xlm.attention.causal) == (2048, 16, 12, 8192, False)
    assert spec_of("xlm", causal=True).attention.causal
    assert "n_langs" in dict(spec_of("xlm", n_langs=2).not_modelled)


@pytest.mark.parametrize("mt", WHOLE)
def test_the_gauge_of_each_whole_model_spans_its_count(mt):
    """The upper side of the whole-model certificate (the self-check measures the lower): Gauge.for_hf_model's explicit
    generators on the tiny class have rank = the count (Aria: 212, Mellum: 266, HY-V3: 254, Kolibri-1: 233 measured)."""
    tiny = tiny_config(default_config(mt))
    gauge_spans_the_count(tiny, count_model(model_spec(tiny, seq_len=SEQ_LEN)).unidentified)


@pytest.mark.slow
@pytest.mark.parametrize("mt", DEFAULT_RUN)
def test_the_real_attention_modules_agree_with_the_count(mt):
    torch.set_num_threads(1)
    rows = check_config(default_config(mt), whole=False)
    assert rows
    for row in rows:
        assert row["verdict"] == "agree" and row["measured"] == row["count"] and row["P"] == row["P_spec"], row


@pytest.mark.parametrize("mt", ["glm", "glm4"])
def test_glm_gauges_span_their_counts(mt):
    """GLM's and GLM-4's fused gate_up_proj rows [gate; up] and GLM-4's four block norms in the name map: the whole
    model's explicit generators span exactly its count (before, the name map had no place for gate_up_proj)."""
    tiny = tiny_config(default_config(mt))
    gauge_spans_the_count(tiny, count_model(model_spec(tiny, seq_len=SEQ_LEN)).unidentified)
