"""The real-text paragraph's macros (attnid.report.text_study) on hand-built results whose answers are known."""

import numpy as np
import pandas as pd
import pytest

from attnid.report.text_study import comparison_macros, overlaps, synthetic_reference, text_macros

HEADS, SEEDS = (1, 2, 4, 8), range(6)
# slope of log overlap on log H per (setting, optimizer): text agrees with the reference for Adam, not for momentum
SLOPES = {("text", "adam"): -0.5, ("text", "sgd_momentum"): 0.0,
          ("teacher_student_fixed_head", "adam"): -0.5, ("teacher_student_fixed_head", "sgd_momentum"): -1.0}  # fmt: skip


def summary(references=("teacher_student_fixed_head",)) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for (task, opt), slope in SLOPES.items():
        if task != "text" and task not in references:
            continue
        model, kind = ("llama", "text") if task == "text" else ("own", "teacher_student")
        for h in HEADS:
            for seed in SEEDS:
                overlap = 0.1 * h**slope * np.exp(rng.normal(0, 0.02))
                loss = 2.0 * (1.3 if opt == "adam" and task == "text" else 1.0)  # adam worse on text: ratio != 0
                rows.append({"task": task, "model": model, "kind": kind, "optimizer": opt, "algorithm": opt,
                             "weight_decay": 0.0, "rebalance": "none", "heads": h, "seed": seed, "diverged": False,
                             "converged": True, "mean_overlap_all": overlap, "chance_all": 0.1 / h,
                             "max_overlap_all": overlap, "final_eval_loss": loss * np.exp(rng.normal(0, 0.01)),
                             "d_model": 8 * h, "n_layers": 4, "d_head": 8, "steps": 500})  # fmt: skip
    return pd.DataFrame(rows)


def effects(text_effect: float, synthetic_effect: float) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for task, model, effect in (("text", "llama", text_effect), ("teacher_student", "own", synthetic_effect)):
        for seed in SEEDS:
            rows.append({"task": task, "model": model, "optimizer": "adam", "heads": 2, "seed": seed,
                         "rebalance": "balance", "log_eval_loss": effect + rng.normal(0, 0.01),
                         "steps_to_target": rng.normal(0, 1.0)})  # fmt: skip
    return pd.DataFrame(rows)


NO_DECAY = pd.DataFrame(columns=["task", "model", "part", "step", "measured", "predicted"])


def test_the_reference_is_the_fixed_head_sweep_when_trained_else_the_fixed_width_one():
    assert synthetic_reference(summary()) == "teacher_student_fixed_head"
    fixed_width = summary(references=()).assign()
    ts = summary().query("task != 'text'").assign(task="teacher_student")
    assert synthetic_reference(pd.concat([fixed_width, ts])) == "teacher_student"
    assert synthetic_reference(fixed_width) is None


@pytest.mark.parametrize(("a", "b", "expected"), [((0, 1), (0.5, 2), True), ((0, 1), (1.5, 2), False),
                                                  ((0, np.nan), (0, 1), None)])  # fmt: skip
def test_two_intervals_overlap_when_they_share_a_point(a, b, expected):
    est = lambda lo, hi: {"mean": lo, "low": lo, "high": hi}
    assert overlaps(est(*a), est(*b)) is expected


def test_the_optimizers_whose_slope_differs_from_the_reference_are_listed():
    values = comparison_macros(summary(), effects(0.0, 0.0), NO_DECAY)
    assert values["TextReference"] == "teacher-student, fixed head size"
    assert (values["TextSlopesCompared"], values["TextSlopesAgree"]) == ("2", "1")
    assert values["TextSlopesDiffer"] == "SGD + momentum"
    assert values["ReferenceOverlapSlopeAdamw"] == "n/a"  # not trained: no number, no claim
    assert values["SharedLossRatioAgreement"] == "n/a"  # no shared-moment runs
    assert values["WeightDecayDepartureAgreementQueryKey"] == "n/a"


def test_rebalancing_is_corrected_over_the_text_cells_and_the_synthetic_cells_apart():
    values = text_macros(summary(), effects(text_effect=0.3, synthetic_effect=0.0), NO_DECAY, None)
    assert (values["TextEffectCellsLoss"], values["TextEffectHolmLoss"]) == ("1", "1")
    assert values["TextEffectHolmListLoss"].startswith("text, Llama, Adam, balance")
    assert (values["SyntheticEffectCellsLoss"], values["SyntheticEffectHolmLoss"]) == ("1", "0")
    values = text_macros(summary(), effects(text_effect=0.0, synthetic_effect=-0.3), NO_DECAY, None)
    assert (values["TextEffectHolmLoss"], values["SyntheticEffectHolmLoss"]) == ("0", "1")


def test_a_preset_without_text_reads_not_measured_everywhere():
    values = text_macros(summary().query("task != 'text'"), effects(0.0, 0.0).query("task != 'text'"), NO_DECAY, None)
    for name in ("TextSweepHeads", "TextOverlapSlopeAdam", "TextModelOverlapAdamLlama", "CorpusVocab"):
        assert values[name] == "n/a"
    assert values["TextSlopesCompared"] == "0"
