"""The training sweep's results: per-run metrics -> run summaries -> checks and the overlap table.

The run list and run configs are torch-free data (attnid.training.runs); this module turns what
the runs measured into the aggregates the figures, tables and paper read (attnid.report writes
them as LaTeX).

Sanity checks (`sanity_checks`): what the geometry predicts, measured on the sweep's own numbers,
never assumed:
  * plain SGD (no momentum, no weight decay): every update's overlap <= `rounding`;
  * momentum, Adam/AdamW, weight decay (rebalance none): mean overlap >= `nonzero`;
  * `project`: every applied update's overlap <= `rounding`;
  * `balance`: every rebalance changes the model's output by <= `rounding` (relative);
  * convergence (:func:`converged`): in every (task, model, optimizer, H) cell at least a fraction
    `min_converged` of the runs converged; final losses and times to target are reported on converged
    runs only.
"""

from __future__ import annotations

import math

import pandas as pd

from .runs import RUN_KEYS, RunConfig


def summarize_run(metrics: pd.DataFrame, steps: int) -> dict:
    """Per-run numbers from its measured steps (means over the measured steps and layers; NaN-aware).

    Whole-model overlaps (`overlap_model*`, runs of real architectures) are averaged the same way. The
    held-out plateau (:func:`plateau_change`) is added by the trainers, which know the loss after the last step.
    """
    last_step = metrics[metrics["step"] == metrics["step"].max()]

    def mean(col, frame=metrics):
        return float(frame[col].mean()) if col in frame and frame[col].notna().any() else math.nan

    def maximum(col):
        return float(metrics[col].max()) if metrics[col].notna().any() else math.nan

    out = {
        "final_loss": mean("loss", last_step),
        "mean_overlap_all": mean("overlap_all"),
        "mean_overlap_query_key": mean("overlap_query_key"),
        "mean_overlap_value_output": mean("overlap_value_output"),
        "max_overlap_all": maximum("overlap_all"),
        "mean_update_norm": mean("update_norm"),
        "max_rebalance_function_change": maximum("rebalance_function_change"),
        "mean_rebalance_norm_removed": mean("rebalance_norm_removed"),
        "final_drift_query_key": mean("drift_query_key", last_step),
        "final_drift_value_output": mean("drift_value_output", last_step),
        "mean_overlap_gauge": mean("overlap_gauge"),
    }
    for col in metrics.columns:
        if col.startswith("overlap_model"):
            out[f"mean_{col}"] = mean(col)
            out[f"max_{col}"] = float(metrics[col].max()) if metrics[col].notna().any() else math.nan
    return out


def plateau_change(metrics: pd.DataFrame, final_eval_loss: float, steps: int) -> float:
    """(L_start - L_end) / L_end over the last fifth of training: L_start the mean held-out loss at the
    evaluations in [0.7 S, 0.8 S] (the last one before 0.8 S if none), L_end the mean of those in [0.9 S, S)
    and the one after the last step. Positive: still falling. NaN when there is no evaluation before 0.8 S."""
    evals = metrics.dropna(subset=["eval_loss"]).groupby("step")["eval_loss"].mean()
    start = evals[(evals.index >= 0.7 * steps) & (evals.index <= 0.8 * steps)]
    if not len(start):
        start = evals[evals.index <= 0.8 * steps].iloc[-1:]
    end = [*evals[evals.index >= 0.9 * steps].tolist(), final_eval_loss]
    end = [x for x in end if math.isfinite(x)]
    if not len(start) or not end:
        return math.nan
    late = sum(end) / len(end)
    return float((start.mean() - late) / late)


SUMMARY_COLUMNS = (
    *RUN_KEYS, "kind", "d_model", "d_head", "n_layers", "algorithm", "lr", "weight_decay", "steps", "parameters", "final_loss", "final_eval_loss",
    "final_eval_accuracy", "loss_floor", "plateau_change", "mean_overlap_all", "mean_overlap_query_key",
    "mean_overlap_value_output", "max_overlap_all", "chance_all", "chance_query_key", "chance_value_output",
    "max_rebalance_function_change", "mean_rebalance_norm_removed", "final_drift_query_key",
    "final_drift_value_output", "mean_update_norm", "mean_overlap_gauge", "initial_imbalance_query_key",
    "initial_imbalance_value_output", "diverged", "diverged_step", "seconds",
)  # fmt: skip


def summary_row(wildcards: dict, cfg: RunConfig, summary: dict) -> dict:
    """One row of summary.parquet (and the full config under `config`); whole-model overlaps kept as they come."""
    row = {k: wildcards[k] for k in RUN_KEYS}
    row.update(
        heads=int(row["heads"]),
        seed=int(row["seed"]),
        kind=cfg.task,
        d_model=cfg.attention.d_model,
        d_head=cfg.attention.d_head_qk,
        n_layers=cfg.n_layers if cfg.task != "teacher_student" else 1,
        algorithm=cfg.algorithm,
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
    )
    row.update({k: summary[k] for k in SUMMARY_COLUMNS if k in summary})
    row["diverged_step"] = int(summary.get("diverged_step", -1))
    row["diverged"] = row["diverged_step"] >= 0
    extra = {k: v for k, v in summary.items() if "overlap_model" in k}
    return {**{k: row.get(k, math.nan) for k in SUMMARY_COLUMNS}, **extra, "config": cfg.to_dict()}


