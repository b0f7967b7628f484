"""Figure `overlap`: the mean overlap of updates with the unidentified subspace against the head count H.

Reads results/training/summary.parquet (one row per run). Overlap of a run: the mean over steps and
attention layers of ||P_T u|| / ||u||, P_T the orthogonal projection onto the tangent space of the
symmetry orbit (no rebalancing). One panel per task; colour: optimizer; 95% t-intervals over seeds;
dashed black: the chance level sqrt(dim T / P) of a random direction, sqrt(1 / (2H)) for MHA
(slope -1/2 on these log-log axes). Plain SGD is left out: its overlap is float rounding (~1e-16).
"""

import pandas as pd
from figtraining import CI, OPTIMIZER_NAMES, TASK_NAMES, names, note_diverged, readable

from attnid.report.style import FULL_WIDTH, PALETTE, use_style


def plot(summary: pd.DataFrame):
    import matplotlib.pyplot as plt
    import seaborn as sns

    use_style()
    runs = summary[(summary["rebalance"] == "none") & ~summary["diverged"] & (summary["optimizer"] != "sgd")]
    tasks = names(runs, "task", TASK_NAMES)
    shown = readable(runs)
    order = names(runs, "optimizer", OPTIMIZER_NAMES)
    fig, axes = plt.subplots(1, len(tasks), figsize=(FULL_WIDTH, 2.4), squeeze=False, constrained_layout=True)
    for ax, task in zip(axes[0], tasks):
        cell = shown[shown["task"] == task]
        sns.lineplot(cell, x="heads", y="mean_overlap_all", hue="optimizer", hue_order=order, palette=PALETTE[: len(order)],
                     errorbar=CI, marker="o", ax=ax, legend=ax is axes[0, 0])  # fmt: skip
        chance = cell.groupby("heads")["chance_all"].mean()
        ax.plot(chance.index, chance.to_numpy(), "k--", marker="_", ms=10, lw=0.9, label="chance $\\sqrt{\\dim T / P}$")
        ax.set(xscale="log", yscale="log", title=task, xlabel="heads $H$", ylabel=r"mean overlap $\|P_T u\| / \|u\|$")
        ax.set_xticks(sorted(cell["heads"].unique()), [str(h) for h in sorted(cell["heads"].unique())])
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if axes[0, 0].get_legend():
        axes[0, 0].get_legend().remove()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 4))
    note_diverged(fig, summary)
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
