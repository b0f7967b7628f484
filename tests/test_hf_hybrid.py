"""Hybrid decoders (attnid.hf.mapping.hybrid): every mapped type maps its class defaults to its softmax-attention
layers only, picked by the config's layer list, and refuses its whole model by naming what lies between them;
the tiny model of each keeps at least one attention layer; the self-check of the real module agrees for one type
of each kind (plain, q/k norms with a per-head gate, with an element gate); the full self-check of every hybrid
runs under `pytest -m selfcheck` (tests/test_hf_selfcheck.py)."""

import pytest
import torch

from attnid.errors import SpecError
from attnid.hf.check import check_config, tiny_config
from attnid.hf.coverage import checked_config, counted, default_config
from attnid.hf.mapping import MAPPERS, REFUSED, model_spec, text_config
from attnid.hf.mapping.hybrid import OTHER_LAYERS, layer_kinds
from attnid.model.counting import count_model
from attnid.model.real import SEQ_LEN

HYBRIDS = sorted(OTHER_LAYERS)
DEFAULT_RUN = ("jamba", "lfm3", "qwen3_next")  # plain attention; a per-head gate and q/k norms; an element gate


def spec_of(mt, **overrides):
    return model_spec({**default_config(mt), **overrides})


@pytest.mark.parametrize("mt", HYBRIDS)
def test_every_hybrid_maps_its_attention_layers_only(mt):
    spec = spec_of(mt)
    kinds = layer_kinds(text_config(default_config(mt)), mt)
    assert spec.n_layers == sum(t in ("full_attention", "sliding_attention") for t in kinds) >= 1
    assert spec.not_modelled and spec.not_modelled[0][1].startswith("hybrid: ")
    with pytest.raises(SpecError, match=f"^{spec.not_modelled[0][0]}:"):
        count_model(spec)
    assert counted(mt)[0] == "layers only"
    tiny = model_spec(tiny_config(default_config(mt)), seq_len=SEQ_LEN)
    assert len({(x.attention.rope_dims > 0, x.attention.sliding_window > 0) for x in tiny.layer_specs}) == len(
        {(x.attention.rope_dims > 0, x.attention.sliding_window > 0) for x in spec.layer_specs}
    ), "the tiny model keeps one attention layer of each kind"


def test_the_layer_selection_follows_each_config():
    assert [i for i, t in enumerate(layer_kinds(default_config("jamba"), "jamba")) if t != "mamba"] == [4, 12, 20, 28]
    jamba = spec_of("jamba", attn_layer_period=4, attn_layer_offset=1)
    assert jamba.n_layers == 8 and jamba.attention.rope_dims == 0
    assert spec_of("bamba").n_layers == 3  # Bamba-9B's attn_layer_indices (attnid.hf.mapping.hybrid.DEFAULT_GAPS)
    assert spec_of("bamba", attn_layer_indices=[0, 5]).n_layers == 2
    with pytest.raises(SpecError, match="^attn_layer_indices:"):
        spec_of("bamba", attn_layer_indices=None)
    assert spec_of("falcon_h1").n_layers == 32  # every layer: attention beside its Mamba-2 mixer
    assert spec_of("lfm2", layer_types=None, full_attn_idxs=[2, 5, 8]).n_layers == 3
    assert spec_of("lfm2_moe").n_layers == 16  # transformers' own test's pair, cycled (hybrid.DEFAULT_GAPS)
    with pytest.raises(SpecError, match="^layer_types:"):  # Lfm2MoeConfig names none: its model does not build
        spec_of("lfm2_moe", layer_types=None)
    assert spec_of("nemotron_h", layers_block_type=None, hybrid_override_pattern="M-M*-M*-").n_layers == 2
    gemma = spec_of("recurrent_gemma")  # every third block of 26 is local attention
    assert gemma.n_layers == 8 and gemma.attention.sliding_window == 2048 and gemma.attention.biases == "o"
    assert spec_of("qwen3_next", layer_types=None, full_attention_interval=2).n_layers == 24
    lara = spec_of("lara_mini")  # full layers without RoPE, sliding ones with RoPE and the window
    kinds = {(x.attention.rope_dims, x.attention.sliding_window) for x in lara.layer_specs}
    assert kinds == {(0, 0), (128, 512)}
    assert spec_of("olmo_hybrid", rope_parameters=None).positions == "none"  # released checkpoints: NoPE


def test_the_attention_variants_of_each_type():
    qwen = spec_of("qwen3_next").attention
    assert (qwen.output_gate, qwen.qk_norm, qwen.rope_dims, qwen.d_head_qk) == ("element", "rms_head", 64, 256)
    with pytest.raises(SpecError, match="^attention_bias:"):  # the gate rows of q_proj would carry a bias
        spec_of("qwen3_next", attention_bias=True)
    lfm3 = {x.attention.sliding_window: x.attention for x in spec_of("lfm3").layer_specs}
    assert lfm3[0].output_gate == "head" and lfm3[0].rope_dims == 64 and lfm3[0].rope_base == pytest.approx(1000.0)
    assert lfm3[256].rope_dims == 128 and lfm3[256].rope_base == 10000.0
    assert spec_of("lfm3", use_attention_gate=False).attention.output_gate == "none"
    assert spec_of("olmo_hybrid").attention.qk_norm == "rms_all"
    assert spec_of("falcon_h1", key_multiplier=0.5).attention == spec_of("falcon_h1").attention
    with pytest.raises(SpecError, match="^key_multiplier:"):
        spec_of("falcon_h1", key_multiplier=0.0)


def test_the_hybrids_left_out_say_why():
    for mt in ("zamba", "zamba2", "granitemoehybrid"):
        assert mt not in MAPPERS and REFUSED[mt].startswith("hybrid: ")


@pytest.mark.slow
@pytest.mark.parametrize("mt", DEFAULT_RUN)
def test_the_real_attention_modules_agree_with_the_count(mt):
    torch.set_num_threads(1)
    where, cfg = checked_config(mt)
    rows = check_config(cfg)
    assert rows[-1]["part"] == "whole model" and rows[-1]["verdict"] == "refused"
    for row in rows[:-1]:
        assert row["verdict"] == "agree" and row["measured"] == row["count"] and row["P"] == row["P_spec"], row
