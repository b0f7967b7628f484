"""Figure `preconditioner`: Adam against Adam with one second moment per symmetry block.

Reads results/training/summary.parquet (no rebalancing). Columns of panels: the mean overlap of
the updates with the unidentified subspace, and the final held-out loss; rows: tasks; x: heads H;
colour: optimizer (Adam; Adam whose second moment is averaged over each query-key and each
value-output block of a KV group, a preconditioner the symmetry group commutes with; SGD with
momentum for reference). 95% t-intervals over seeds.
"""

import pandas as pd
from figtraining import CI, OPTIMIZER_NAMES, TASK_NAMES, names, note_diverged, readable

from attnid.report.style import FULL_WIDTH, PALETTE, use_style

SHOWN = ("adam", "adam_shared", "sgd_momentum")


def plot(summary: pd.DataFrame):
    import matplotlib.pyplot as plt
    import seaborn as sns

    use_style()
    runs = summary[(summary["rebalance"] == "none") & ~summary["diverged"] & summary["optimizer"].isin(SHOWN)]
    tasks = names(runs, "task", TASK_NAMES)
    shown = readable(runs)
    order = names(runs, "optimizer", OPTIMIZER_NAMES)
    fig, axes = plt.subplots(
        len(tasks), 2, figsize=(FULL_WIDTH * 0.75, 0.6 + 1.9 * len(tasks)), squeeze=False, constrained_layout=True
    )
    for i, task in enumerate(tasks):
        cell = shown[shown["task"] == task]
        for j, (column, label) in enumerate(
            (("mean_overlap_all", r"mean overlap $\|P_T u\|/\|u\|$"), ("final_eval_loss", "final held-out loss"))
        ):
            ax = axes[i, j]
            sns.lineplot(cell, x="heads", y=column, hue="optimizer", hue_order=order, palette=PALETTE[: len(order)],
                         errorbar=CI, marker="o", ax=ax, legend=(i, j) == (0, 0))  # fmt: skip
            ax.set(xscale="log", yscale="log", xlabel="heads $H$", ylabel=f"{task}\n{label}" if j == 0 else label)
            ax.set_xticks(sorted(cell["heads"].unique()), [str(h) for h in sorted(cell["heads"].unique())])
    handles, labels = axes[0, 0].get_legend_handles_labels()
    axes[0, 0].get_legend().remove()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    note_diverged(fig, summary)
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
