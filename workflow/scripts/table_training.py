r"""results/tables/training_summary.{tex,csv}: the training study per task, model and optimizer, in display names.

Reads results/training/summary.parquet (one row per run; diverged runs left out). One row per setting (a
task and the model that learns it) and optimizer, means over head counts and seeds: the mean overlap
||P_T u|| / ||u|| of the updates without rebalancing and with `balance`, the gauge-invariant overlap (at the
balanced point) without and with `balance`, and the final held-out loss under each rebalancing mode, over
the converged runs only (attnid.training.sweep.converged). Plain SGD's Euclidean overlap is float rounding;
it is printed as it was measured.
"""

import textwrap

import pandas as pd

from attnid.report.latex import escape, number
from attnid.report.labels import OPTIMIZER_NAMES, REBALANCE_NAMES, SETTING_NAMES, ordered, with_settings

TASK_ORDER = list(SETTING_NAMES)
NAME_WIDTH = 16  # characters a line of a setting's name ("teacher-student, fixed head size" takes two)
MODE_HEADS = {"none": "none", "project": "project", "balance": "balance"}  # under "final training loss"


def cell(x) -> str:
    """Three decimals; a value below 10^-3 (plain SGD's overlap: float rounding) in scientific notation."""
    return number(x) if abs(x) < 1e-3 else number(x, ".3f")


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The table as numbers (columns task, optimizer, overlap_<mode>, gauge_<mode>, loss_<mode>), raw ids kept."""
    runs = with_settings(summary[~summary["diverged"]])
    cell = runs.groupby(["task", "optimizer", "rebalance"])[["mean_overlap_all", "mean_overlap_gauge"]]
    means = cell.mean().unstack("rebalance")
    done = runs[runs["converged"].astype(bool)] if "converged" in runs else runs
    losses = done.groupby(["task", "optimizer", "rebalance"])["final_eval_loss"].mean().unstack("rebalance")
    rows = []
    for task in ordered(runs["task"], TASK_ORDER):
        for opt in ordered(runs.loc[runs["task"] == task, "optimizer"], list(OPTIMIZER_NAMES)):
            m = means.loc[(task, opt)]
            row = {"task": task, "optimizer": opt}
            for mode in ("none", "balance"):
                row[f"overlap_{mode}"] = m.get(("mean_overlap_all", mode))
                row[f"gauge_{mode}"] = m.get(("mean_overlap_gauge", mode))
            for mode in ordered(runs["rebalance"], list(REBALANCE_NAMES)):
                row[f"loss_{mode}"] = losses.loc[(task, opt)].get(mode) if (task, opt) in losses.index else float("nan")
            rows.append(row)
    return pd.DataFrame(rows)


def name_lines(name: str, rows: int) -> list[str]:
    """`name` wrapped to NAME_WIDTH characters, at most `rows` lines (the last takes what is left)."""
    lines = textwrap.wrap(name, NAME_WIDTH) or [""]
    return lines if len(lines) <= rows else lines[: rows - 1] + [" ".join(lines[rows - 1 :])]


def latex(table: pd.DataFrame) -> str:
    """booktabs LaTeX of :func:`summary_table`: display names, a two-level header, a rule between the tasks. A
    setting's name is set down its rows, one line each (:func:`name_lines`), so a long name widens nothing and
    adds no height."""
    modes = [c.removeprefix("loss_") for c in table.columns if c.startswith("loss_")]
    cols = ["overlap_none", "overlap_balance", "gauge_none", "gauge_balance", *[f"loss_{m}" for m in modes]]
    heads = ["none", "balance", "none", "balance", *[MODE_HEADS.get(m, m) for m in modes]]
    lines = [
        rf"\begin{{tabular}}{{ll{'r' * len(cols)}}}",
        r"\toprule",
        r" & & \multicolumn{2}{c}{overlap} & \multicolumn{2}{c}{gauge-invariant overlap}"
        + rf" & \multicolumn{{{len(modes)}}}{{c}}{{final held-out loss (converged runs)}} \\",
        rf"\cmidrule(lr){{3-4}}\cmidrule(lr){{5-6}}\cmidrule(lr){{7-{6 + len(modes)}}}",
        "task & optimizer & " + " & ".join(heads) + r" \\",
    ]
    for task, rows in table.groupby("task", sort=False):
        lines.append(r"\midrule")
        names = name_lines(escape(SETTING_NAMES.get(task, task)), len(rows))
        for i, row in enumerate(rows.itertuples(index=False)):
            name = names[i] if i < len(names) else ""
            cells = [cell(getattr(row, c)) for c in cols]
            lines.append(" & ".join([name, escape(OPTIMIZER_NAMES.get(row.optimizer, row.optimizer)), *cells]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)


if __name__ == "__main__" and "snakemake" in globals():
    from attnid.io import atomic_write_csv, atomic_write_text, log_to, read_result

    log = log_to(snakemake.log[0])
    table = summary_table(read_result(snakemake.input.summary))
    atomic_write_csv(snakemake.output.csv, table)
    atomic_write_text(snakemake.output.tex, latex(table))
    log.info("\n%s", table.to_string(index=False))
