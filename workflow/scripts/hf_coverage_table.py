"""results/tables/hf_coverage.tex/.csv: the self-check of each configured model type.

The CSV has one row per type and part (an attention layer, the whole model): the config measured (its class
defaults, or a stored published config where those do not map), P, the count, the measured P - rank J, the
weakly identified directions (count / measured), the gap and margin in decades, the eps measured at (empty: the
config's own; attnid.hf.check, MIN_EPS and EPS_STEP), the verdict and, for a part the count refuses, why.
The TeX has one row per type (* where it is a stored published config), so that every mapped type fits one
page: the layer parts that agree (of those checked), then the whole model's P, count, measured, weak (count /
measured) and gap, set as two tables side by side (the first half of the types, then the second).
"""

import pandas as pd

from attnid.io import atomic_write_text, log_to, read_result
from attnid.report.latex import booktabs

log_to(snakemake.log[0])
df = read_result(snakemake.input.coverage, columns=["model_type", "config", "part", "verdict", "P", "count"])
df["model type"] = df["model_type"].where(df["config"] == "default", df["model_type"] + " (" + df["config"] + ")")
weak = df["weak_count"].astype("Int64").astype(str) + " / " + df["weak_measured"].astype("Int64").astype(str)
df["weak"] = weak.where(df["weak_count"].notna())
columns = ["model type", "part", "P", "count", "measured", "weak", "gap", "margin", "measured_eps", "verdict", "reason"]
full = df[columns]
atomic_write_text(snakemake.output.csv, full.to_csv(index=False))


def per_type(group: pd.DataFrame) -> dict:
    """One type's row: its layer parts that agree / were checked, and its whole model's numbers."""
    layers = group[group["part"] != "whole model"]
    whole = group[group["part"] == "whole model"]
    stored = group["config"].iloc[0] != "default"  # marked *: a stored published config (named in the CSV)
    row = {"model type": group["model_type"].iloc[0] + ("*" if stored else "")}
    row["layers"] = f"{(layers['verdict'] == 'agree').sum()}/{len(layers)}"
    w = whole.iloc[0] if len(whole) else None
    agreed = w is not None and w["verdict"] == "agree"
    for key, col in (("$P$", "P"), ("count", "count"), ("meas.", "measured"), ("weak", "weak"), ("gap", "gap")):
        row[key] = w[col] if agreed else None
    row["model"] = "agree" if agreed else ("refused" if w is not None else "--")
    return row


compact = pd.DataFrame([per_type(g) for _, g in df.groupby("model_type", sort=False)])
for col in ("$P$", "count", "meas."):
    compact[col] = compact[col].astype("Int64")
compact = compact.astype(object).where(compact.notna(), None)  # a refused whole model has no numbers: '--'
half = (len(compact) + 1) // 2
parts = [part for part in (compact.iloc[:half], compact.iloc[half:]) if len(part)]
tables = [booktabs(part, formats={"$P$": ",", "gap": ".1f"}, align="lcrrrcrl") for part in parts]
tables = [t.replace(r"\begin{tabular}", r"\begin{tabular}[t]") for t in tables]  # the shorter half hangs from the top
atomic_write_text(snakemake.output.tex, "%\n\\hfill\n".join(t.rstrip() for t in tables) + "\n")
print(full.to_string(index=False))
