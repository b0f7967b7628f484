"""The training sweep: config section `training:` -> run configs; per-run results -> aggregates.

Config (validated by workflow/schemas/config.schema.yaml): global options (seeds, rebalance modes,
intervals, measurement sizes, dtype, check thresholds) and per task its sizes, head counts and
optimizers. An optimizer entry has a label (the `optimizer` wildcard, e.g. `sgd_wd`) and an
algorithm in {sgd, sgd_momentum, adam, adamw} with its lr, weight_decay and momentum, so that
"SGD with weight decay" is its own arm of the sweep.

Sanity checks (`sanity_checks`): what the geometry predicts, measured on the sweep's own numbers,
never assumed:
  * plain SGD (no momentum, no weight decay): every update's overlap <= `rounding`;
  * momentum, Adam/AdamW, weight decay (rebalance none): mean overlap >= `nonzero`;
  * `project`: every applied update's overlap <= `rounding`;
  * `balance`: every rebalance changes the model's output by <= `rounding` (relative).
"""

from __future__ import annotations

import math
from itertools import product

import pandas as pd

from .latex import booktabs, macros, scientific
from .train import RunConfig

RUN_KEYS = ("task", "optimizer", "rebalance", "heads", "seed")  # the wildcards of one run
TASK_FIELDS = {  # config key -> RunConfig field, per task (heads, steps, optimizers handled apart)
    "teacher_student": ("d_model", "seq_len", "batch", "steps"),
    "recall": ("d_model", "batch", "steps", "vocab", "pairs", "n_layers", "norm", "mlp_ratio", "causal"),
}
GLOBAL_FIELDS = ("rebalance_interval", "eval_every", "eval_batch", "probe_batch", "metrics_every", "dtype")


def task_section(training: dict, task: str) -> dict:
    """The `tasks` entry of one task (tasks and optimizers are lists, so presets replace them whole)."""
    for section in training["tasks"]:
        if section["task"] == task:
            return section
    raise KeyError(f"training.tasks has no entry for task {task!r}")


def optimizer_entry(section: dict, name: str) -> dict:
    for entry in section["optimizers"]:
        if entry["name"] == name:
            return entry
    raise KeyError(f"training.tasks[{section['task']}].optimizers has no optimizer named {name!r}")


def runs(training: dict) -> list[dict]:
    """Wildcards of every run of the sweep: dicts with keys RUN_KEYS, in a stable order."""
    out = []
    for section in training["tasks"]:
        names = [entry["name"] for entry in section["optimizers"]]
        for optimizer, rebalance, heads, seed in product(names, training["rebalance"], section["heads"], training["seeds"]):
            out.append({"task": section["task"], "optimizer": optimizer, "rebalance": rebalance, "heads": heads, "seed": seed})
    return out


