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
# # 01 Counting: how many attention parameters are identified
#
# Reads the exact counts written by the pipeline (`results/<preset>/counting/`, e.g.
# `results/default/counting/` for the default preset) and shows the figures built from them.
# Nothing is recomputed here: to change a number, change the config and rerun
# `snakemake --cores 2 notebooks`. This notebook is paired with `01_counting.py` (jupytext,
# percent format): edit either, then `jupytext --sync notebooks/01_counting.py.ipynb`.

# %% tags=["parameters"]
preset = "default"  # which preset's results to read when the notebook is opened by hand
label = None  # a spec of the ratio grid (a value of ratios["label"]); None = most heads with the widest RoPE

# %%
import json
from pathlib import Path

import pandas as pd
from IPython.display import Image, display

from attnid import AttentionSpec, count

try:  # executed by Snakemake's notebook directive
    paths = dict(snakemake.input.items())
    summary_path = snakemake.output.summary
except NameError:  # opened by hand (from the repository root or from notebooks/)
    root = Path.cwd() if Path("Snakefile").exists() else Path.cwd().parent
    results = root / "results" / preset
    paths = {
        "ratios": results / "counting/ratios.csv",
        "architectures": results / "counting/architectures.csv",
        "closed_forms": results / "counting/closed_forms.csv",
        "fig_ratio": results / "figures/ratio.png",
        "fig_architectures": results / "figures/architectures.png",
    }
    summary_path = None

ratios = pd.read_csv(paths["ratios"], keep_default_na=False)
architectures = pd.read_csv(paths["architectures"], keep_default_na=False)
closed_forms = pd.read_csv(paths["closed_forms"])
print(f"{len(ratios)} specs in the ratio grid, {len(architectures)} real architectures")

# %% [markdown]
# ## Closed forms (sympy, from `attnid.layer.symbolic`)

# %%
display(closed_forms)

# %% [markdown]
# ## The ratio unidentified / total against the number of heads

# %%
display(Image(filename=str(paths["fig_ratio"])))
ratios.pivot_table(index="n_heads", columns=["variant", "rope", "biases"], values="ratio", aggfunc="first").round(4)

# %% [markdown]
# ## A closer look at one spec
#
# Set `label` in the parameter cell to any value of `ratios["label"]`. The breakdown columns say
# where the unidentified dimensions come from: the query-key and value-output symmetries and the
# two bias effects. A table row converts back to its `AttentionSpec` (`AttentionSpec.from_row`),
# whose count also states the hypotheses it relies on (generic inputs, RoPE frequencies, T_min).

# %%
rotated = ratios[ratios["rope_dims"] > 0].sort_values(["n_heads", "rope_dims", "biases"])
chosen = label if label is not None else rotated.iloc[-1]["label"]  # default: most heads, widest RoPE
row = ratios.set_index("label").loc[chosen]
spec = AttentionSpec.from_row({**row.to_dict(), "label": chosen})
counts = count(spec)
breakdown = pd.Series(counts.breakdown, name="unidentified")
print(chosen)
print(row[["total", "unidentified", "identified", "ratio"]].to_string())
display(breakdown.to_frame())
print("hypotheses:", *counts.conditions, sep="\n  - ")
assert breakdown.sum() == row["unidentified"] == counts.unidentified, (
    "the table, the breakdown and the count must agree"
)

# %% [markdown]
# ## Real models

# %%
display(Image(filename=str(paths["fig_architectures"])))
architectures[
    ["model", "n_heads", "n_kv_heads", "rope_dims", "biases", "total", "unidentified", "ratio", "model_unidentified"]
]

# %%
if summary_path is not None:  # what this executed notebook read (the rule's output)
    Path(summary_path).write_text(
        json.dumps({"ratios_rows": len(ratios), "architectures_rows": len(architectures)}) + "\n"
    )
