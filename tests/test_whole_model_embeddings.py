"""The embedding side of whole models (attnid.model.counting.embeddings): BLOOM's norm on the embeddings before
pre-LN blocks, BERT's token types and masked-LM head, a tied head's shift; counts against the Jacobian."""

import pytest
import torch

from attnid.gauge.cases import own_case
from attnid.hf import model_spec, stored_config
from attnid.hf.config_tables import shipped_table
from attnid.model.counting import count_model
from attnid.model.forward import logits, position_ids
from attnid.model.grid import own_spec
from attnid.model.layout import ModelLayout
from attnid.layer.spec import SpecError

# d_model 4 puts V = 12 beyond the rotations' reach (V + 2 > k + rot = 8 + 3): the many-token regime, cheaply
D4 = {"attention": {"d_model": 4, "n_heads": 2, "alibi": True, "biases": "qkvo"}, "d_ff": 4}
BLOOM = {"embedding_norm": True, "positions": "none", "mlp_bias": True, "n_layers": 1}
BERT = {"norm_position": "post", "final_norm": False, "embedding_norm": True, "attention": {"biases": "qkvo"},
        "mlp_bias": True, "token_types": 2, "mlm_head": True, "n_layers": 1}  # fmt: skip
PAD = {"max_positions": 8, "seq_len": 6, "pad_token": 1, "pad_row": 7}
CASES = {
    "bloom_tied": {**BLOOM, "tied": True, "attention": {"alibi": True, "biases": "qkvo"}},
    "bloom_tied_eps": {**BLOOM, "tied": True, "attention": {"alibi": True, "biases": "qkvo"}, "norm_eps": 1e-5},
    "bloom_tied_no_bias": {**BLOOM, "tied": True, "norm_bias": False, **D4},
    "bloom_tied_head_bias_rope": {**BLOOM, "tied": True, "lm_head_bias": True, "positions": "rope",
                                  "attention": {"rope_dims": 4, "biases": "qkvo"}},
    "untied_few_tokens": {**BLOOM, **D4, "vocab_size": 6},
    "untied_few_tokens_d8": {**BLOOM, "attention": {"alibi": True, "biases": "qkvo"}},
    "untied_many_tokens": {**BLOOM, **D4},
    "untied_many_tokens_eps": {**BLOOM, **D4, "norm_eps": 1e-5},
    "untied_many_tokens_no_bias": {**BLOOM, **D4, "norm_bias": False},
    "bert_mlm_tied": {**BERT, "tied": True, "lm_head_bias": True},
    "bert_mlm_untied_eps": {**BERT, "lm_head_bias": True, "norm_eps": 1e-5},
    "bert_mlm_tied_no_bias": {**BERT, "tied": True, "lm_head_bias": True, "norm_bias": False},
    "bert_three_types_no_head_bias": {**BERT, "tied": True, "token_types": 3, **D4, "attention": {"d_model": 4}},
    "tied_shift_pre_ln": {"attention": {"biases": "qkvo"}, "mlp_bias": True, "tied": True, "lm_head_bias": True,
                          "n_layers": 1},
    # a pad's own position row (RoBERTa): rows 0..5 for the tokens, row 7 (or 6) the pad's, the rest unread
    "bert_pad_tied": {**BERT, "tied": True, "lm_head_bias": True, **PAD},
    "bert_pad_untied": {**BERT, "lm_head_bias": True, **PAD, "pad_token": 3, "pad_row": 6},
    "pad_pre_ln_tied": {"attention": {"biases": "qkvo"}, "mlp_bias": True, "tied": True, "lm_head_bias": True,
                        "n_layers": 1, **PAD},
    "pad_pre_ln_untied_no_final_norm": {"attention": {"biases": "qkvo"}, "final_norm": False, "n_layers": 1, **PAD},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_count_agrees_with_jacobian(name):
    """Measured (all data and half of it) == count, and the weak directions of eps > 0 == their count."""
    spec = own_spec(CASES[name])
    row = own_case(name, spec, other_seed=False)
    assert row["agree"], row
    assert row["gap"] > 5


def test_regimes_of_the_untied_embedding_norm():
    """Few tokens: the norm's k = 2d parameters and every rotation are free; many: the row scales, one rotation."""
    few, many = own_spec(CASES["untied_few_tokens"]), own_spec(CASES["untied_many_tokens"])
    assert count_model(few).breakdown["embedding_norm"] == 8 and count_model(few).breakdown["residual_rotations"] == 3
    assert (
        count_model(many).breakdown["embedding_norm"] == 12 + 1
        and count_model(many).breakdown["residual_rotations"] == 1
    )
    eps = count_model(own_spec(CASES["untied_many_tokens_eps"]))
    assert eps.breakdown["embedding_norm"] == 8 and eps.weakly_identified == (12 + 2 - 8 - 3) + 1


def _point(spec, seed=0):
    layout = ModelLayout(spec)
    theta = layout.init(torch.Generator().manual_seed(seed))
    tokens = torch.randint(spec.vocab_size, (3, spec.seq_len), generator=torch.Generator().manual_seed(seed + 1))
    return layout, theta, tokens


def _same(spec, layout, a, b, tokens):
    return torch.allclose(logits(a, tokens, spec, layout), logits(b, tokens, spec, layout), rtol=0, atol=1e-10)


def test_symmetries_applied_exactly():
    """An untied E's row scales and shifts along 1 behind the embedding norm (eps = 0); a tied one's are seen.
    Token type row 1 is never read and row 0 trades with the positions; a tied head's E + a/g against the
    positions and the head bias."""
    for tied in (False, True):
        spec = own_spec({**CASES["untied_many_tokens"], "tied": tied})
        layout, theta, tokens = _point(spec)
        moved = theta.clone()
        E = layout.unflatten(moved)["embed"]
        E.mul_(torch.rand(E.shape[0], 1, dtype=torch.float64) + 0.5).add_(torch.randn(E.shape[0], 1))
        assert _same(spec, layout, theta, moved, tokens) != tied
    spec = own_spec(CASES["bert_mlm_tied"])
    layout, theta, tokens = _point(spec)
    moved = theta.clone()
    w = layout.unflatten(moved)
    shift = torch.randn(spec.d_model, dtype=torch.float64)
    w["token_type"][1].normal_()
    w["token_type"][0].add_(shift)
    w["pos"].sub_(shift)
    a, u = 0.7, 1 / w["mlm_norm.gain"]
    w["embed"].add_(a * u)  # every row + a / g
    w["pos"].sub_(a * u)
    w["unembed_bias"].sub_(a * (w["mlm_norm.bias"] @ u))
    assert _same(spec, layout, theta, moved, tokens)


def test_refused_by_name():
    with pytest.raises(SpecError, match="positions"):  # an embedding norm reading E + positions before pre-LN blocks
        count_model(own_spec({"embedding_norm": True}))
    with pytest.raises(SpecError, match="final_norm"):
        count_model(own_spec({**BLOOM, "final_norm": False}))
    with pytest.raises(SpecError, match="mlm_head"):
        count_model(own_spec({"mlm_head": True}))
    with pytest.raises(SpecError, match="token_types"):
        count_model(own_spec({"token_types": 2, "positions": "none"}))
    with pytest.raises(SpecError, match="token_types"):  # not a count: a description that cannot exist
        own_spec({"token_types": -1})
    with pytest.raises(SpecError, match="vocab_size"):  # 4 tokens cannot pin the points a tied head leaves free
        count_model(own_spec({**BLOOM, "tied": True, "vocab_size": 4}))
    with pytest.raises(SpecError, match="vocab_size"):  # V = d: measured 7 more than the rule
        count_model(own_spec({**BLOOM, "tied": True, "vocab_size": 8}))


def test_stored_configs():
    """BLOOM-176B and BERT-base (BertForMaskedLM) count, with their published totals, in the shipped table."""
    bloom, bert = model_spec(stored_config("bloom_176b"), seq_len=2048), model_spec(stored_config("bert_base"))
    assert bloom.n_params == 176_247_271_424 and bert.n_params == 109_514_298
    assert bloom.embedding_norm and bloom.tied and bert.mlm_head and bert.token_types == 2 and bert.lm_head_bias
    df = shipped_table(["bloom_176b", "bert_base"]).set_index("model")
    assert (df["status"] == "ok").all() and (df["attention_unidentified"] <= df["unidentified"]).all()
    assert df.loc["bloom_176b", "src_embedding_norm"] == 1  # beta_e's ones component; the second scale is weak
    assert df.loc["bloom_176b", "weakly_identified"] == 2
    assert df.loc["bert_base", "src_token_types"] == 2 * 768 and df.loc["bert_base", "src_mlm_head"] == 3 * 768
    assert df.loc["bert_base", "src_tied_shift"] == 1


@pytest.mark.parametrize("name", ["bloom", "bloom_untied", "bert_mlm"])
def test_real_model_agrees(name):
    """BloomForCausalLM and BertForMaskedLM from shrunk configs, float64 eager: every parameter, the count."""
    pytest.importorskip("transformers")
    from attnid.gauge.cases import real_case, tiny_spec
    from attnid.model.real import build_real

    assert build_real(name).theta.numel() == tiny_spec(name).n_params
    row = real_case(name, other_seed=False)
    assert row["agree"], row


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"pad_token": 1}, "pad_row"),  # the token without its row
        ({"pad_row": 7}, "pad_row"),
        ({"pad_token": 1, "pad_row": 5}, "pad_row"),  # a row the positions in use read
        ({"pad_token": 1, "pad_row": 8}, "pad_row"),  # beyond the table
        ({"pad_token": 12, "pad_row": 7}, "pad_token"),  # beyond the vocabulary
        ({"pad_token": True, "pad_row": 7}, "pad_token"),
        ({"pad_token": 1, "pad_row": 7, "positions": "none"}, "pad_row"),  # no table to read
    ],
)
def test_a_pad_row_is_refused_by_name(fields, field):
    with pytest.raises(SpecError) as err:
        own_spec({"max_positions": 8, "seq_len": 6, **fields})
    assert err.value.field == field


