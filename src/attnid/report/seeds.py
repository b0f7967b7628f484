"""Statistics over seeds for figures and tables: one number per run first, then mean and band.

A run with several attention layers is first averaged over its layers, so every seed weighs
the same; the band is the range (min, max) over seeds, with the number of seeds alongside so a
reader sees when a band is one seed wide.
"""

from __future__ import annotations

import pandas as pd


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
    """The rows of each task's largest head count (figures that show one H per task), and {task: that H}."""
    largest = df.groupby("task")["heads"].max().to_dict()
    return df[df["heads"] == df["task"].map(largest)], largest
