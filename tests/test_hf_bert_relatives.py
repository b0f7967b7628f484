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
WHOLE = {"ernie": 379, "bert-generation": 339, "sarvam_mla": 256}
ROBERTA = ("roberta", "xlm-roberta", "camembert", "data2vec-text", "xmod", "roberta-prelayernorm", "xlm-roberta-xl")
LAYERS_ONLY = (*ROBERTA, "megatron-bert", "electra", "rembert", "roc_bert", "roformer")
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
    tiny, spec = tiny_of("roberta")
    assert tiny["max_position_embeddings"] == SEQ_LEN + 2 == spec.max_positions


@pytest.mark.parametrize("mt", sorted(WHOLE))
def test_the_gauge_spans_exactly_the_count(mt):
    """The upper side of the certificate: the explicit generators at a generic point have rank = the count, and
    the logits do not move along their span."""
    gauge_spans_the_count(tiny_of(mt)[0], WHOLE[mt])


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



@pytest.mark.selfcheck
@pytest.mark.parametrize("pad", [1, 3])
def test_roberta_pad_row_measures_the_derived_rule(pad):
    """Why the RoBERTas stay layers only (attnid.hf.mapping.bert): the real class's Jacobian measures the
    learned-positions rule minus d (the pad's row is read) plus 2 (its ones component, the pad's own tied shift),
    with one more weak direction (the pad's own scale); the count has no rule for that row."""
    import dataclasses

    from attnid.hf.check import MIN_EPS, _whole_row

    torch.set_num_threads(1)
    tiny = tiny_config({**default_config("roberta"), "pad_token_id": pad})
    spec = dataclasses.replace(model_spec(tiny, seq_len=SEQ_LEN), not_modelled=())
    rule = count_model(spec)

    def builder(eps):
        return lambda at, seed=0: build_real_model(real_class(tiny), tiny, seed, eps if at is None else at)

    row = _whole_row(real_class(tiny), spec, builder, 0, 3.0, MIN_EPS, True)
    assert row["measured"] == row["measured_half"] == rule.unidentified - spec.d_model + 2, row
    assert row["weak_measured"] == rule.weakly_identified + 1, row
