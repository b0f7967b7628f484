"""Figure `loss`: training and evaluation loss with and without rebalancing, by optimizer.

Reads results/training/metrics.parquet. Rows of panels: tasks; columns: optimizers; colour:
rebalancing mode. Solid: training loss per step; dashed with markers: held-out evaluation loss
(where evaluated). Lines: mean over seeds (layers averaged first), bands: min-max over seeds.
One head count per task is shown, the largest that task sweeps.
"""

import pandas as pd

from attnid.report.seeds import at_largest_heads, seed_band
from attnid.report.style import (
    FULL_WIDTH,
    OPTIMIZER_NAMES,
    PALETTE,
    REBALANCE_NAMES,
    TASK_NAMES,
    label_grid,
    ordered,
    use_style,
)

BY = ["task", "optimizer", "rebalance"]


def plot(metrics: pd.DataFrame):
    """Grid of panels (tasks x optimizers) of the losses over steps (a matplotlib Figure)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    use_style()
    df, heads = at_largest_heads(metrics)
    tasks = ordered(df["task"], list(TASK_NAMES))
    optimizers = ordered(df["optimizer"], list(OPTIMIZER_NAMES))
    modes = ordered(df["rebalance"], list(REBALANCE_NAMES))
    train = seed_band(df, BY, "loss")
    evaluated = seed_band(df.dropna(subset=["eval_loss"]), BY, "eval_loss")
    fig, axes = plt.subplots(
        len(tasks), len(optimizers), figsize=(FULL_WIDTH, 0.4 + 1.55 * len(tasks)),
        sharex="row", sharey="row", squeeze=False, constrained_layout=True,
    )  # fmt: skip
    for (i, task), (j, opt) in ((a, b) for a in enumerate(tasks) for b in enumerate(optimizers)):
        ax = axes[i, j]
        for k, mode in enumerate(modes):
            color = PALETTE[k % len(PALETTE)]
            for band, style in ((train, dict(ls="-")), (evaluated, dict(ls="--", marker=".", ms=3))):
                sel = band[(band.task == task) & (band.optimizer == opt) & (band.rebalance == mode)]
                ax.plot(sel["step"], sel["mean"], color=color, lw=0.9, **style)
                ax.fill_between(sel["step"], sel["low"], sel["high"], color=color, alpha=0.2, lw=0)
        ax.set_yscale("log")
    rows = [f"{TASK_NAMES.get(t, t)} ($H = {heads[t]}$)" for t in tasks]
    label_grid(axes, rows, [OPTIMIZER_NAMES.get(o, o) for o in optimizers], "loss")
    handles = [Line2D([], [], color=PALETTE[k % len(PALETTE)], label=REBALANCE_NAMES.get(m, m)) for k, m in enumerate(modes)]
    handles += [Line2D([], [], color="0.3", label="train"), Line2D([], [], color="0.3", ls="--", marker=".", label="eval")]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles))
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)  # noqa: F821