def test_the_pad_row_is_read_and_moves_with_its_own_shift():
    """The pad reads its row wherever it stands (moving it moves the logits of the sequences holding the pad,
    where BERT's rule would count the row unread), the other tokens count their positions without the pad, and
    the pad's own shift E_pad + u, P_pad - u leaves an untied model's logits."""
    spec = own_spec(CASES["bert_pad_untied"])
    layout, theta, _ = _point(spec)
    w = layout.unflatten(theta)
    tokens = torch.tensor([[0, 3, 1, 2, 3, 4], [0, 1, 2, 4, 5, 6]])
    base = logits(theta, tokens, spec, layout)
    u = torch.randn(spec.d_model, generator=torch.Generator().manual_seed(5), dtype=theta.dtype)
    pos = w["pos"].clone()
    pos[6] += u
    moved = logits(layout.flatten({**w, "pos": pos}), tokens, spec, layout)
    assert (moved - base)[0].abs().max() > 1e-3 and (moved - base)[1].abs().max() == 0
    embed = w["embed"].clone()
    embed[3] -= u
    assert _same(spec, layout, theta, layout.flatten({**w, "pos": pos, "embed": embed}), tokens)
    assert position_ids(torch.tensor([[3, 0, 3, 3, 1, 2]]), spec).tolist() == [[6, 0, 6, 6, 1, 2]]
