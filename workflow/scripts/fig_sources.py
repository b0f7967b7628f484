"""Figure `sources`: real architectures, the update's overlap with the whole model's orbit, by source.

Reads results/training/summary.parquet, the runs of the real `transformers` classes without rebalancing:
per run the mean over its gauge steps of ||P u|| / ||u|| for the whole model's orbit (attnid.gauge: every
symmetry of the model, `whole model`) and the part of P u that each source's generators carry (attention,
norm gains and biases, MLP hidden units, residual-stream rotations, LayerNorm centring), next to the mean
overlap of each attention layer's update with that layer's own orbit (`attention layers alone`, the
measure of the toy tasks). One panel per task and model; x: the measure; colour: optimizer; plain SGD is
left out (at float rounding). 95% t-intervals over seeds and head counts.
"""

import pandas as pd
from figtraining import CI, OPTIMIZER_SHORT, PALETTE_ORDER, TASK_NAMES, names, panel_grid, short, slanted, with_settings

from attnid.report.labels import SOURCE_NAMES, ordered
from attnid.report.style import FULL_WIDTH, PALETTE, use_style


def long_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per run and measure: columns task, optimizer, heads, seed, source, overlap."""
    columns = {"mean_overlap_all": "layers", "mean_overlap_model": "all"}
    columns |= {c: c.removeprefix("mean_overlap_model_") for c in summary.columns if c.startswith("mean_overlap_model_")}
    return summary.melt(id_vars=["task", "optimizer", "heads", "seed"], value_vars=list(columns), var_name="column",
                        value_name="overlap").assign(source=lambda d: d["column"].map(columns)).dropna(subset=["overlap"])  # fmt: skip


def plot(summary: pd.DataFrame):
    import seaborn as sns

    summary = with_settings(summary)
    use_style()
    real = summary[(summary["model"] != "own") & (summary["rebalance"] == "none") & ~summary["diverged"]]
    real = real[~((real["algorithm"] == "sgd") & (real["weight_decay"] == 0))]
    tasks = names(real, "task", TASK_NAMES)
    order = names(real, "optimizer", OPTIMIZER_SHORT)
    long = short(long_table(real))
    long["task"] = long["task"].map(lambda t: TASK_NAMES.get(t, t))
    palette = [PALETTE[i % len(PALETTE)] for i in PALETTE_ORDER[: len(order)]]
    fig, axes = panel_grid(max(len(tasks), 1), FULL_WIDTH, 2.2, ncols=2, extra=0.7)
    for k, (ax, task) in enumerate(zip(axes, tasks)):
        cell = long[long["task"] == task]
        sources = [SOURCE_NAMES.get(s, s) for s in ordered(cell["source"], list(SOURCE_NAMES))]
        cell = cell.assign(source=cell["source"].map(lambda s: SOURCE_NAMES.get(s, s)))
        sns.pointplot(cell, x="source", y="overlap", hue="optimizer", order=sources, hue_order=order, palette=palette,
                      errorbar=CI, dodge=0.6, linestyle="none", markersize=3, ax=ax, legend=k == 0)  # fmt: skip
        ax.set(title=task, xlabel="", ylabel=r"mean overlap $\|P u\| / \|u\|$" if k % 2 == 0 else "", ylim=(0, None))
        slanted(ax)
    if tasks:
        handles, labels = axes[0].get_legend_handles_labels()
        axes[0].get_legend().remove()
        fig.legend(handles, labels, loc="outside lower center", ncol=len(labels))
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
