"""The decoders of encoder-decoder models (attnid.hf.mapping.seq2seq) and cross-attention (AttentionSpec.d_cross).

Every type maps its class defaults to its attention layers only (each decoder layer two blocks: a causal
self-attention, then a cross-attention reading the encoder's states) and names what it does not model; the count
of cross-attention is measured on this project's layer (encoder states of another width than d_model) and on the
real BART encoder_attn, where its key bias has no effect and its value bias none beside the output bias; the
self-check of one type (BART: one self- and one cross-attention layer) runs by default, the others under
`pytest -m selfcheck`."""

import math

import pytest
import torch

from attnid.errors import SpecError
from attnid.hf.check import check_config, layer_function
from attnid.hf.coverage import counted, default_config
from attnid.hf.mapping import MAPPERS, model_spec, model_type
from attnid.hf.mapping.seq2seq import BLOCKS, WITHOUT_CROSS
from attnid.hf.tiny import tiny_config
from attnid.jacobian import RANK_RTOL, input_sizing, numerical_rank, tall_svdvals
from attnid.jacobian.verification import verify
from attnid.layer.counting import count
from attnid.layer.counting_variants import EXAMPLE_SHAPE, EXAMPLE_VARIANTS
from attnid.layer.forward import attention
from attnid.layer.layout import Layout
from attnid.layer.spec import AttentionSpec
from attnid.model.counting import count_model
from attnid.model.real import SEQ_LEN, build_real_model

DECODERS = sorted(BLOCKS)
DEFAULT_RUN = "bart"


def spec_of(mt, **overrides):
    return model_spec({**default_config(mt), **overrides})


@pytest.mark.parametrize("mt", DECODERS)
def test_every_decoder_maps_its_attention_layers_only(mt):
    spec = spec_of(mt)
    cfg = default_config(mt)
    layers = cfg["decoder"]["num_hidden_layers"] if "decoder" in cfg else cfg["decoder_layers"]
    per_layer = 1 if mt in WITHOUT_CROSS else 2
    assert spec.n_layers == per_layer * layers
    self_attention = spec.layer_specs[0].attention
    assert self_attention.causal and not self_attention.d_cross
    if per_layer == 2:
        cross = spec.layer_specs[1].attention
        assert cross.d_cross == self_attention.d_model and not cross.causal and cross.biases == self_attention.biases
    with pytest.raises(SpecError, match=f"^{spec.not_modelled[0][0]}:"):
        count_model(spec)
    assert counted(mt)[0] == "layers only"


def test_the_facts_of_each_type():
    assert spec_of("whisper").attention.biases == "qvo"  # WhisperAttention's k_proj has no bias
    assert spec_of("bigbird_pegasus").attention.biases == ""  # use_bias false
    assert spec_of("bigbird_pegasus", use_bias=True).attention.biases == "qkvo"
    assert spec_of("musicgen").attention.biases == "" and spec_of("musicgen").positions == "sinusoidal"
    assert model_type(default_config("musicgen")) == "musicgen"  # read from its `decoder` section
    assert spec_of("trocr", cross_attention_hidden_size=768).layer_specs[1].attention.d_cross == 768
    assert spec_of("trocr", use_learned_position_embeddings=False).positions == "sinusoidal"
    assert spec_of("whisper").max_positions == 448  # max_target_positions
    assert spec_of("bart").norm_position == "post" and spec_of("mbart").norm_position == "pre"
    with pytest.raises(SpecError, match="^use_prompt:"):
        spec_of("mvp", use_prompt=True)
    with pytest.raises(SpecError, match="^is_encoder_decoder:"):  # a type outside the family still refuses it
        model_spec({**default_config("gpt2"), "is_encoder_decoder": True})
    assert {"musicgen", "whisper", "bart"} <= set(MAPPERS)


def test_a_cross_attention_spec():
    cross = AttentionSpec(8, 2, biases="qkvo", d_cross=12)
    assert cross.label.endswith("_cross12") and cross.block_shapes()["W_K"] == (2, 12, 4)
    assert AttentionSpec.from_row(cross.to_row()) == cross
    # at d_cross = d the count is that of self-attention without a mask (counting_variants: C = X)
    same = AttentionSpec(8, 2, biases="qkvo", d_cross=8)
    assert count(same).breakdown == count(AttentionSpec(8, 2, biases="qkvo")).breakdown
    assert count(AttentionSpec(8, 2, biases="qkvo", d_cross=3)).breakdown == {
        "query_key": 2 * (4 * 9 + 4 * 3 - 3 * (9 + 3 - 3)), "value_output": 2 * (4 * 3 + 4 * 8 - 3 * (3 + 8 - 3)),
        "key_bias": 8, "value_bias": 8,
    }  # fmt: skip
    for field, kwargs in (("causal", {"causal": True}), ("rope_dims", {"rope_dims": 4}), ("sinks", {"sinks": True})):
        with pytest.raises(SpecError, match=f"^{field}:"):
            AttentionSpec(8, 2, d_cross=8, **kwargs)
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    theta = Layout(cross).init(torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="give context"):
        attention(theta, x, cross)
    assert attention(theta, x, cross, context=torch.randn(2, 5, 12, dtype=torch.float64)).shape == (2, 3, 8)
    with pytest.raises(SpecError, match="^d_cross:"):
        verify(cross)


