"""results/tables/bias_effects.tex/.csv: unidentified entries of each bias, counted and measured.

The CSV is the long table (one row per bias, other biases, RoPE variant and head shape). The
LaTeX table pivots it: a row per bias and context (alone / with the three others), a column per
head shape and RoPE variant, each cell `counted/measured` of the bias's `bias_params` entries.
"""

from attnid.io import atomic_write_text, log_to, read_result
from attnid.report.latex import booktabs

log_to(snakemake.log[0])
df = read_result(snakemake.input[0], keep_default_na=False)
df["shape"] = [
    f"$d{{=}}{r.d_model}, H{{=}}{r.n_heads}, G{{=}}{r.n_kv_heads}, d_k{{=}}{r.d_head_qk}, d_v{{=}}{r.d_head_v}$"
    for r in df.itertuples()
]
df["column"] = df["shape"] + " RoPE " + df["rope"].astype(str) + " ($p{=}" + df["rope_dims"].astype(str) + "$)"
df["cell"] = df["counted"].astype(str) + "/" + df["measured"].astype(str) + " of " + df["bias_params"].astype(str)
df["row"] = "$b_" + df["bias"].str.upper() + "$ " + df["others"].map(lambda o: "alone" if o == "none" else f"with {o}")
wide = df.pivot(index="row", columns="column", values="cell")
wide = wide.reindex(index=list(dict.fromkeys(df["row"])), columns=list(dict.fromkeys(df["column"]))).reset_index()
wide.columns = ["bias", *wide.columns[1:]]
# Shapes as a second header line would need multicolumn; short column names plus a legend row instead.
names = {c: f"({i})" for i, c in enumerate(wide.columns[1:], start=1)}
legend = "; ".join(f"({i}) {c}" for i, c in enumerate(wide.columns[1:], start=1))
tex = booktabs(wide.rename(columns=names), escape_cells=False)
atomic_write_text(
    snakemake.output.tex, tex + f"\n\\par\\smallskip\\footnotesize counted/measured of the bias's entries. {legend}\n"
)
atomic_write_text(snakemake.output.csv, df.drop(columns=["shape", "column", "cell", "row"]).to_csv(index=False))
print(wide.to_string())
