"""BERT's relatives (attnid.hf.mapping.bert): each maps, the whole model where its count is certified two-sided
(the Jacobian of the real class's logits measures it, `attnid check`; the explicit generators of
`Gauge.for_hf_model` span exactly that many directions), its attention layers only where the whole model is not
modelled, with the reason."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from gauge_checks import gauge_spans_the_count

from attnid.errors import SpecError
from attnid.hf.check import check_config, meta_params, real_class, tiny_config
from attnid.hf.coverage import counted, default_config
from attnid.hf.mapping import model_spec, unread_position_rows
from attnid.model.counting import count_model
from attnid.model.real import SEQ_LEN, build_real_model

# unidentified dims of the whole model at the self-check's tiny size (d 8, 2 heads), measured by `attnid check
# --model-type` (the Jacobian's count agreed, gap and margin decided)
# (the RoBERTas: 389 + 6 weak where BERT's rule, the pad's row unread, counts 395 + 5)
ROBERTA = ("roberta", "xlm-roberta", "camembert", "data2vec-text")
WHOLE = {"ernie": 379, "bert-generation": 339, "sarvam_mla": 256, **dict.fromkeys(ROBERTA, 389)}
LAYERS_ONLY = ("xmod", "roberta-prelayernorm", "xlm-roberta-xl", "megatron-bert", "electra", "rembert", "roc_bert",
               "roformer")  # fmt: skip
# one of each kind, self-checked in the default run; every mapped type under -m selfcheck (tests/test_hf_selfcheck.py)
DEFAULT_RUN = ("bert-generation", "roberta")


def tiny_of(mt: str) -> tuple[dict, object]:
    tiny = tiny_config(default_config(mt))
    return tiny, model_spec(tiny, seq_len=SEQ_LEN)


@pytest.mark.parametrize("mt", sorted(WHOLE))
def test_whole_model_count_at_the_tiny_size(mt):
    tiny, spec = tiny_of(mt)
    assert counted(mt) == ("whole model", "")
    assert meta_params(real_class(tiny), tiny) == spec.n_params
    assert count_model(spec).unidentified == WHOLE[mt]


@pytest.mark.parametrize("mt", LAYERS_ONLY)
def test_layers_only_with_the_reason(mt):
    how, why = counted(mt)
    assert how == "layers only" and why, mt
    _, spec = tiny_of(mt)
    with pytest.raises(SpecError):
        count_model(spec)


def test_roberta_positions_leave_the_first_rows_to_the_pad():
    """RoBERTa's position ids start at padding_idx + 1: a table of 514 rows takes 512 tokens."""
    cfg = {**default_config("roberta"), "max_position_embeddings": 514}
    spec = model_spec(cfg)
    assert unread_position_rows(cfg) == 2 and (spec.max_positions, spec.seq_len) == (514, 512)
    assert (spec.pad_token, spec.pad_row) == (1, 513)  # the class's row 1, last in the layout
    tiny, spec = tiny_of("roberta")
    assert tiny["max_position_embeddings"] == SEQ_LEN + 2 == spec.max_positions
    with pytest.raises(SpecError, match="seq_len"):  # the class's rows end before a 513th token's
        model_spec(cfg, seq_len=513)


@pytest.mark.parametrize("mt, pad", [(mt, None) for mt in sorted(WHOLE)] + [("roberta", 3)])
def test_the_gauge_spans_exactly_the_count(mt, pad):
    """The upper side of the certificate: the explicit generators at a generic point have rank = the count, and
    the logits do not move along their span (with padding_idx 3: the count 405 of a table of 10 rows)."""
    tiny = tiny_config({**default_config(mt), **({} if pad is None else {"pad_token_id": pad})})
    gauge_spans_the_count(tiny, WHOLE[mt] if pad is None else 405)


@pytest.mark.slow
@pytest.mark.parametrize("mt", DEFAULT_RUN)
def test_self_check_of_one_of_each_kind(mt):
    torch.set_num_threads(1)
    rows = check_config(default_config(mt))
    assert rows and rows[-1]["part"] == "whole model", mt
    for row in rows:
        assert row["verdict"] in ("agree", "refused"), (mt, row)
    whole = rows[-1]
    assert whole["verdict"] == ("agree" if mt in WHOLE else "refused"), whole
    if mt in WHOLE:
        assert whole["measured"] == whole["count"] == WHOLE[mt]



@pytest.mark.parametrize("pad", [1, 3])
def test_roberta_logits_are_the_own_function_with_the_pad_row(pad):
    """The name map's position rows and this project's forward: at the mapped point, on sequences holding the pad
    (whose row is the class's padding_idx, the others' padding_idx + 1 + the tokens before them that are not
    the pad), the own function's logits are the class's."""
    from attnid.gauge.name_map import name_map
    from attnid.gauge.point import FineLayout
    from attnid.model.forward import logits

    tiny = tiny_config({**default_config("roberta"), "pad_token_id": pad})
    spec = model_spec(tiny, seq_len=SEQ_LEN)
    real = build_real_model(real_class(tiny), tiny)
    theta = FineLayout(spec).flatten(name_map(spec, tiny).to_fine(real.layout.unflatten(real.theta)))
    tokens = torch.randint(tiny["vocab_size"], (4, SEQ_LEN), generator=torch.Generator().manual_seed(pad))
    tokens[:, 1] = tokens[0, 4] = pad  # every sequence holds the pad, one twice
    ours, theirs = logits(theta, tokens, spec), real.forward(real.theta, tokens)
    assert float((ours - theirs).abs().max() / theirs.abs().max()) < 1e-10


@pytest.mark.selfcheck  # the full Jacobian, about 50 s each; the default run self-checks roberta sketched
@pytest.mark.parametrize("pad", [1, 3])
def test_roberta_measures_the_pad_row_count_not_berts(pad):
    """Count = the real class's Jacobian rank deficiency at two padding_idx (405 + 6 weak with 3: rows 0..2 of the
    table of 10 are unread), where BERT's rule with the pad's row left unread (the count without pad_token and pad_row)
    measures d - 2 fewer exact directions and one fewer weak one."""
    from attnid.hf.check import MIN_EPS, _whole_row

    torch.set_num_threads(1)
    tiny = tiny_config({**default_config("roberta"), "pad_token_id": pad})
    spec = model_spec(tiny, seq_len=SEQ_LEN)
    rule, berts = count_model(spec), count_model(spec.replace(pad_token=None, pad_row=None))
    assert rule.unidentified == berts.unidentified - spec.d_model + 2 == WHOLE["roberta"] + 8 * (pad - 1)
    assert rule.weakly_identified == berts.weakly_identified + 1

    def builder(eps):
        return lambda at, seed=0: build_real_model(real_class(tiny), tiny, seed, eps if at is None else at)

    row = _whole_row(real_class(tiny), spec, builder, 0, 3.0, MIN_EPS, False)
    assert row["verdict"] == "agree" and row["gap"] > 5, row
    assert row["measured"] == row["measured_half"] == rule.unidentified != berts.unidentified, row
    assert row["weak_measured"] == rule.weakly_identified, row
