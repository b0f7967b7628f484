"""Figure `conserved`: drift of the conserved quantities by optimizer.

Gradient flow conserves the imbalances W_Q^T W_Q - W_K^T W_K and W_V^T W_V - W_O W_O^T (per head
or KV group; attnid.symmetry.imbalance). Reads results/training/metrics.parquet (drift since
step 0, relative to the size of the Grams at step 0) and summary.parquet. Rows: tasks; columns:
the query-key and value-output parts; colour: optimizer. Runs without rebalancing (balancing resets
the imbalance on purpose), the largest head count of each task; 95% t-intervals over seeds of log10 drift (geometric means).
"""

import pandas as pd
from figtraining import OPTIMIZER_NAMES, TASK_NAMES, band, draw_band, names, note_diverged, readable, with_settings

from attnid.report.seeds import at_largest_heads
from attnid.report.style import COLUMN_WIDTH, PALETTE, label_grid, use_style

PARTS = {"drift_query_key": "query-key imbalance", "drift_value_output": "value-output imbalance"}
KEYS = ["task", "optimizer", "heads", "seed", "step"]


def plot(metrics: pd.DataFrame, summary: pd.DataFrame):
    metrics = with_settings(metrics)
    summary = with_settings(summary)
    import matplotlib.pyplot as plt

    use_style()
    df, heads = at_largest_heads(metrics[(metrics["step"] > 0) & (metrics["rebalance"] == "none")])
    per_run = readable(df.groupby(KEYS, as_index=False)[list(PARTS)].mean())
    tasks, optimizers = names(df, "task", TASK_NAMES), names(df, "optimizer", OPTIMIZER_NAMES)
    fig, axes = plt.subplots(len(tasks), len(PARTS), figsize=(COLUMN_WIDTH, 1.1 + 1.5 * len(tasks)),
                             sharex="row", sharey=True, squeeze=False)  # fmt: skip
    colours = dict(zip(optimizers, PALETTE))
    for (i, task), (j, part) in ((a, b) for a in enumerate(tasks) for b in enumerate(PARTS)):
        b = band(per_run[per_run["task"] == task], ["optimizer"], part, log=True)
        for opt in optimizers:
            draw_band(axes[i, j], b[b["optimizer"] == opt], colours[opt], label=opt)
        axes[i, j].set(yscale="log")
    heads = {TASK_NAMES.get(t, t): h for t, h in heads.items()}  # by display name
    label_grid(axes, [f"{t} ($H = {heads[t]}$)" for t in tasks], list(PARTS.values()), "drift")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2)
    note_diverged(fig, summary)
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
