"""Figure `rebalance_effect`: does rebalancing change optimisation? Paired differences across seeds.

Reads results/training/rebalance_effects.parquet: for each task, optimizer, head count H and seed, the
run with `project` (remove P_T u from every update) or `balance` (move to the balanced point every
few steps) minus the same run without rebalancing. Left: log10 of the final held-out loss (below
zero: rebalancing helped); right: steps to reach the target loss (a fraction of the initial loss;
pairs where a run never reached it are left out). 95% t-intervals over the pairs (seeds x H);
an interval that crosses zero means no detectable effect.
"""

import pandas as pd
from figtraining import CI, OPTIMIZER_NAMES, REBALANCE_NAMES, TASK_NAMES, names, readable, slanted, with_settings

from attnid.report.style import FULL_WIDTH, PALETTE, use_style

MEASURES = {
    "log_eval_loss": r"$\Delta \log_{10}$ held-out loss",
    "steps_to_target": r"$\Delta$ steps to target",
}


def plot(effects: pd.DataFrame):
    effects = with_settings(effects)
    import matplotlib.pyplot as plt
    import seaborn as sns

    use_style()
    tasks = names(effects, "task", TASK_NAMES)
    shown = readable(effects)
    order = names(effects, "optimizer", OPTIMIZER_NAMES)
    modes = names(effects, "rebalance", REBALANCE_NAMES)
    fig, axes = plt.subplots(
        len(tasks), 2, figsize=(FULL_WIDTH, 0.7 + 1.9 * len(tasks)), squeeze=False, constrained_layout=True
    )
    for i, task in enumerate(tasks):
        cell = shown[shown["task"] == task]
        for j, (column, label) in enumerate(MEASURES.items()):
            ax = axes[i, j]
            ax.axhline(0, color="0.3", lw=0.8)
            sns.pointplot(cell, x="optimizer", y=column, hue="rebalance", order=[o for o in order if o in set(cell["optimizer"])],
                          hue_order=modes, palette=PALETTE[1 : 1 + len(modes)], errorbar=CI, dodge=0.4, linestyle="none",
                          markersize=4, ax=ax, legend=(i, j) == (0, 0))  # fmt: skip
            ax.set(xlabel="", ylabel=label, title=task)
            slanted(ax)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    axes[0, 0].get_legend().remove()
    fig.legend(handles, [f"{lab} $-$ no rebalancing" for lab in labels], loc="outside lower center", ncol=len(labels))
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