def run_config(training: dict, device: str, task: str, optimizer: str, rebalance: str, heads, seed) -> RunConfig:
    """The RunConfig of one run of the sweep (wildcards as strings or ints)."""
    section = task_section(training, task)
    opt = optimizer_entry(section, optimizer)
    fields = {f: section[f] for f in TASK_FIELDS[task] if f in section}
    fields.update({f: training[f] for f in GLOBAL_FIELDS if f in training})
    return RunConfig(
        task=task, heads=int(heads), seed=int(seed), rebalance=rebalance, device=device,
        optimizer=opt["algorithm"], lr=opt["lr"], weight_decay=opt.get("weight_decay", 0.0),
        momentum=opt.get("momentum", 0.9), name=f"{task}/{optimizer}/{rebalance}/h{heads}/s{seed}",
        **fields,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------------

SUMMARY_COLUMNS = (
    *RUN_KEYS, "algorithm", "lr", "weight_decay", "steps", "final_loss", "final_eval_loss", "final_eval_accuracy",
    "mean_overlap_all", "mean_overlap_query_key", "mean_overlap_value_output", "max_overlap_all", "chance_all",
    "max_rebalance_function_change", "mean_rebalance_norm_removed", "final_drift_query_key",
    "final_drift_value_output", "mean_update_norm", "seconds",
)  # fmt: skip


def summary_row(wildcards: dict, cfg: RunConfig, summary: dict) -> dict:
    """One row of summary.parquet (also the per-run summary.json, plus the full config)."""
    row = {k: wildcards[k] for k in RUN_KEYS}
    row.update(heads=int(row["heads"]), seed=int(row["seed"]), algorithm=cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay)
    row.update({k: summary[k] for k in SUMMARY_COLUMNS if k in summary})
    return {**{k: row.get(k, math.nan) for k in SUMMARY_COLUMNS}, "config": cfg.to_dict()}


def with_run_keys(metrics: pd.DataFrame, wildcards: dict) -> pd.DataFrame:
    """The per-run metrics with the run's identity as leading columns (long format of metrics.parquet)."""
    keys = {k: wildcards[k] for k in RUN_KEYS}
    keys.update(heads=int(keys["heads"]), seed=int(keys["seed"]))
    return pd.concat([pd.DataFrame({k: [v] * len(metrics) for k, v in keys.items()}), metrics.reset_index(drop=True)], axis=1)


def plain_sgd(summary: pd.DataFrame) -> pd.Series:
    return (summary["algorithm"] == "sgd") & (summary["weight_decay"] == 0)


def sanity_checks(summary: pd.DataFrame, rounding: float, nonzero: float) -> pd.DataFrame:
    """The geometry's predictions as measured numbers: one row per check (see the module docstring).

    Columns: check, runs (how many runs it covers), measured (the worst value over those runs),
    threshold, passed. A check that covers no run is reported with runs = 0 and passed = True.
    """
    sgd = plain_sgd(summary)
    free = summary["rebalance"] == "none"
    rows = [
        ("plain SGD overlap at rounding", summary[sgd], "max_overlap_all", "max", "<=", rounding),
        ("momentum/Adam/weight decay overlap non-zero", summary[~sgd & free], "mean_overlap_all", "min", ">=", nonzero),
        ("project overlap at rounding", summary[summary["rebalance"] == "project"], "max_overlap_all", "max", "<=", rounding),
        ("balance keeps the function", summary[summary["rebalance"] == "balance"], "max_rebalance_function_change", "max", "<=", rounding),
    ]
    out = []
    for name, runs_, column, worst, op, threshold in rows:
        values = runs_[column]
        measured = float(getattr(values, worst)()) if len(values) else math.nan
        within = values <= threshold if op == "<=" else values >= threshold  # NaN (not measured) fails
        ok = bool(within.all())
        out.append({"check": name, "runs": len(values), "measured": measured, "relation": op, "threshold": threshold, "passed": bool(ok)})
    return pd.DataFrame(out)


def overlap_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Mean overlap (over seeds) by task, optimizer, H and rebalancing mode, with the chance level."""
    keys = ["task", "optimizer", "heads"]
    wide = summary.pivot_table(index=keys, columns="rebalance", values="mean_overlap_all", aggfunc="mean")
    wide = wide.reindex(columns=[m for m in ("none", "project", "balance") if m in wide.columns])
    wide.columns = [f"overlap_{m}" for m in wide.columns]
    extra = summary.groupby(keys).agg(chance=("chance_all", "mean"), final_eval_loss=("final_eval_loss", "mean"))
    order = {name: i for i, name in enumerate(summary["optimizer"].drop_duplicates())}
    table = wide.join(extra).reset_index()
    return table.sort_values(["task", "optimizer", "heads"], key=lambda s: s.map(order) if s.name == "optimizer" else s).reset_index(drop=True)


def table_tex(table: pd.DataFrame) -> str:
    """booktabs LaTeX of `overlap_table` with readable headers and scientific numbers."""
    names = {"task": "task", "optimizer": "optimizer", "heads": "$H$", "overlap_none": "overlap",
             "overlap_project": "overlap (project)", "overlap_balance": "overlap (balance)", "chance": "chance",
             "final_eval_loss": "eval loss"}  # fmt: skip
    shown = table.rename(columns=names)
    formats = {names[c]: ".1e" for c in table.columns if c.startswith("overlap") or c == "final_eval_loss"}
    formats[names["chance"]] = ".3f"
    return booktabs(shown, formats=formats)


def macro_name(label: str) -> str:
    """'sgd_momentum' -> 'SGDMomentum', 'adamw' -> 'AdamW' (letters only, for LaTeX)."""
    special = {"sgd": "SGD", "wd": "WD", "adamw": "AdamW", "adam": "Adam"}
    return "".join(special.get(part, part.capitalize()) for part in label.split("_"))


def sci(value: float) -> str:
    r"""A number for running text: 0.153 -> '0.15', 7.7e-15 -> '7.7\times10^{-15}' inside \ensuremath."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if value == 0 or 1e-2 <= abs(value) < 1e3:
        return f"{value:.2g}"
    return scientific(value)


def training_macros(summary: pd.DataFrame, checks: pd.DataFrame) -> str:
    r"""\newcommand lines: mean overlap per optimizer (rebalance none; teacher-student as \Overlap<Opt>,
    other tasks as \Overlap<Task><Opt>), the largest overlap under project, the largest function change
    of a rebalance, the number of runs and of passed checks."""
    values = {}
    free = summary[summary["rebalance"] == "none"]
    for (task, opt), group in free.groupby(["task", "optimizer"], sort=False):
        prefix = "" if task == "teacher_student" else macro_name(task)
        values[f"Overlap{prefix}{macro_name(opt)}"] = sci(group["mean_overlap_all"].mean())
    project = summary[summary["rebalance"] == "project"]["max_overlap_all"]
    balance = summary[summary["rebalance"] == "balance"]["max_rebalance_function_change"]
    values["OverlapProjectMax"] = sci(project.max() if len(project) else math.nan)
    values["RebalanceFunctionChangeMax"] = sci(balance.max() if len(balance) else math.nan)
    values["TrainingRuns"] = str(len(summary))
    values["TrainingChecksPassed"] = f"{int(checks['passed'].sum())}/{len(checks)}"
    return macros(values)
