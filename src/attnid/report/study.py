r"""The training study's numbers in the paper's Section 5, as macros (attnid.training.analysis answers
its five questions; this module only writes the answers as LaTeX).

Every estimate is printed as 'mean [low, high]', its 95% t-interval (:func:`interval_text`), and every
macro exists in every preset: a number a preset does not measure reads 'n/a'.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..training.analysis import estimate, heads_slopes, lr_slopes, ok
from .latex import macro_name, number
from .names import OPTIMIZER_NAMES, TASK_NAMES


def interval_text(e: dict) -> str:
    """'mean [low, high]' of an estimate (attnid.training.analysis.estimate) for running text; 'n/a' if not measured."""
    if not math.isfinite(e["mean"]):
        return "n/a"
    return rf"\ensuremath{{{number(e['mean'])}\ [{number(e['low'])}, {number(e['high'])}]}}"


SLOPE_OPTIMIZERS = ("sgd_wd", "sgd_momentum", "adam", "adam_shared", "adamw")  # every macro in every preset ('n/a')
TASK_PREFIX = {"teacher_student": "", "recall": "Recall"}


def study_macros(
    summary: pd.DataFrame, checks: pd.DataFrame, lr_summary: pd.DataFrame, decay: pd.DataFrame, effects: pd.DataFrame
) -> dict[str, str]:
    r"""The training study's numbers that Section 5 cites (attnid.training.analysis answers its five
    questions), {name: LaTeX}; the same names in every preset (a number a preset does not measure
    reads 'n/a'). The sweep's size and lists come from attnid.report.macros.training_macros."""
    good = ok(summary)
    values = {
        "TrainingDiverged": number(int(summary["diverged"].sum())),
        "TrainingChecksPassed": f"{int(checks['passed'].sum())}/{len(checks)}",
    }
    slopes = heads_slopes(summary)  # 1. overlap against H: slope of log overlap on log H (chance: -1/2)
    for opt in SLOPE_OPTIMIZERS:
        sel = slopes[(slopes["task"] == "teacher_student") & (slopes["optimizer"] == opt)]
        values[macro_name("OverlapSlope", opt)] = interval_text(estimate(sel["slope"]))
    return values | _weight_decay_macros(good, lr_summary, decay) | _optimizer_macros(good) | _effect_macros(effects)


def _weight_decay_macros(good: pd.DataFrame, lr_summary: pd.DataFrame, decay: pd.DataFrame) -> dict[str, str]:
    """2. Weight decay: predicted against measured imbalance after the last step, the overlap with and
    without balancing, and the slope of log drift on log learning rate (2 under plain SGD)."""
    qk = decay[decay["part"] == "query_key"]
    last = qk[qk["step"] == qk["step"].max()]
    values = {
        "WeightDecayPredicted": number(last["predicted"].mean(), digits=4),
        "WeightDecayMeasured": number(last["measured"].mean(), digits=4),
    }
    wd = good[(good["task"] == "teacher_student") & (good["algorithm"] == "sgd") & (good["weight_decay"] > 0)]
    for mode in ("none", "balance"):
        overlap = wd.loc[wd["rebalance"] == mode, "mean_overlap_all"].mean()
        values[macro_name("OverlapWeightDecay", mode)] = number(overlap)
    slopes = lr_slopes(lr_summary)
    for part in ("query_key", "value_output"):
        slope = estimate(slopes.loc[slopes["part"] == part, "slope"])
        values[macro_name("ConservationSlope", part)] = interval_text(slope)
    return values


def _optimizer_macros(good: pd.DataFrame) -> dict[str, str]:
    """3. Adam against one second moment per symmetry block (overlap; held-out loss paired by H and seed);
    4. the gauge-invariant overlap, Adam on the teacher-student task, with and without balancing."""
    values, free = {}, good[good["rebalance"] == "none"]
    for task, prefix in TASK_PREFIX.items():
        g = free[free["task"] == task]
        for opt in ("adam", "adam_shared", "sgd_momentum"):
            values[macro_name("Overlap", prefix, opt)] = number(g.loc[g["optimizer"] == opt, "mean_overlap_all"].mean())
        adam = g[g["optimizer"] == "adam"].set_index(["heads", "seed"])["final_eval_loss"]
        shared = g[g["optimizer"] == "adam_shared"].set_index(["heads", "seed"])["final_eval_loss"]
        values[macro_name("AdamSharedLossRatio", prefix)] = interval_text(estimate(np.log10(shared / adam).dropna()))
    ts = good[(good["task"] == "teacher_student") & (good["optimizer"] == "adam")]
    values["OverlapAdamBalance"] = number(ts.loc[ts["rebalance"] == "balance", "mean_overlap_all"].mean())
    for mode in ("none", "balance"):
        gauge = ts.loc[ts["rebalance"] == mode, "mean_overlap_gauge"].mean()
        values[macro_name("GaugeOverlapAdam", mode)] = number(gauge)
    return values


def _effect_macros(effects: pd.DataFrame) -> dict[str, str]:
    """5. Rebalancing and optimisation: the cells whose paired interval excludes zero, how many and which."""
    values = {}
    for measure, name in (("log_eval_loss", "Loss"), ("steps_to_target", "Time")):
        sel = effects[effects["measure"] == measure]
        values[macro_name("EffectCells", name)] = number(len(sel))
        values[macro_name("EffectSignificant", name)] = number(int(sel["excludes_zero"].sum()))
        listed = [
            f"{TASK_NAMES.get(r.task, r.task)}, {OPTIMIZER_NAMES.get(r.optimizer, r.optimizer)}, {r.rebalance}: "
            + interval_text({"mean": r.mean, "low": r.low, "high": r.high})
            for r in sel[sel["excludes_zero"]].itertuples()
        ]
        values[macro_name("EffectSignificantList", name)] = "; ".join(listed) or "none"
    return values
