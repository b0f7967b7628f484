"""Figure `overlap`: the mean overlap of updates with the unidentified subspace against the head count H.

Reads results/training/summary.parquet (one row per run). Overlap of a run: the mean over steps and
attention layers of ||P_T u|| / ||u||, P_T the orthogonal projection onto the tangent space of the
symmetry orbit (no rebalancing). One panel per task and model (three to a row); colour and marker: optimizer; means with 95%
t-intervals over seeds as error bars, the optimizers at one H drawn slightly apart (figtraining.DODGE)
so that coinciding points stay visible; black ticks joined by a dashed line: the chance level
sqrt(dim T / P) of a random direction, sqrt(1 / (2H)) for MHA (slope -1/2 on these log-log axes).
Plain SGD is left out: its overlap is float rounding (~1e-16).
"""

import pandas as pd
from figtraining import (
    MARKERS,
    OPTIMIZER_NAMES,
    TASK_NAMES,
    dodged,
    draw_points,
    mean_ci,
    names,
    note_diverged,
    panel_grid,
    readable,
    with_settings,
)

from attnid.report.style import FULL_WIDTH, PALETTE, use_style

# the chance level: black ticks at the measured H joined by a dashed line (one tick where a task has one H)
CHANCE = {"color": "k", "ls": "--", "marker": "_", "ms": 12, "mew": 1.2, "lw": 0.9,
          "label": "chance $(\\dim T / P)^{1/2}$"}  # fmt: skip


def plot(summary: pd.DataFrame):
    summary = with_settings(summary)
    from matplotlib.lines import Line2D

    use_style()
    runs = summary[(summary["rebalance"] == "none") & ~summary["diverged"] & (summary["optimizer"] != "sgd")]
    tasks = names(runs, "task", TASK_NAMES)
    shown = readable(runs)
    order = names(runs, "optimizer", OPTIMIZER_NAMES)
    style = {opt: (PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)]) for i, opt in enumerate(order)}
    fig, axes = panel_grid(len(tasks), FULL_WIDTH, 1.9, extra=0.7)
    for k, (ax, task) in enumerate(zip(axes, tasks)):
        cell = shown[shown["task"] == task]
        present = [o for o in order if o in set(cell["optimizer"])]
        for i, opt in enumerate(present):
            stats = mean_ci(cell[cell["optimizer"] == opt], "heads", "mean_overlap_all")
            draw_points(ax, stats, dodged(stats["heads"], i, len(present)), *style[opt], label=opt)
        chance = cell.groupby("heads")["chance_all"].mean()
        ax.plot(chance.index, chance.to_numpy(), **CHANCE)
        heads = sorted(cell["heads"].unique())
        ax.set(xscale="log", yscale="log", title=task, xlabel="heads $H$")
        if k % 3 == 0:
            ax.set_ylabel(r"mean overlap $\|P_T u\| / \|u\|$")
        ax.set_xticks(heads, [str(h) for h in heads])
        ax.minorticks_off()
        ax.set_xlim(min(heads) / 1.4, max(heads) * 1.4)
    handles = [Line2D([], [], color=c, marker=m, ms=4, lw=1.0, label=o) for o, (c, m) in style.items()]
    handles.append(Line2D([], [], **CHANCE))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4))
    note_diverged(fig, summary)
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
