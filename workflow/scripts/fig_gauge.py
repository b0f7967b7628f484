"""Figure `gauge`: the Euclidean overlap next to a gauge-invariant one, with and without balancing.

Reads results/training/summary.parquet. Per optimizer (x) and task and model (panels, three to a row): the
mean overlap ||P_T u|| / ||u|| of the updates at the iterate (Euclidean), and the overlap after moving the
iterate and its update to the balanced point of its orbit (gauge-invariant: the same at every point of the
orbit); colours: the measure, without rebalancing and with balancing every few steps. Plain SGD is shown
too: its Euclidean overlap is float rounding, its gauge-invariant overlap is not (the map to the balanced
point is not orthogonal at an unbalanced iterate). 95% t-intervals over seeds and head counts.
"""

import pandas as pd
from figtraining import CI, TASK_NAMES, names, note_diverged, panel_grid, readable, short, slanted, with_settings

from attnid.report.labels import OPTIMIZER_SHORT
from attnid.report.style import FULL_WIDTH, PALETTE, use_style


def plot(summary: pd.DataFrame):
    import seaborn as sns

    summary = with_settings(summary)
    use_style()
    runs = summary[summary["rebalance"].isin(["none", "balance"]) & ~summary["diverged"]]
    order = names(runs, "optimizer", OPTIMIZER_SHORT)
    long = readable(short(runs)).melt(
        id_vars=["task", "optimizer", "rebalance", "heads", "seed"], value_vars=["mean_overlap_all", "mean_overlap_gauge"],
        var_name="measure", value_name="overlap",
    )  # fmt: skip
    long["measure"] = long["measure"].map(
        {"mean_overlap_all": "Euclidean", "mean_overlap_gauge": "at the balanced point"}
    )
    long["series"] = long["measure"] + ", " + long["rebalance"]
    tasks = names(runs, "task", TASK_NAMES)
    series = [f"{m}, {r}" for m in ("Euclidean", "at the balanced point") for r in ("no rebalancing", "balance")]
    colours = [PALETTE[0], PALETTE[5], PALETTE[3], PALETTE[1]]
    fig, axes = panel_grid(len(tasks), FULL_WIDTH, 2.0, extra=0.8)
    for k, (ax, task) in enumerate(zip(axes, tasks)):
        cell = long[long["task"] == task]
        sns.pointplot(cell, x="optimizer", y="overlap", hue="series", order=[o for o in order if o in set(cell["optimizer"])],
                      hue_order=series, palette=colours, errorbar=CI, dodge=0.5, linestyle="none", markersize=3, ax=ax,
                      legend=k == 0)  # fmt: skip
        ax.set(title=task, xlabel="", ylabel=r"mean overlap $\|P_T u\| / \|u\|$" if k % 3 == 0 else "", ylim=(0, None))
        slanted(ax)
    handles, labels = axes[0].get_legend_handles_labels()
    axes[0].get_legend().remove()
    fig.legend(handles, labels, loc="outside lower center", ncol=2)
    note_diverged(fig, summary)
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
