"""Figure `loss`: training and held-out loss with and without rebalancing, by optimizer.

Reads results/training/metrics.parquet and summary.parquet. Rows of panels: the settings trained under more
than one rebalancing mode (all settings where none is); columns: optimizers; colour: rebalancing mode. Solid:
training loss per step; dashed with markers: held-out
loss where evaluated. 95% t-intervals over seeds of log10 loss, i.e. geometric means (attention layers averaged first); the largest head
count of each task. Diverged runs are left out and counted in a footnote.
"""

import textwrap

import pandas as pd
from figtraining import (
    OPTIMIZER_NAMES,
    REBALANCE_NAMES,
    TASK_NAMES,
    band,
    draw_band,
    names,
    note_diverged,
    readable,
    with_settings,
)

from attnid.report.seeds import at_largest_heads
from attnid.report.style import FULL_WIDTH, MAX_HEIGHT, MIN_FONT_PT, PALETTE, use_style

KEYS = ["task", "optimizer", "rebalance", "heads", "seed", "step"]


def compared(metrics: pd.DataFrame) -> pd.DataFrame:
    """The rows of the settings trained under more than one rebalancing mode (every row where no setting is): a
    setting with one mode has nothing to compare, and a row of panels per setting of the paper preset would not fit
    a page."""
    modes = metrics.groupby("task")["rebalance"].nunique()
    keep = modes.index[modes > 1]
    return metrics[metrics["task"].isin(keep)] if len(keep) else metrics


def plot(metrics: pd.DataFrame, summary: pd.DataFrame):
    metrics = compared(with_settings(metrics))
    summary = with_settings(summary)
    import matplotlib.pyplot as plt

    use_style()
    df, heads = at_largest_heads(metrics)
    per_run = readable(df.groupby(KEYS, as_index=False)[["loss", "eval_loss"]].mean())  # one value per run and step
    tasks = names(df, "task", TASK_NAMES)
    optimizers = {  # each task its own, in the names' order
        TASK_NAMES.get(t, t): names(df[df["task"] == t], "optimizer", OPTIMIZER_NAMES) for t in df["task"].unique()
    }
    modes = names(df, "rebalance", REBALANCE_NAMES)
    colours = dict(zip(modes, PALETTE))
    width = max(len(o) for o in optimizers.values())
    row = min(1.25, (MAX_HEIGHT - 0.8) / len(tasks))  # inches a row of panels: the figure fits one page
    fig, axes = plt.subplots(len(tasks), width, figsize=(FULL_WIDTH, 0.8 + row * len(tasks)),
                             sharex="row", sharey="row", squeeze=False)  # fmt: skip
    train = band(per_run, ["task", "optimizer", "rebalance"], "loss", log=True)
    evaluated = band(per_run.dropna(subset=["eval_loss"]), ["task", "optimizer", "rebalance"], "eval_loss", log=True)
    heads = {TASK_NAMES.get(t, t): h for t, h in heads.items()}  # by display name
    for i, task in enumerate(tasks):
        for j in range(width):
            ax = axes[i, j]
            if j >= len(optimizers[task]):
                ax.set_visible(False)  # this task trains fewer optimizers
                continue
            opt = optimizers[task][j]
            for mode in modes:
                for b, style in ((train, {}), (evaluated, {"ls": "--", "marker": "."})):
                    sel = b[(b["task"] == task) & (b["optimizer"] == opt) & (b["rebalance"] == mode)]
                    draw_band(ax, sel, colours[mode], **style)
            ax.set(yscale="log", title=textwrap.fill(opt, 16), xlabel="step" if i == len(tasks) - 1 else "")
            ax.title.set_fontsize(MIN_FONT_PT)
        axes[i, 0].set_ylabel(textwrap.fill(f"{task} ($H={heads[task]}$)", 20) + "\nloss")  # within its row
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=colours[m], label=m) for m in modes]
    handles += [
        Line2D([], [], color="0.3", label="train"),
        Line2D([], [], color="0.3", ls="--", marker=".", label="held-out"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles))
    note_diverged(fig, summary)
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
