"""Figure `conserved`: drift of the conserved quantities by optimizer.

Gradient flow conserves the imbalances W_Q^T W_Q - W_K^T W_K and W_V^T W_V - W_O W_O^T (per head
or KV group, in the forms that fit GQA/RoPE; attnid.symmetry.imbalance). The training runs
record their drift since step 0 (drift_query_key, drift_value_output in
results/training/metrics.parquet, as defined by attnid.symmetry.imbalance_drift).
Rows: tasks; columns: the query-key and value-output parts; colour: optimizer. Runs without
rebalancing only (balancing resets the imbalance on purpose), the largest head count of each
task; mean over seeds with min-max bands, log scale with drifts below FLOOR drawn at FLOOR.
"""

import pandas as pd

from attnid.report.seeds import at_largest_heads, seed_band
from attnid.report.style import FULL_WIDTH, OPTIMIZER_NAMES, PALETTE, TASK_NAMES, label_grid, ordered, use_style

PARTS = {"drift_query_key": "query-key imbalance", "drift_value_output": "value-output imbalance"}
FLOOR = 1e-17


def plot(metrics: pd.DataFrame):
    """Grid of panels (tasks x parts) of the drift over steps (a matplotlib Figure)."""
    import matplotlib.pyplot as plt

    use_style()
    df, heads = at_largest_heads(metrics[metrics["step"] > 0])  # the drift is 0 at step 0 by definition
    if (df["rebalance"] == "none").any():
        df = df[df["rebalance"] == "none"]
    tasks = ordered(df["task"], list(TASK_NAMES))
    optimizers = ordered(df["optimizer"], list(OPTIMIZER_NAMES))
    fig, axes = plt.subplots(
        len(tasks), len(PARTS), figsize=(FULL_WIDTH * 0.62, 0.5 + 1.55 * len(tasks)),
        sharex="row", sharey=True, squeeze=False, constrained_layout=True,
    )  # fmt: skip
    for j, part in enumerate(PARTS):
        band = seed_band(df, ["task", "optimizer"], part)
        for i, task in enumerate(tasks):
            for k, opt in enumerate(optimizers):
                sel = band[(band.task == task) & (band.optimizer == opt)]
                color = PALETTE[k % len(PALETTE)]
                ax = axes[i, j]
                ax.plot(sel["step"], sel["mean"].clip(lower=FLOOR), color=color, lw=0.9, label=OPTIMIZER_NAMES.get(opt, opt))
                ax.fill_between(sel["step"], sel["low"].clip(lower=FLOOR), sel["high"].clip(lower=FLOOR), color=color, alpha=0.2, lw=0)
                ax.set_yscale("log")
    rows = [f"{TASK_NAMES.get(t, t)} ($H = {heads[t]}$)" for t in tasks]
    label_grid(axes, rows, list(PARTS.values()), "drift")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)  # noqa: F821
