"""Figure `overlap`: how much of each training update lies in the unidentified subspace.

Reads results/training/metrics.parquet (one row per run, step and layer). Overlap of an update u:
||P_T u|| / ||u||, P_T the orthogonal projection onto the tangent space of the symmetry orbit.
Rows of panels: tasks; columns: optimizers; colour: heads H; line style: rebalancing mode.
Lines: mean over seeds (layers averaged first); bands: min-max range over seeds; thin dotted
lines: the chance level sqrt(dim T / P) of a random direction. Log scale: overlaps below
FLOOR (e.g. exactly zero for `project`) are drawn at FLOOR.
"""

import pandas as pd

from attnid.report.seeds import seed_band
from attnid.report.style import (
    CHANCE_STYLE,
    FULL_WIDTH,
    LINESTYLES,
    OPTIMIZER_NAMES,
    PALETTE,
    REBALANCE_NAMES,
    TASK_NAMES,
    label_grid,
    ordered,
    use_style,
)

FLOOR = 1e-17  # lower edge of the log axis; float64 rounding is about 1e-16


def plot(metrics: pd.DataFrame, value: str = "overlap_all", chance: str = "chance_all"):
    """Grid of panels (tasks x optimizers) of `value` over steps (a matplotlib Figure)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    use_style()
    tasks = ordered(metrics["task"], list(TASK_NAMES))
    optimizers = ordered(metrics["optimizer"], list(OPTIMIZER_NAMES))
    modes = ordered(metrics["rebalance"], list(REBALANCE_NAMES))
    heads = sorted(metrics["heads"].unique())
    band = seed_band(metrics, ["task", "optimizer", "rebalance", "heads"], value)
    levels = metrics.groupby(["task", "heads"])[chance].mean()  # chance level: fixed per spec
    fig, axes = plt.subplots(
        len(tasks), len(optimizers), figsize=(FULL_WIDTH, 0.4 + 1.55 * len(tasks)),
        sharex="row", sharey=True, squeeze=False, constrained_layout=True,
    )  # fmt: skip
    for (i, task), (j, opt) in ((a, b) for a in enumerate(tasks) for b in enumerate(optimizers)):
        ax = axes[i, j]
        for hi, h in enumerate(heads):
            color = PALETTE[hi % len(PALETTE)]
            if (task, h) in levels.index:
                ax.axhline(levels[(task, h)], color=color, ls=CHANCE_STYLE, lw=0.8, gid="chance")
            for mi, mode in enumerate(modes):
                sel = band[(band.task == task) & (band.optimizer == opt) & (band.rebalance == mode) & (band.heads == h)]
                if sel.empty:
                    continue
                ls = LINESTYLES[mi % len(LINESTYLES)]
                ax.plot(sel["step"], sel["mean"].clip(lower=FLOOR), ls, color=color, lw=0.9)
                ax.fill_between(sel["step"], sel["low"].clip(lower=FLOOR), sel["high"].clip(lower=FLOOR), color=color, alpha=0.2, lw=0)
        ax.set_yscale("log")
        ax.set_ylim(FLOOR / 3, 2)
    names = [TASK_NAMES.get(t, t) for t in tasks], [OPTIMIZER_NAMES.get(o, o) for o in optimizers]
    label_grid(axes, *names, r"overlap $\|P_T u\| / \|u\|$")
    handles = [Line2D([], [], color=PALETTE[k % len(PALETTE)], label=f"$H = {h}$") for k, h in enumerate(heads)]
    handles += [Line2D([], [], color="0.3", ls=LINESTYLES[k % len(LINESTYLES)], label=REBALANCE_NAMES.get(m, m)) for k, m in enumerate(modes)]
    handles.append(Line2D([], [], color="0.3", ls=CHANCE_STYLE, lw=0.8, label="chance level"))
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles))
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)  # noqa: F821
