"""results/tables/hf_coverage.tex/.csv: the self-check of each configured model type, one row per part.

The model type (and the config measured: its class defaults, or a stored published config where those do not
map), the part (an attention layer, the whole model), P, the count, the measured P - rank J, the weakly
identified directions (count / measured), the gap and margin in decades, and the verdict.
"""

from attnid.io import log_to, read_result
from attnid.report.latex import write_table

log_to(snakemake.log[0])
df = read_result(snakemake.input.coverage, columns=["model_type", "config", "part", "verdict", "P", "count"])
df["model type"] = df["model_type"].where(df["config"] == "default", df["model_type"] + " (" + df["config"] + ")")
weak = df["weak_count"].astype("Int64").astype(str) + " / " + df["weak_measured"].astype("Int64").astype(str)
table = df.assign(weak=weak.where(df["weak_count"].notna()))[
    ["model type", "part", "P", "count", "measured", "weak", "gap", "margin", "verdict"]
].rename(columns={"P": "$P$", "weak": "weak (count / meas.)", "gap": "gap (dec.)", "margin": "margin (dec.)"})
integers = ["$P$", "count", "measured"]
table[integers] = table[integers].astype("Int64")
table = table.astype(object).where(table.notna(), None)  # a part the check refuses has no numbers: '--'
write_table(
    table,
    snakemake.output.tex,
    snakemake.output.csv,
    formats={"$P$": ",", "gap (dec.)": ".1f", "margin (dec.)": ".1f"},
    align="llrrrcrrl",
)
print(table.to_string(index=False))
