"""The training sweep's results: per-run metrics -> run summaries -> checks and the overlap table.

The run list and run configs are torch-free data (attnid.training.runs); this module turns what
the runs measured into the aggregates the figures, tables and paper read (attnid.report writes
them as LaTeX).

Sanity checks (`sanity_checks`): what the geometry predicts, measured on the sweep's own numbers,
never assumed:
  * plain SGD (no momentum, no weight decay): every update's overlap <= `rounding`;
  * momentum, Adam/AdamW, weight decay (rebalance none): mean overlap >= `nonzero`;
  * `project`: every applied update's overlap <= `rounding`;
  * `balance`: every rebalance changes the model's output by <= `rounding` (relative).
"""

from __future__ import annotations

import math

import pandas as pd

from .runs import RUN_KEYS, RunConfig


def summarize_run(metrics: pd.DataFrame) -> dict:
    """Per-run numbers from the per-step metrics (means over steps and layers; NaN-aware)."""
    last_step = metrics[metrics["step"] == metrics["step"].max()]

    def mean(col, frame=metrics):
        return float(frame[col].mean()) if frame[col].notna().any() else math.nan

    def maximum(col):
        return float(metrics[col].max()) if metrics[col].notna().any() else math.nan

    return {
        "final_loss": mean("loss", last_step),
        "mean_overlap_all": mean("overlap_all"),
        "mean_overlap_query_key": mean("overlap_query_key"),
        "mean_overlap_value_output": mean("overlap_value_output"),
        "max_overlap_all": maximum("overlap_all"),
        "chance_all": mean("chance_all"),
        "mean_update_norm": mean("update_norm"),
        "max_rebalance_function_change": maximum("rebalance_function_change"),
        "mean_rebalance_norm_removed": mean("rebalance_norm_removed"),
        "final_drift_query_key": mean("drift_query_key", last_step),
        "final_drift_value_output": mean("drift_value_output", last_step),
        **({"mean_overlap_gauge": mean("overlap_gauge")} if "overlap_gauge" in metrics else {}),
    }


SUMMARY_COLUMNS = (
    *RUN_KEYS, "algorithm", "lr", "weight_decay", "steps", "final_loss", "final_eval_loss", "final_eval_accuracy",
    "mean_overlap_all", "mean_overlap_query_key", "mean_overlap_value_output", "max_overlap_all", "chance_all",
    "max_rebalance_function_change", "mean_rebalance_norm_removed", "final_drift_query_key",
    "final_drift_value_output", "mean_update_norm", "mean_overlap_gauge", "initial_imbalance_query_key",
    "initial_imbalance_value_output", "diverged", "diverged_step", "seconds",
)  # fmt: skip


def summary_row(wildcards: dict, cfg: RunConfig, summary: dict) -> dict:
    """One row of summary.parquet (and the full config under `config`)."""
    row = {k: wildcards[k] for k in RUN_KEYS}
    row.update(
        heads=int(row["heads"]),
        seed=int(row["seed"]),
        algorithm=cfg.algorithm,
        lr=cfg.lr,
        weight_decay=cfg.weight_decay,
    )
    row.update({k: summary[k] for k in SUMMARY_COLUMNS if k in summary})
    row["diverged_step"] = int(summary.get("diverged_step", -1))
    row["diverged"] = row["diverged_step"] >= 0
    return {**{k: row.get(k, math.nan) for k in SUMMARY_COLUMNS}, "config": cfg.to_dict()}


def plain_sgd(summary: pd.DataFrame) -> pd.Series:
    return (summary["algorithm"] == "sgd") & (summary["weight_decay"] == 0)


def sanity_checks(summary: pd.DataFrame, rounding: float, nonzero: float) -> pd.DataFrame:
    """The geometry's predictions as measured numbers: one row per check (see the module docstring).

    Columns: check, runs (how many runs it covers), measured (the worst value over those runs),
    threshold, passed. A check that covers no run is reported with runs = 0 and passed = True.
    Diverged runs are left out (they are counted by :func:`diverged_runs`).
    """
    summary = summary[~summary["diverged"]]
    sgd = plain_sgd(summary)
    free = summary["rebalance"] == "none"
    rows = [
        ("plain SGD overlap at rounding", summary[sgd], "max_overlap_all", "max", "<=", rounding),
        ("momentum/Adam/weight decay overlap non-zero", summary[~sgd & free], "mean_overlap_all", "min", ">=", nonzero),
        (
            "project overlap at rounding",
            summary[summary["rebalance"] == "project"],
            "max_overlap_all",
            "max",
            "<=",
            rounding,
        ),
        (
            "balance keeps the function",
            summary[summary["rebalance"] == "balance"],
            "max_rebalance_function_change",
            "max",
            "<=",
            rounding,
        ),
    ]
    out = []
    for name, runs_, column, worst, op, threshold in rows:
        values = runs_[column]
        measured = float(getattr(values, worst)()) if len(values) else math.nan
        within = values <= threshold if op == "<=" else values >= threshold  # NaN (not measured) fails
        ok = bool(within.all())
        out.append(
            {
                "check": name,
                "runs": len(values),
                "measured": measured,
                "relation": op,
                "threshold": threshold,
                "passed": bool(ok),
            }
        )
    return pd.DataFrame(out)


def diverged_runs(summary: pd.DataFrame) -> pd.DataFrame:
    """The runs whose loss stopped being finite, with the step (kept in the summary, marked in figures)."""
    return summary.loc[summary["diverged"], [*RUN_KEYS, "diverged_step"]].reset_index(drop=True)


def overlap_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Mean overlap (over seeds) by task, optimizer, H and rebalancing mode, with the chance level."""
    keys = ["task", "optimizer", "heads"]
    wide = summary.pivot_table(index=keys, columns="rebalance", values="mean_overlap_all", aggfunc="mean")
    wide = wide.reindex(columns=[m for m in ("none", "project", "balance") if m in wide.columns])
    wide.columns = [f"overlap_{m}" for m in wide.columns]
    extra = summary.groupby(keys).agg(chance=("chance_all", "mean"), final_eval_loss=("final_eval_loss", "mean"))
    order = {name: i for i, name in enumerate(summary["optimizer"].drop_duplicates())}
    table = wide.join(extra).reset_index()
    return table.sort_values(
        ["task", "optimizer", "heads"], key=lambda s: s.map(order) if s.name == "optimizer" else s
    ).reset_index(drop=True)
