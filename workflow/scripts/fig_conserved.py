"""Figure `conserved`: drift of the conserved quantities by optimizer.

Gradient flow conserves the imbalances W_Q^T W_Q - W_K^T W_K and W_V^T W_V - W_O W_O^T (per head
or KV group; attnid.symmetry.imbalance). Reads results/training/metrics.parquet (drift since
step 0, relative to the size of the Grams at step 0, on the measured steps) and summary.parquet.
One column of panels per task and model, at most five to a row (figtraining.setting_blocks); in each, the
query-key part above the value-output part; colour: optimizer. Runs without
rebalancing (balancing resets the imbalance on purpose), the largest head count of each task; 95%
t-intervals over seeds of log10 drift (geometric means).
"""

import pandas as pd
from figtraining import (
    OPTIMIZER_NAMES,
    TASK_NAMES,
    band,
    draw_band,
    names,
    note_diverged,
    readable,
    setting_blocks,
    title,
    with_settings,
)

from attnid.report.seeds import at_largest_heads
from attnid.report.style import FULL_WIDTH, MIN_FONT_PT, PALETTE, use_style

PARTS = {"drift_query_key": "query-key", "drift_value_output": "value-output"}
KEYS = ["task", "optimizer", "heads", "seed", "step"]


def plot(metrics: pd.DataFrame, summary: pd.DataFrame):
    metrics, summary = with_settings(metrics), with_settings(summary)
    use_style()
    df, heads = at_largest_heads(metrics[(metrics["step"] > 0) & (metrics["rebalance"] == "none")])
    per_run = readable(df.groupby(KEYS, as_index=False)[list(PARTS)].mean())
    tasks, optimizers = names(df, "task", TASK_NAMES), names(df, "optimizer", OPTIMIZER_NAMES)
    fig, at = setting_blocks(len(tasks), len(PARTS), FULL_WIDTH, 1.6, sharey=True)
    colours = dict(zip(optimizers, PALETTE))
    heads = {TASK_NAMES.get(t, t): h for t, h in heads.items()}  # by display name
    for k, task in enumerate(tasks):
        for i, (part, label) in enumerate(PARTS.items()):
            ax = at(k, i)
            b = band(per_run[per_run["task"] == task], ["optimizer"], part, log=True)
            for opt in optimizers:
                draw_band(ax, b[b["optimizer"] == opt], colours[opt], label=opt)
            ax.set(yscale="log", xlabel="step" if i == len(PARTS) - 1 else "")
            if i == 0:
                ax.set_title(f"{title(task)}\n$H = {heads[task]}$", fontsize=MIN_FONT_PT)
            if ax.get_subplotspec().is_first_col():
                ax.set_ylabel(f"{label} drift")
        for i in range(1, len(PARTS)):  # one step axis a setting, labelled at its bottom panel
            at(k, i - 1).sharex(at(k, i))
            at(k, i - 1).tick_params(labelbottom=False)
    handles, labels = at(0, 0).get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 6))
    note_diverged(fig, summary)
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
