"""Figure `rebalance_effect`: does rebalancing change optimisation? Paired differences across seeds.

Reads results/training/rebalance_effects.parquet: for each task, model, optimizer, head count H and seed, the
run with `project` (remove P_T u from every update) or `balance` (move to the balanced point every few
steps) minus the same run without rebalancing, both converged (attnid.training.sweep.converged). Rows:
log10 of the final held-out loss (below zero: rebalancing helped) and the steps to reach the target loss;
columns: the two modes; x: the task and model; colour: optimizer. 95% t-intervals over the pairs
(seeds x H); an interval that crosses zero means no detectable effect (uncorrected; the paper's macros apply
Holm's correction).
"""

import pandas as pd
from figtraining import (
    CI,
    OPTIMIZER_SHORT,
    PALETTE_ORDER,
    REBALANCE_NAMES,
    TASK_NAMES,
    names,
    readable,
    short,
    slanted,
    with_settings,
)

from attnid.report.style import FULL_WIDTH, PALETTE, use_style

MEASURES = {
    "log_eval_loss": r"$\Delta \log_{10}$ held-out loss",
    "steps_to_target": r"$\Delta$ steps to target",
}


def plot(effects: pd.DataFrame):
    import matplotlib.pyplot as plt
    import seaborn as sns

    effects = with_settings(effects)
    use_style()
    tasks = names(effects, "task", TASK_NAMES)
    order = names(effects, "optimizer", OPTIMIZER_SHORT)
    modes = [m for m in ("project", "balance") if m in set(effects["rebalance"])]
    shown = readable(short(effects))
    fig, axes = plt.subplots(len(MEASURES), len(modes), figsize=(FULL_WIDTH, 1.0 + 1.9 * len(MEASURES)),
                             squeeze=False, sharey="row")  # fmt: skip
    palette = [PALETTE[i % len(PALETTE)] for i in PALETTE_ORDER[: len(order)]]
    for j, mode in enumerate(modes):
        cell = shown[shown["rebalance"] == REBALANCE_NAMES.get(mode, mode)]
        for i, (column, label) in enumerate(MEASURES.items()):
            ax = axes[i, j]
            ax.axhline(0, color="0.3", lw=0.8)
            sns.pointplot(cell, x="task", y=column, hue="optimizer", order=[t for t in tasks if t in set(cell["task"])],
                          hue_order=order, palette=palette, errorbar=CI, dodge=0.6, linestyle="none", markersize=3,
                          ax=ax, legend=(i, j) == (0, 0))  # fmt: skip
            ax.set(xlabel="", ylabel=label if j == 0 else "")
            if i == 0:
                ax.set_title(f"{REBALANCE_NAMES.get(mode, mode)} $-$ no rebalancing")
            slanted(ax)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    axes[0, 0].get_legend().remove()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
