r"""The training study on real text, as the macros of the paper's real-text paragraph (attnid.training.analysis
answers the questions; this module writes the answers).

Real text = the runs of kind `text` (attnid.training.tasks.TextCorpus on the corpus of attnid.training.corpus).
The sweep against H is the Llama setting `text/llama` (a fixed head size, so the width grows to
d_model = H d_head); the other text settings (GPT-2, Mixtral) bring their whole-model overlaps by source and,
where they run more than one rebalancing mode, the paired effects of rebalancing. Every macro exists in every
preset: what a preset does not measure reads 'n/a'. The five results, in the order of Section 5:

1. plain SGD at rounding: the largest overlap of a plain-SGD update with the attention layers' orbits and with
   the whole model's, over every text run;
2. the slope of log overlap on log H per optimizer on the H sweep (95% interval over seeds), the chance
   level's own slope;
3. the weight-decay law: measured ||I_t|| / ||I_0|| after the last step against (1 - eta lambda)^{2t};
4. Adam against one second moment per symmetry block (mean overlaps; held-out loss, log10 ratio paired by H and
   seed);
5. rebalancing: the paired effects' cells on text, uncorrected and after Holm's correction.
Perplexity: exp of the held-out cross-entropy (nats per token) at the widest model. Each result is also held against
the synthetic reference (:func:`comparison_macros`), so the paper can say where text differs.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..training.analysis import estimate, heads_slopes, ok
from .latex import macro_name, number
from .labels import OPTIMIZER_NAMES, SETTING_NAMES, with_settings
from .study import MEASURES, SLOPE_OPTIMIZERS, converged_runs, effect_tests, interval_text, paired

SWEEP = "text/llama"  # the setting swept against H at a fixed head size
# the whole-model overlap per real class and the sources the text cites ('' = the whole model)
MODEL_SETTINGS = {
    "Llama": ("text/llama", ("", "attention", "mlp_hidden", "norm_gain", "residual_rotations")),
    "GptTwo": ("text/gpt2", ("", "attention")),
    "Mixtral": ("text/mixtral", ("", "attention")),
}


def _is_text(frame: pd.DataFrame) -> pd.Series:
    """Which rows are text runs: their kind, or (tables without one) a sweep name starting with 'text'."""
    return frame["kind"] == "text" if "kind" in frame else frame["task"].str.startswith("text")


def _text(summary: pd.DataFrame) -> pd.DataFrame:
    return with_settings(ok(summary[_is_text(summary)]))


CORPUS_MACROS = ("CorpusPackage", "CorpusFiles", "CorpusTrainFiles", "CorpusHeldoutFiles", "CorpusTrainTokens",
                 "CorpusHeldoutTokens", "CorpusCharacters", "CorpusVocab")  # fmt: skip


def corpus_macros(manifest: dict | None) -> dict[str, str]:
    """The corpus (attnid.training.corpus' manifest): package, files and tokens of each split, vocabulary; 'n/a'
    for a preset without the text task (manifest None)."""
    if manifest is None:
        return dict.fromkeys(CORPUS_MACROS, "n/a")
    values = (
        f"\\texttt{{{manifest['package']}}} {manifest['version']}", number(len(manifest["files"])),
        number(manifest["n_files"]["train"]), number(manifest["n_files"]["heldout"]),
        number(manifest["tokens"]["train"]), number(manifest["tokens"]["heldout"]),
        number(sum(manifest["chars"].values())), number(manifest["vocab_size"]),
    )  # fmt: skip
    return dict(zip(CORPUS_MACROS, values))


def _sweep_macros(text: pd.DataFrame) -> dict[str, str]:
    """The H sweep: its sizes, result 1 (plain SGD), 2 (slopes) and 4 (Adam and its shared variant), and the
    widest model's held-out perplexity."""
    sweep = text[text["task"] == SWEEP]
    free = sweep[sweep["rebalance"] == "none"]
    first = sweep.iloc[0] if len(sweep) else None
    values = {
        "TextSweepHeads": ", ".join(str(h) for h in sorted(sweep["heads"].unique())) or "n/a",
        "TextSweepWidthMax": number(sweep["d_model"].max()),
        "TextSweepLayers": number(first["n_layers"]) if first is not None else "n/a",
        "TextSweepHeadSize": number(first["d_head"]) if first is not None else "n/a",
        "TextSweepSteps": number(sweep["steps"].max()),
        "TextSweepSeeds": number(sweep["seed"].nunique()),
        "TextRuns": number(len(text)),
        "TextConverged": number(int(text["converged"].sum())) if "converged" in text else "n/a",
    }
    sgd = text[(text["algorithm"] == "sgd") & (text["weight_decay"] == 0)]
    values["TextSgdOverlapMax"] = number(sgd["max_overlap_all"].max())
    model = sgd["max_overlap_model"] if "max_overlap_model" in sgd else pd.Series(dtype=float)
    values["TextSgdModelOverlapMax"] = number(model.max())
    slopes = heads_slopes(sweep)
    for opt in SLOPE_OPTIMIZERS:
        values[macro_name("TextOverlapSlope", opt)] = interval_text(estimate(slopes.loc[slopes["optimizer"] == opt, "slope"]))
    values["TextChanceSlope"] = number(slopes["chance_slope"].mean(), digits=2)
    for opt in ("adam", "adam_shared", "sgd_momentum", "sgd_wd"):
        values[macro_name("TextOverlap", opt)] = number(free.loc[free["optimizer"] == opt, "mean_overlap_all"].mean())
    values["TextAdamSharedLossRatio"] = interval_text(_shared_loss_ratio(sweep))
    widest = free[free["heads"] == free["heads"].max()] if len(free) else free
    for opt in ("adam", "sgd"):
        loss = widest.loc[widest["optimizer"] == opt, "final_eval_loss"]
        values[macro_name("TextPerplexityWide", opt)] = interval_text(estimate(np.exp(loss)))
    return values


def _shared_loss_ratio(runs: pd.DataFrame) -> dict:
    """log10 of the shared second moment's final held-out loss over Adam's, paired by H and seed (converged runs
    without rebalancing)."""
    done = converged_runs(runs[runs["rebalance"] == "none"])
    return paired(done, "adam", "adam_shared", "final_eval_loss", lambda y, x: np.log10(y / x))


def _weight_decay_macros(decay: pd.DataFrame) -> dict[str, str]:
    """3. The weight-decay law on the H sweep after the last step (means over H and seeds)."""
    decay = with_settings(decay) if len(decay) else decay
    sel = decay[decay["task"] == SWEEP] if len(decay) else decay
    last = sel[sel["step"] == sel["step"].max()] if len(sel) else sel
    values = {"TextWeightDecayPredicted": number(last["predicted"].mean() if len(last) else math.nan, digits=3)}
    for part in ("query_key", "value_output"):
        measured = last.loc[last["part"] == part, "measured"] if len(last) else pd.Series(dtype=float)
        values[macro_name("TextWeightDecayMeasured", part)] = interval_text(estimate(measured))
    return values


def _model_macros(text: pd.DataFrame) -> dict[str, str]:
    """The whole-model overlap under Adam (no rebalancing) and its attention part, per real class on text."""
    adam = text[(text["optimizer"] == "adam") & (text["rebalance"] == "none")]
    values = {}
    for name, (key, sources) in MODEL_SETTINGS.items():
        g = adam[adam["task"] == key]
        for source in sources:
            column = "mean_overlap_model" + (f"_{source}" if source else "")
            series = g[column] if column in g else pd.Series(dtype=float)
            values[macro_name("TextModelOverlapAdam", name, source)] = interval_text(estimate(series))
    return values


def _effect_macros(effects: pd.DataFrame) -> dict[str, str]:
    """5. Rebalancing on text: cells, cells whose interval excludes zero, and those left after Holm's correction
    over the text cells of each measure (a family of its own)."""
    text = effects[_is_text(effects)] if len(effects) else effects
    values = {}
    tests = effect_tests(text) if len(text) else pd.DataFrame(columns=["measure", "holm", "low", "high"])
    for measure, name in MEASURES.items():
        sel = tests[tests["measure"] == measure]
        excludes = (sel["low"] > 0) | (sel["high"] < 0)
        kept = sel[sel["holm"].astype(bool)]
        values[macro_name("TextEffectCells", name)] = number(len(sel))
        values[macro_name("TextEffectSignificant", name)] = number(int(excludes.sum()))
        values[macro_name("TextEffectHolm", name)] = number(len(kept))
        values[macro_name("TextEffectHolmList", name)] = "; ".join(
            f"{SETTING_NAMES.get(r.task, r.task)}, {OPTIMIZER_NAMES.get(r.optimizer, r.optimizer)}, {r.rebalance}: "
            + interval_text({"mean": r.mean, "low": r.low, "high": r.high})
            for r in kept.itertuples()
        ) or "none"
    return values


# Text against the synthetic tasks ------------------------------------------------------------------------------
# The synthetic setting the text results are held against: the first of these a preset trains at two head counts or
# more (the fixed head size first: the same law as the text sweep's).
REFERENCES = ("teacher_student_fixed_head", "teacher_student")


def synthetic_reference(summary: pd.DataFrame) -> str | None:
    """The setting key of the synthetic reference (REFERENCES), None when the preset trains none of them."""
    good = with_settings(ok(summary))
    for key in REFERENCES:
        if good.loc[good["task"] == key, "heads"].nunique() >= 2:
            return key
    return None


def overlaps(a: dict, b: dict) -> bool | None:
    """Whether two estimates' 95% intervals share a point; None when either is not measured."""
    if not all(math.isfinite(e[k]) for e in (a, b) for k in ("low", "high")):
        return None
    return a["low"] <= b["high"] and b["low"] <= a["high"]


def _agreement(a: dict, b: dict) -> str:
    return {True: "overlap", False: "do not overlap", None: "n/a"}[overlaps(a, b)]


def _departure(decay: pd.DataFrame, key: str | None, part: str) -> dict:
    """Measured over predicted imbalance - 1 after the last step, per run of `key` (an estimate over H and seeds)."""
    sel = decay[(decay["task"] == key) & (decay["part"] == part)] if len(decay) and key else decay.iloc[:0]
    last = sel[sel["step"] == sel["step"].max()] if len(sel) else sel
    return estimate(last["measured"] / last["predicted"] - 1 if len(last) else [])


def comparison_macros(summary: pd.DataFrame, effects: pd.DataFrame, decay: pd.DataFrame) -> dict[str, str]:
    """Where the text results differ from the synthetic reference's: (2) the slope against H per optimizer (the
    optimizers whose intervals do not overlap, listed), (3) the weight-decay law's departure after the last step,
    (4) the shared second moment's loss ratio, (5) rebalancing's cells left after Holm's correction over the
    synthetic cells alone (every non-text setting, a family of its own per measure)."""
    good, text = with_settings(ok(summary)), _text(summary)
    key = synthetic_reference(summary)
    values = {"TextReference": SETTING_NAMES.get(key, key) if key else "n/a"}
    text_slopes, ref_slopes = heads_slopes(text[text["task"] == SWEEP]), heads_slopes(good[good["task"] == key])
    agree, differ = [], []
    for opt in SLOPE_OPTIMIZERS:
        a = estimate(text_slopes.loc[text_slopes["optimizer"] == opt, "slope"])
        b = estimate(ref_slopes.loc[ref_slopes["optimizer"] == opt, "slope"])
        values[macro_name("ReferenceOverlapSlope", opt)] = interval_text(b)
        if (same := overlaps(a, b)) is not None:
            (agree if same else differ).append(OPTIMIZER_NAMES.get(opt, opt))
    values["TextSlopesCompared"] = number(len(agree) + len(differ))
    values["TextSlopesAgree"] = number(len(agree))
    values["TextSlopesDiffer"] = ", ".join(differ) or "none"
    decay = with_settings(decay) if len(decay) else decay
    for part in ("query_key", "value_output"):
        a, b = _departure(decay, SWEEP, part), _departure(decay, key, part)
        values[macro_name("TextWeightDecayDeparture", part)] = interval_text(a)
        values[macro_name("ReferenceWeightDecayDeparture", part)] = interval_text(b)
        values[macro_name("WeightDecayDepartureAgreement", part)] = _agreement(a, b)
    text_ratio, ref_ratio = _shared_loss_ratio(text[text["task"] == SWEEP]), _shared_loss_ratio(good[good["task"] == key])
    values["ReferenceAdamSharedLossRatio"] = interval_text(ref_ratio)
    values["SharedLossRatioAgreement"] = _agreement(text_ratio, ref_ratio)
    synthetic = effects[~_is_text(effects)] if len(effects) else effects
    tests = effect_tests(synthetic) if len(synthetic) else pd.DataFrame(columns=["measure", "holm"])
    for measure, name in MEASURES.items():
        sel = tests[tests["measure"] == measure]
        values[macro_name("SyntheticEffectCells", name)] = number(len(sel))
        values[macro_name("SyntheticEffectHolm", name)] = number(int(sel["holm"].astype(bool).sum()))
    return values


def text_macros(summary: pd.DataFrame, effects: pd.DataFrame, decay: pd.DataFrame, manifest: dict | None) -> dict:
    """Every macro of the real-text paragraph (module docstring), {name: LaTeX}."""
    text = _text(summary)
    return (corpus_macros(manifest) | _sweep_macros(text) | _weight_decay_macros(decay) | _model_macros(text)
            | _effect_macros(effects) | comparison_macros(summary, effects, decay))  # fmt: skip