def plain_sgd(summary: pd.DataFrame) -> pd.Series:
    return (summary["algorithm"] == "sgd") & (summary["weight_decay"] == 0)


def converged(summary: pd.DataFrame, plateau: float, accuracy: float) -> pd.Series:
    """A run has converged when (recall) its final held-out accuracy is at least `accuracy` (the task is
    solvable exactly), or (teacher-student, Markov chain: losses with a floor) its held-out loss changed by
    less than `plateau` (relative) over the last fifth of training (:func:`plateau_change`). Diverged runs
    have not. The criterion follows the task's kind (a sweep's name may differ from it)."""
    recall = summary["kind" if "kind" in summary else "task"] == "recall"
    solved = summary["final_eval_accuracy"] >= accuracy
    flat = summary["plateau_change"].abs() < plateau
    return ~summary["diverged"] & ((recall & solved) | (~recall & flat))


CELL = ["task", "model", "optimizer", "heads"]


def convergence_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (task, model, optimizer, H): runs, converged runs and their fraction (rebalancing modes and seeds)."""
    g = summary.groupby(CELL, sort=False)["converged"]
    return g.agg(runs="size", converged="sum").assign(fraction=lambda d: d["converged"] / d["runs"]).reset_index()


def sanity_checks(
    summary: pd.DataFrame, rounding: float, nonzero: float, min_converged: float | None = None
) -> pd.DataFrame:
    """The geometry's predictions and the runs' convergence as measured numbers: one row per check.

    Columns: check, runs (how many runs it covers), measured (the worst value over those runs),
    threshold, passed. A check that covers no run is reported with runs = 0 and passed = True.
    Diverged runs are left out (they are counted by :func:`diverged_runs`). `rounding` is absolute
    (attnid.training.sweep callers pass k eps of the runs' dtype). The whole-model overlap of plain SGD
    (real architectures, where the whole-model gauge is measured) is checked against `rounding` too.
    """
    summary = summary[~summary["diverged"]]
    sgd = plain_sgd(summary)
    free = summary["rebalance"] == "none"
    rows = [
        ("plain SGD overlap at rounding", summary[sgd], "max_overlap_all", "max", "<=", rounding),
        ("momentum/Adam/weight decay overlap non-zero", summary[~sgd & free], "mean_overlap_all", "min", ">=", nonzero),
        ("project overlap at rounding", summary[summary["rebalance"] == "project"], "max_overlap_all", "max", "<=", rounding),
        ("balance keeps the function", summary[summary["rebalance"] == "balance"], "max_rebalance_function_change",
         "max", "<=", rounding),
    ]  # fmt: skip
    if "max_overlap_model" in summary:
        model_sgd = summary[sgd & summary["max_overlap_model"].notna()]
        rows.append(("plain SGD whole-model overlap at rounding", model_sgd, "max_overlap_model", "max", "<=", rounding))
    out = []
    for name, runs_, column, worst, op, threshold in rows:
        values = runs_[column]
        measured = float(getattr(values, worst)()) if len(values) else math.nan
        within = values <= threshold if op == "<=" else values >= threshold  # NaN (not measured) fails
        out.append({"check": name, "runs": len(values), "measured": measured, "relation": op,
                    "threshold": threshold, "passed": bool(within.all())})  # fmt: skip
    if min_converged is not None and "converged" in summary:
        table = convergence_table(summary)
        worst = table.loc[table["fraction"].idxmin()] if len(table) else None
        out.append({"check": "converged runs in every (task, model, optimizer, H) cell", "runs": int(table["runs"].sum()),
                    "measured": float(worst["fraction"]) if worst is not None else math.nan, "relation": ">=",
                    "threshold": min_converged, "passed": bool((table["fraction"] >= min_converged).all())})  # fmt: skip
    return pd.DataFrame(out)


def diverged_runs(summary: pd.DataFrame) -> pd.DataFrame:
    """The runs whose loss stopped being finite, with the step (kept in the summary, marked in figures)."""
    return summary.loc[summary["diverged"], [*RUN_KEYS, "diverged_step"]].reset_index(drop=True)


def overlap_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Mean overlap (over seeds) by task, model, optimizer, H and rebalancing mode, with the chance level."""
    keys = ["task", "model", "optimizer", "heads"]
    wide = summary.pivot_table(index=keys, columns="rebalance", values="mean_overlap_all", aggfunc="mean")
    wide = wide.reindex(columns=[m for m in ("none", "project", "balance") if m in wide.columns])
    wide.columns = [f"overlap_{m}" for m in wide.columns]
    extra = summary.groupby(keys).agg(chance=("chance_all", "mean"), final_eval_loss=("final_eval_loss", "mean"))
    order = {name: i for i, name in enumerate(summary["optimizer"].drop_duplicates())}
    table = wide.join(extra).reset_index()
    return table.sort_values(
        ["task", "model", "optimizer", "heads"], key=lambda s: s.map(order) if s.name == "optimizer" else s
    ).reset_index(drop=True)
