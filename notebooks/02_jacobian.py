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
# # 02 Jacobian verification and symmetry checks
#
# Reads the numerical verification (`results/<preset>/jacobian/`, e.g. `results/default/jacobian/`
# for the default preset), the bias-effect table and the symmetry checks
# (`results/<preset>/symmetry/checks.csv`). The measured unidentified dimension is P minus the
# numerical rank of the Jacobian of theta -> Y at a random point. Two numbers say how clearly
# that rank is determined (both in decades): the gap log10(sigma_kept / sigma_dropped) between
# the smallest kept and the largest dropped singular value, and the margin
# log10(sigma_kept / tolerance) of the smallest kept one over the rank tolerance. A spec whose
# margin or gap is too small is `undecided` and fails the workflow. Nothing is recomputed here.
# Paired with `02_jacobian.py` (jupytext, percent format): edit either, then
# `jupytext --sync notebooks/02_jacobian.py.ipynb`.

# %% tags=["parameters"]
preset = "default"  # which preset's results to read when the notebook is opened by hand
label = None  # a spec of the verification grid (a value of verification["label"]); None = the smallest margin

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
        "verification": results / "jacobian/verification.csv",
        "ratio_points": results / "jacobian/ratio_points.csv",
        "bias_effects": results / "tables/bias_effects.csv",
        "symmetry": results / "symmetry/checks.csv",
        "fig_spectrum": results / "figures/jacobian_spectrum.png",
        "fig_ratio": results / "figures/ratio.png",
    }
    summary_path = None

verification = pd.read_csv(paths["verification"], keep_default_na=False)
points = pd.read_csv(paths["ratio_points"], keep_default_na=False)
bias_effects = pd.read_csv(paths["bias_effects"], keep_default_na=False)
symmetry = pd.read_csv(paths["symmetry"], keep_default_na=False)
print(f"{len(verification)} verified specs, {len(points)} ratio points, {len(symmetry)} symmetry checks")

# %% [markdown]
# ## Does every count agree with the Jacobian?

# %%
passed = verification["passed"].astype(bool)
print(f"{passed.sum()} of {len(verification)} specs pass")
print(verification["status"].value_counts().to_string())
verification[~passed] if (~passed).any() else verification.head(10)

# %% [markdown]
# ## Margins by family
#
# The worst margin and gap of each family of the grid (decades).

# %%
verification.groupby("family", sort=False)[["margin", "gap", "sigma_kept", "sigma_dropped"]].agg(
    {"margin": "min", "gap": "min", "sigma_kept": "min", "sigma_dropped": "max"}
)

# %% [markdown]
# ## Singular values and the predicted rank

# %%
display(Image(filename=str(paths["fig_spectrum"])))

# %% [markdown]
# ## A closer look at one spec
#
# Set `label` in the parameter cell to any value of `verification["label"]` (default: the spec
# with the smallest margin). The row converts back to its `AttentionSpec`, whose count states the
# hypotheses the measurement relies on.

# %%
chosen = label if label is not None else verification.sort_values("margin").iloc[0]["label"]
row = verification.set_index("label").loc[chosen]
spec = AttentionSpec.from_row({**row.to_dict(), "label": chosen})
counts = count(spec)
print(chosen)
print(row[["total", "predicted", "measured", "sigma_kept", "sigma_dropped", "gap", "margin", "status"]].to_string())
print("hypotheses:", *counts.conditions, sep="\n  - ")
assert counts.unidentified == row["predicted"], "the table and the count must agree"

# %% [markdown]
# ## The ratio figure (exact counts and Jacobian points)

# %%
display(Image(filename=str(paths["fig_ratio"])))
points.describe()

# %% [markdown]
# ## Bias effects and symmetry checks

# %%
display(bias_effects)
display(symmetry)

# %%
if summary_path is not None:  # what this executed notebook read (the rule's output)
    record = {"verification_rows": len(verification), "passed": int(passed.sum()), "symmetry_rows": len(symmetry)}
    Path(summary_path).write_text(json.dumps(record) + "\n")