# d_cross against d_model, head sizes above both, v = 1, GQA, every bias subset among them
OWN_CROSS = [
    AttentionSpec(8, 2, biases="qkvo", d_cross=3),
    AttentionSpec(6, 2, d_head_qk=7, d_head_v=5, biases="qv", d_cross=4),
    AttentionSpec(6, 4, 2, d_head_qk=3, biases="qvo", d_cross=5),
    AttentionSpec(7, 1, d_head_qk=4, d_head_v=1, biases="o", d_cross=9),
    AttentionSpec(5, 3, 1, d_head_qk=4, d_head_v=6, biases="qk", d_cross=2),
    AttentionSpec(**{**EXAMPLE_SHAPE, **EXAMPLE_VARIANTS["cross"]}),  # the paper's example (VariantCross)
]


@pytest.mark.parametrize("spec", OWN_CROSS, ids=lambda s: s.label)
def test_the_own_cross_attention_layer_measures_the_count(spec):
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    layout = Layout(spec)
    theta = layout.init(gen)
    sizing = input_sizing(spec)
    x = torch.randn(sizing.batch, sizing.seq_len, spec.d_model, generator=gen, dtype=torch.float64)
    c = torch.randn(sizing.batch, sizing.seq_len + 1, spec.d_cross, generator=gen, dtype=torch.float64)
    J = torch.func.jacrev(lambda th: attention(th, x, spec, layout, context=c).reshape(-1))(theta)
    rank = numerical_rank(tall_svdvals(J), RANK_RTOL)
    assert spec.n_params - rank["rank"] == count(spec).unidentified and rank["gap"] > 8, (spec.label, rank)


def test_the_real_cross_attention_biases_are_measured():
    """BART's encoder_attn: the key bias's columns of the Jacobian vanish (a constant along the keys), and the value
    bias's lie in the span of the output bias's (softmax rows sum to one): both measured, not assumed."""
    torch.set_num_threads(1)
    tiny = tiny_config(default_config("bart"))
    spec = model_spec(tiny, seq_len=SEQ_LEN).layer_specs[1].attention
    real = build_real_model("BartForCausalLM", tiny)
    f, theta, x, P = layer_function(real, 1, spec, input_sizing(spec, seq_len=SEQ_LEN), seed=0)
    J = torch.func.jacrev(lambda th: f(th, x).reshape(-1))(theta)  # (B T d, P)
    names = [n for n, _ in real.module.model.decoder.layers[0].encoder_attn.named_parameters()]
    sizes = [p.numel() for _, p in real.module.model.decoder.layers[0].encoder_attn.named_parameters()]
    cols = dict(zip(names, torch.split(J, sizes, dim=1), strict=True))
    assert cols["k_proj.bias"].abs().max() < 1e-12 * J.abs().max()
    value_and_output = torch.cat([cols["v_proj.bias"], cols["out_proj.bias"]], dim=1)
    assert torch.linalg.matrix_rank(value_and_output) == torch.linalg.matrix_rank(cols["out_proj.bias"]) == 8
    assert torch.linalg.matrix_rank(cols["q_proj.bias"]) == 8  # the query bias is seen


def test_without_encoder_states_cross_attention_has_no_effect():
    """The causal LM run without encoder states skips encoder_attn: its parameters get no gradient at all."""
    tiny = tiny_config(default_config("bart"))
    real = build_real_model("BartForCausalLM", tiny)
    model = real.module
    model.zero_grad()
    model(input_ids=torch.randint(32, (2, SEQ_LEN)), use_cache=False).logits.sum().backward()
    cross = model.model.decoder.layers[0].encoder_attn
    assert all(p.grad is None for p in cross.parameters())
    assert model.model.decoder.layers[0].self_attn.q_proj.weight.grad is not None


def _agrees(mt, cfg):
    torch.set_num_threads(1)
    rows = check_config(cfg)
    assert rows[-1]["part"] == "whole model" and rows[-1]["verdict"] == "refused"
    layers = rows[:-1]
    assert len(layers) == (1 if mt in WITHOUT_CROSS else 2), layers
    for row in layers:
        assert row["verdict"] == "agree" and row["measured"] == row["count"] and row["P"] == row["P_spec"], row
    return layers


def test_the_real_self_and_cross_attention_agree_with_the_count():
    rows = _agrees(DEFAULT_RUN, default_config(DEFAULT_RUN))
    assert rows[1]["spec"].endswith("_cross8") and rows[1]["count"] == 80


@pytest.mark.selfcheck
@pytest.mark.parametrize("mt", [t for t in DECODERS if t != DEFAULT_RUN])
def test_every_decoder_agrees_with_the_count(mt):
    _agrees(mt, default_config(mt))


@pytest.mark.selfcheck
def test_trocr_with_an_encoder_of_another_width_agrees():
    rows = _agrees("trocr", {**default_config("trocr"), "cross_attention_hidden_size": 768})
    assert rows[1]["spec"].endswith("_cross16") and rows[1]["P"] == 416 and not math.isnan(rows[1]["gap"])


def test_musicgen_is_fed_one_token_stream_per_codebook():
    """MusicGen's decoder reads (B K, T) ids for its K = num_codebooks streams and sums their embeddings into B
    sequences: the self-check feeds K streams (with B ids its default config, K = 4, failed in the class)."""
    cfg = default_config("musicgen")
    assert cfg.get("num_codebooks", cfg.get("decoder", {}).get("num_codebooks")) == 4
    _agrees("musicgen", cfg)
