"""Shared helpers of the figure scripts: logging, bias labels, and mean-and-band over seeds.

Imported by workflow/scripts/fig_*.py (Snakemake puts this folder on sys.path) and by the tests.
Figures read aggregated results only; nothing here computes a result.
"""

import logging
import sys
from pathlib import Path

import numpy as np
import pandas as pd

# Display names for the training sweep's categorical values (unknown values are shown as they are).
OPTIMIZER_NAMES = {"sgd": "SGD", "sgd_wd": "SGD + weight decay", "sgd_momentum": "SGD + momentum", "adam": "Adam", "adamw": "AdamW"}
REBALANCE_NAMES = {"none": "no rebalancing", "project": "project out", "balance": "balance"}
TASK_NAMES = {"teacher_student": "teacher-student", "teacher-student": "teacher-student"}
LINESTYLES = ["-", "--", "-.", (0, (3, 1, 1, 1, 1, 1))]  # by rebalancing mode
CHANCE_STYLE = (0, (1, 2))  # dotted: chance levels


def start_log(snakemake) -> logging.Logger:
    """A logger writing to the rule's log file; warnings (stderr) go there too."""
    sys.stderr = open(snakemake.log[0], "w")  # noqa: SIM115 - matplotlib/pandas warnings land in the log
    log = logging.getLogger("figure")
    log.addHandler(logging.StreamHandler(sys.stderr))
    log.setLevel(logging.INFO)
    return log


def bias_label(biases) -> str:
    """Canonical bias string: '' for no bias ('none', NaN, '' all map to '')."""
    if biases is None or (isinstance(biases, float) and np.isnan(biases)):
        return ""
    text = str(biases).strip().lower()
    return "" if text in ("", "none", "nan") else text


def ordered(values, order) -> list:
    """The distinct `values`, those named in `order` first (in that order), the rest sorted."""
    present = list(dict.fromkeys(values))
    return [v for v in order if v in present] + sorted(v for v in present if v not in order)


def seed_band(df: pd.DataFrame, by: list[str], value: str, x: str = "step") -> pd.DataFrame:
    """Mean and range over seeds of `value` against `x`, per group `by`.

    Rows of several layers of one run are averaged first (one number per run and step), then
    across seeds: columns by + [x, mean, low, high, n_seeds], where low/high are the min/max over seeds.
    """
    per_run = df.groupby([*by, "seed", x], as_index=False)[value].mean()  # one value per (run, step)
    grouped = per_run.groupby([*by, x])[value]
    out = grouped.agg(mean="mean", low="min", high="max", n_seeds="count").reset_index()
    return out.sort_values([*by, x]).reset_index(drop=True)


def at_largest_heads(df: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The rows of each task's largest head count (figures that show one H per task), and
    {task: that H}."""
    largest = df.groupby("task")["heads"].max().to_dict()
    return df[df["heads"] == df["task"].map(largest)], largest


def label_grid(axes, rows: list[str], cols: list[str], ylabel: str) -> None:
    """Column titles on the top row, 'row name' + ylabel on the left column, x label on the bottom;
    panels without data (a combination the preset does not sweep) say so."""
    for ax in axes.flat:
        if not any(len(ln.get_xdata()) > 2 for ln in ax.lines):  # axhline has 2 points
            ax.text(0.5, 0.5, "not run", transform=ax.transAxes, ha="center", va="center", color="0.5")
    for j, col in enumerate(cols):
        axes[0, j].set_title(col, fontsize=7)
    for i, row in enumerate(rows):
        axes[i, 0].set_ylabel(f"{row}\n{ylabel}")
    for ax in axes[-1, :]:
        ax.set_xlabel("step")


def read_table(path) -> pd.DataFrame:
    """An aggregated result: CSV or Parquet by the file's suffix."""
    return pd.read_parquet(path) if Path(path).suffix == ".parquet" else pd.read_csv(path)


def main(snakemake, plot) -> None:
    """Glue of every figure rule: read each named input (except `helper`), call
    plot(**tables) and save the figure to output.pdf and output.png."""
    from attnid.plotting import save

    log = start_log(snakemake)
    tables = {name: read_table(path) for name, path in snakemake.input.items() if name != "helper"}
    for name, df in tables.items():
        log.info("%s: %d rows, columns %s", name, len(df), ", ".join(df.columns))
    save(plot(**tables), snakemake.output.pdf, snakemake.output.png)
