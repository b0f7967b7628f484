r"""results/macros/training_report.tex: numbers of the training section that the study's own macros lack.

From the aggregated results only (no training here):
- rebalancing and optimisation (results/training/rebalance_effects.parquet, paired differences):
  a two-sided paired t-test per (task, optimizer, mode) cell and measure, Holm's step-down
  correction over the cells of each measure at family-wise level 0.05 (attnid.report.significance):
  how many cells remain and which, with their mean and 95% interval;
- the gauge-invariant overlap of plain SGD on the teacher-student task, without and with balancing
  (results/training/summary.parquet), next to Adam's (\GaugeOverlapAdam...);
- the weight-decay law (results/training/weight_decay.parquet): the value-output imbalance after the
  last step, the largest deviation of value-output from (1 - eta lambda)^{2t} over all steps, how query-key
  follows it (the first step from which it stays more than TOLERANCE above, else its largest deviation), and
  that arm's eta and lambda.
"""

import numpy as np
import pandas as pd

from attnid.report.latex import number
from attnid.report.labels import OPTIMIZER_NAMES, SETTING_NAMES
from attnid.report.study import MEASURES, effect_tests, interval_text
from attnid.training.analysis import estimate

TOLERANCE = 0.2  # relative departure of the measured imbalance from the weight-decay factor


def imbalance_ratio(part: pd.DataFrame) -> pd.Series:
    """Measured over predicted imbalance per step (means over heads and seeds), indexed by step."""
    return part.groupby("step")[["measured", "predicted"]].mean().eval("measured / predicted")


def departure_step(part: pd.DataFrame) -> float:
    """The first step from which measured / predicted stays above 1 + TOLERANCE to the end (NaN if never)."""
    ratio = imbalance_ratio(part)
    above = (ratio > 1 + TOLERANCE).to_numpy()
    if not above[-1]:
        return np.nan
    last_below = np.flatnonzero(~above)
    return float(ratio.index[last_below[-1] + 1] if len(last_below) else ratio.index[0])


def departure_text(part: pd.DataFrame) -> str:
    """How the query-key imbalance follows the factor, in words: the step from which it stays above it by more
    than TOLERANCE, or (when it does not end there) its largest deviation over all steps."""
    step = departure_step(part)
    if not np.isnan(step):
        return f"from step {number(step)} on stays more than {number(100 * TOLERANCE, '.0f')}\\% above the factor"
    ratio = imbalance_ratio(part)
    return f"stays within {number(100 * (ratio - 1).abs().max(), '.0f')}\\% of it at every step"


def values(summary: pd.DataFrame, effects: pd.DataFrame, decay: pd.DataFrame) -> dict:
    out = {}
    tests = effect_tests(effects)
    for measure, name in MEASURES.items():
        kept = tests[(tests["measure"] == measure) & tests["holm"]]
        out[f"EffectHolmSignificant{name}"] = number(len(kept))
        out[f"EffectHolmList{name}"] = "; ".join(
            f"{SETTING_NAMES.get(r.task, r.task)}, {OPTIMIZER_NAMES.get(r.optimizer, r.optimizer)}, {r.rebalance}: "
            + interval_text({"mean": r.mean, "low": r.low, "high": r.high})
            for r in kept.itertuples()
        ) or "none"
    runs = summary[~summary["diverged"] & (summary["task"] == "teacher_student") & (summary["optimizer"] == "sgd")]
    for mode, name in (("none", "None"), ("balance", "Balance")):
        out[f"GaugeOverlapSgd{name}"] = number(runs.loc[runs["rebalance"] == mode, "mean_overlap_gauge"].mean())
    paired = runs.pivot_table(index=["heads", "seed"], columns="rebalance", values="mean_overlap_gauge")
    diff = paired["balance"] - paired["none"] if {"none", "balance"} <= set(paired.columns) else pd.Series(dtype=float)
    out["GaugeOverlapSgdDiff"] = interval_text(estimate(diff.dropna()))
    decay = decay[decay["task"] == "teacher_student"]
    vo = decay[decay["part"] == "value_output"]
    ratio = imbalance_ratio(vo)
    out["WeightDecayMeasuredValueOutput"] = number(vo.loc[vo["step"] == vo["step"].max(), "measured"].mean(), digits=4)
    out["WeightDecayValueOutputMaxDeviation"] = number(100 * (ratio - 1).abs().max(), ".0f")
    out["WeightDecayQueryKeyDeparture"] = departure_text(decay[decay["part"] == "query_key"])
    arm = summary[(summary["algorithm"] == "sgd") & (summary["weight_decay"] > 0) & (summary["rebalance"] == "none")]
    arm = arm[arm["task"] == "teacher_student"]
    out["WeightDecayLearningRate"] = number(arm["lr"].iloc[0]) if len(arm) else "n/a"
    out["WeightDecayLambda"] = number(arm["weight_decay"].iloc[0]) if len(arm) else "n/a"
    return out


if __name__ == "__main__" and "snakemake" in globals():
    from attnid.io import atomic_write_text, log_to, read_result
    from attnid.report.macros import fragment

    log = log_to(snakemake.log[0])
    inp = snakemake.input
    summary, effects, decay = read_result(inp.summary), read_result(inp.effects), read_result(inp.decay)
    with pd.option_context("display.width", 200):
        log.info("paired tests with Holm's correction:\n%s", effect_tests(effects).to_string(index=False))
    result = values(summary, effects, decay)
    atomic_write_text(snakemake.output[0], fragment(result, "workflow/scripts/training_report_macros.py"))
    log.info("%s", result)
