# ---
# jupyter:
#   jupytext:
#     formats: .py.ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 Training: overlap of updates with the unidentified subspace, and rebalancing
#
# Reads the aggregated training results of a preset (`results/<preset>/training/metrics.parquet`: one
# row per run, step and attention layer; `summary.parquet`: one row per run; e.g.
# `results/default/training/` for the default preset) and shows the figures built from them.
# Nothing is recomputed here. This notebook is paired with `03_training.py` (jupytext, percent
# format): edit either, then `jupytext --sync notebooks/03_training.py.ipynb`.

# %% tags=["parameters"]
preset = "default"  # which preset's results to read when the notebook is opened by hand
run = None  # the run to look at closely, e.g. {"task": "recall", "model": "own", "optimizer": "adam",
# "rebalance": "none", "heads": 2, "seed": 0}; None = the run with the largest mean overlap

# %%
import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Image, display

try:  # executed by Snakemake's notebook directive
    paths = dict(snakemake.input.items())
    summary_path = snakemake.output.summary
except NameError:  # opened by hand (from the repository root or from notebooks/)
    root = Path.cwd() if Path("Snakefile").exists() else Path.cwd().parent
    results = root / "results" / preset
    paths = {
        "metrics": results / "training/metrics.parquet",
        "summary": results / "training/summary.parquet",
        "fig_overlap": results / "figures/overlap.png",
        "fig_loss": results / "figures/loss.png",
        "fig_conserved": results / "figures/conserved.png",
    }
    summary_path = None

metrics = pd.read_parquet(paths["metrics"])
summary = pd.read_parquet(paths["summary"])
RUN = ["task", "model", "optimizer", "rebalance", "heads", "seed"]
print(f"{len(summary)} runs, {len(metrics)} metric rows")

# %% [markdown]
# ## Mean overlap by optimizer, rebalancing and heads (over seeds)

# %%
cells = summary.groupby(["task", "model", "optimizer", "rebalance", "heads"])
cells[["mean_overlap_all", "chance_all", "final_eval_loss"]].mean()

# %% [markdown]
# ## Figures

# %%
for key in ("fig_overlap", "fig_loss", "fig_conserved"):
    display(Image(filename=str(paths[key])))

# %% [markdown]
# ## A closer look at one run
#
# The run chosen in the parameter cell (`run`: task, model, optimizer, rebalancing, heads and seed, see
# `summary`); the plot shows the overlap of every attention layer on the measured steps, with the run's
# chance level.

# %%
chosen = run or summary.sort_values("mean_overlap_all").iloc[-1][RUN].to_dict()
print(chosen)
one = metrics.loc[(metrics[RUN] == pd.Series(chosen)).all(axis=1)].dropna(subset=["overlap_all"])
chance = summary.loc[(summary[RUN] == pd.Series(chosen)).all(axis=1), "chance_all"].iloc[0]
fig, ax = plt.subplots(figsize=(5, 2.5))
for layer, rows in one.groupby("layer"):
    ax.plot(rows["step"], rows["overlap_all"], label=f"layer {layer}")
ax.axhline(chance, ls=":", color="0.5", label="chance")
ax.set_xlabel("step")
ax.set_ylabel("overlap")
ax.legend()
plt.show()

# %%
if summary_path is not None:  # what this executed notebook read (the rule's output)
    Path(summary_path).write_text(json.dumps({"runs": len(summary), "metric_rows": len(metrics)}) + "\n")
