"""The five questions of the training study, answered from the sweep's tables (no torch).

The estimates are numbers and tables; attnid.report.study.study_macros writes the ones the paper cites.

Every estimate is a mean over seeds (or over paired runs) with a 95% t-interval,
mean +- t_{0.975, n-1} s / sqrt(n) (:func:`t_interval`; the figures draw the same interval).

1. Overlap against H: per seed, the least-squares slope of log overlap against log H (rebalance
   none), per task and model; the chance level sqrt(dim T / P) = sqrt(1 / (2H)) for MHA has slope -1/2.
2. Weight decay, exactly. With u = -eta (g + lambda theta) and a loss invariant under the group, the
   conserved quantity I = Q^T Q - K^T K (and V^T V - O^T O) obeys
       I(theta') = (1 - eta lambda)^2 I(theta) + eta^2 (G_Q^T G_Q - G_K^T G_K),
   the cross term vanishing because g is orthogonal to the orbit (<theta, xi_A> = tr(I A) is the
   pairing of theta with the generator A). So ||I_t|| = (1 - eta lambda)^{2t} ||I_0|| up to the
   eta^2 term (Kunin et al., ICLR 2021), and under plain SGD the drift after a fixed number of steps
   grows as eta^2: the slope of log drift against log eta is 2 (the learning-rate study).
3. Preconditioners: Adam against adam_shared (one second moment per symmetry block), overlap and
   held-out loss side by side, paired by (H, seed).
4. Gauge: the Euclidean overlap next to the overlap at the balanced point of each iterate.
5. Rebalancing and optimisation: paired differences (mode - none, same task, model, optimizer, H and seed)
   of log10 final held-out loss and of the steps to a target loss (:func:`steps_to_target`), on pairs
   whose two runs both converged (attnid.training.sweep.converged): a difference in final loss is then a
   difference in where training ends, not in when a transition happens.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip
SMOOTH = 10  # steps in the running mean of the training loss (time to target)


def t_quantile(df: int) -> float:
    """t_{0.975, df}: the table for df <= 30, then 1.96 + 2.5 / df (within 0.002 of the exact value)."""
    return T975[df - 1] if df <= len(T975) else 1.96 + 2.5 / df


def t_interval(values) -> tuple[float, float]:
    """95% t-interval of the mean of `values` (NaN dropped); (nan, nan) with fewer than two values."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) < 2:
        return math.nan, math.nan
    half = t_quantile(len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return float(x.mean() - half), float(x.mean() + half)


def estimate(values) -> dict:
    """{mean, low, high, n} of `values` (NaN dropped)."""
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    low, high = t_interval(x)
    return {"mean": float(x.mean()) if len(x) else math.nan, "low": low, "high": high, "n": len(x)}


def ok(summary: pd.DataFrame) -> pd.DataFrame:
    """The runs that did not diverge."""
    return summary[~summary["diverged"]]


# 1 -------------------------------------------------------------------------------------------
def heads_slopes(summary: pd.DataFrame, column: str = "mean_overlap_all") -> pd.DataFrame:
    """Per task, model, optimizer and seed (rebalance none): slope of log `column` against log H; also the slope
    of the chance level (the same for every seed), `chance_slope`."""
    free = ok(summary)
    free = free[(free["rebalance"] == "none") & (free[column] > 0)]
    rows = []
    for (task, model, opt, seed), g in free.groupby(["task", "model", "optimizer", "seed"]):
        if g["heads"].nunique() >= 2:
            x = np.log(g["heads"])
            slope = np.polyfit(x, np.log(g[column]), 1)[0]
            chance = np.polyfit(x, np.log(g["chance_all"]), 1)[0]
            rows.append({"task": task, "model": model, "optimizer": opt, "seed": seed, "slope": slope,
                         "chance_slope": chance})  # fmt: skip
    return pd.DataFrame(rows, columns=["task", "model", "optimizer", "seed", "slope", "chance_slope"])


def chance_ratio(summary: pd.DataFrame) -> pd.DataFrame:
    """Per task, model, optimizer, H and seed (rebalance none): mean overlap / chance level."""
    free = ok(summary)
    free = free[free["rebalance"] == "none"]
    return free.assign(ratio=free["mean_overlap_all"] / free["chance_all"])[
        ["task", "model", "optimizer", "heads", "seed", "ratio"]
    ]


# 2 -------------------------------------------------------------------------------------------
def weight_decay_decay(metrics: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """Measured ||I_t|| / ||I_0|| against the prediction (1 - eta lambda)^{2(t+1)} (after step t), per run
    with weight decay under plain SGD and no rebalancing, of every task (the readers pick theirs by `task`);
    columns keys, part, step, measured, predicted."""
    runs = ok(summary)
    runs = runs[(runs["algorithm"] == "sgd") & (runs["weight_decay"] > 0) & (runs["rebalance"] == "none")]
    keys = ["task", "model", "optimizer", "rebalance", "heads", "seed"]
    m = metrics.merge(
        runs[[*keys, "lr", "weight_decay", "initial_imbalance_query_key", "initial_imbalance_value_output"]], on=keys
    )
    out = []
    for part in ("query_key", "value_output"):
        per = m.groupby([*keys, "step"], as_index=False).agg(
            imbalance=(f"imbalance_{part}", "mean"), initial=(f"initial_imbalance_{part}", "mean"),
            lr=("lr", "first"), weight_decay=("weight_decay", "first"),
        )  # fmt: skip
        per["part"] = part
        per["measured"] = per["imbalance"] / per["initial"]
        per["predicted"] = (1 - per["lr"] * per["weight_decay"]) ** (2 * (per["step"] + 1))
        out.append(per[[*keys, "part", "step", "measured", "predicted"]])
    return pd.concat(out, ignore_index=True)


def lr_slopes(lr_summary: pd.DataFrame) -> pd.DataFrame:
    """Per seed and part: slope of log final drift against log learning rate (plain SGD)."""
    rows = []
    for seed, g in ok(lr_summary).groupby("seed"):
        for part in ("query_key", "value_output"):
            y = g[f"final_drift_{part}"]
            keep = y > 0
            if keep.sum() >= 2:
                rows.append(
                    {"seed": seed, "part": part, "slope": np.polyfit(np.log(g["lr"][keep]), np.log(y[keep]), 1)[0]}
                )
    return pd.DataFrame(rows, columns=["seed", "part", "slope"])


# 5 -------------------------------------------------------------------------------------------
def steps_to_target(metrics: pd.DataFrame, fraction: float, converged: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per run: the first measured step whose running-mean training loss (the window means of the measured
    steps, attnid.training.metrics, over at least SMOOTH steps) is at most L_best + fraction (L_0 - L_best),
    L_0 the run's first such mean and L_best the lowest final one among the converged runs of its (task,
    model, optimizer, H) cell: the time to cover 1 - fraction of the loss reduction that the cell achieves.
    NaN when the run never gets there, and for runs that did not converge (`converged`: RUN_KEYS + a boolean
    `converged` column; None = every run)."""
    keys = ["task", "model", "optimizer", "rebalance", "heads", "seed"]
    loss = metrics.groupby([*keys, "step"], as_index=False)["loss"].mean()  # one number per run and step
    gap = loss.groupby(keys, sort=False)["step"].diff().median()
    window = max(1, math.ceil(SMOOTH / gap)) if math.isfinite(gap) and gap > 0 else SMOOTH
    loss["smooth"] = loss.groupby(keys, sort=False)["loss"].transform(
        lambda x: x.rolling(window, min_periods=window).mean()
    )
    runs = loss.groupby(keys, sort=False)["smooth"].agg(
        first=lambda x: x.dropna().iloc[0] if x.notna().any() else math.nan, last="last"
    )
    if converged is not None:
        runs = runs.join(converged.set_index(keys)["converged"])
    else:
        runs["converged"] = True
    best = runs["last"].where(runs["converged"]).groupby(["task", "model", "optimizer", "heads"]).transform("min")
    runs["target"] = best + fraction * (runs["first"] - best)
    loss = loss.join(runs["target"], on=keys)
    hit = loss[loss["smooth"] <= loss["target"]].groupby(keys)["step"].min()
    out = runs.join(hit.rename("steps_to_target").astype(float)).reset_index()
    out.loc[~out["converged"].astype(bool), "steps_to_target"] = math.nan
    return out[[*keys, "steps_to_target"]]


def paired_differences(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (task, model, optimizer, heads, seed) and mode in {project, balance}: the run's value minus the run
    without rebalancing, for log10 final held-out loss and steps to target; converged runs only (a pair with
    a run that did not converge is left out), when the summary says which (`converged`)."""
    runs = ok(summary).copy()
    if "converged" in runs:
        runs = runs[runs["converged"].astype(bool)]
    runs["log_eval_loss"] = np.log10(runs["final_eval_loss"])
    pair = ["task", "model", "optimizer", "heads", "seed"]
    base = runs[runs["rebalance"] == "none"].set_index(pair)[["log_eval_loss", "steps_to_target"]]
    out = []
    for mode in ("project", "balance"):
        other = runs[runs["rebalance"] == mode].set_index(pair)[["log_eval_loss", "steps_to_target"]]
        diff = (other - base).dropna(how="all").reset_index()
        diff["rebalance"] = mode
        out.append(diff)
    cols = [*pair, "rebalance", "log_eval_loss", "steps_to_target"]
    return pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)


def effect_table(diffs: pd.DataFrame) -> pd.DataFrame:
    """Mean paired difference with 95% interval per task, optimizer, mode and measure; `excludes_zero`."""
    rows = []
    for (task, model, opt, mode), g in diffs.groupby(["task", "model", "optimizer", "rebalance"], sort=False):
        for measure in ("log_eval_loss", "steps_to_target"):
            e = estimate(g[measure])
            excludes = e["n"] >= 2 and (e["low"] > 0 or e["high"] < 0)
            rows.append({"task": task, "model": model, "optimizer": opt, "rebalance": mode, "measure": measure, **e,
                         "excludes_zero": excludes})  # fmt: skip
    return pd.DataFrame(rows)
