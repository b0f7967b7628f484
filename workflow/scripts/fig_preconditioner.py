"""Figure `preconditioner`: Adam against Adam with one second moment per symmetry block.

Reads results/training/summary.parquet (no rebalancing). One column of panels per task and model, at most five
to a row (figtraining.setting_blocks; more settings wrap into another pair of rows); in each pair, the mean
overlap of the updates with the unidentified subspace above the final held-out loss (converged runs);
x: heads H; colour and marker: optimizer (Adam; Adam whose second moment is averaged over each query-key
and each value-output block of a KV group, so that its update is a multiple of the gradient on each
symmetry block; SGD with momentum for reference), drawn slightly apart at one H. 95% t-intervals over seeds.
"""

import pandas as pd
from figtraining import (
    MARKERS,
    OPTIMIZER_NAMES,
    TASK_NAMES,
    dodged,
    draw_points,
    label_log_y,
    mean_ci,
    names,
    note_diverged,
    readable,
    setting_blocks,
    title,
    with_settings,
)

from attnid.report.style import FULL_WIDTH, MIN_FONT_PT, PALETTE, use_style

SHOWN = ("adam", "adam_shared", "sgd_momentum")
MEASURES = (("mean_overlap_all", r"mean overlap $\|P_T u\|/\|u\|$"), ("final_eval_loss", "final held-out loss"))


def plot(summary: pd.DataFrame):
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullLocator

    summary = with_settings(summary)
    use_style()
    runs = summary[(summary["rebalance"] == "none") & ~summary["diverged"] & summary["optimizer"].isin(SHOWN)]
    tasks = names(runs, "task", TASK_NAMES)
    shown = readable(runs)
    order = names(runs, "optimizer", OPTIMIZER_NAMES)
    fig, at = setting_blocks(len(tasks), len(MEASURES), FULL_WIDTH, 1.7)
    style = {opt: (PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)]) for i, opt in enumerate(order)}
    for k, task in enumerate(tasks):
        cell = shown[shown["task"] == task]
        heads = sorted(cell["heads"].unique())
        for i, (column, label) in enumerate(MEASURES):
            ax = at(k, i)
            data = cell if column != "final_eval_loss" or "converged" not in cell else cell[cell["converged"].astype(bool)]
            present = [o for o in order if o in set(data["optimizer"])]
            for n, opt in enumerate(present):
                stats = mean_ci(data[data["optimizer"] == opt], "heads", column)
                draw_points(ax, stats, dodged(stats["heads"], n, len(present)), *style[opt], label=opt)
            ax.set(xscale="log", yscale="log", xlabel="heads $H$" if i == 1 else "")
            if ax.get_subplotspec().is_first_col():
                ax.set_ylabel(label)
            if i == 0:
                ax.set_title(title(task), fontsize=MIN_FONT_PT + 1)
            ax.set_xticks(heads, [str(h) for h in heads])
            ax.xaxis.set_minor_locator(NullLocator())
            label_log_y(ax)
            ax.set_xlim(min(heads) / 1.4, max(heads) * 1.4)
    handles = [Line2D([], [], color=c, marker=m, ms=4, lw=1.0, label=o) for o, (c, m) in style.items()]
    fig.legend(handles=handles, loc="outside lower center", ncol=3)
    note_diverged(fig, summary)
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
