"""results/tables/counting.{tex,csv}: the unidentified ratio by head count for the main variants."""

import pandas as pd

from attnid.io import log_to
from attnid.report.latex import write_table

log_to(snakemake.log[0])
df = pd.read_csv(snakemake.input[0], keep_default_na=False)
# (column title, selection): MQA with one head is MHA, so it falls back to the MHA row.
columns = {
    "MHA": (df.variant == "MHA") & (df.rope == "none") & (df.biases == "none"),
    "MHA+bias": (df.variant == "MHA") & (df.rope == "none") & (df.biases == "qkvo"),
    "RoPE half": (df.variant == "MHA") & (df.rope == "half") & (df.biases == "none"),
    "RoPE full": (df.variant == "MHA") & (df.rope == "full") & (df.biases == "none"),
    "MQA": ((df.variant == "MQA") | (df.n_heads == 1)) & (df.rope == "none") & (df.biases == "none"),
}
table = pd.DataFrame({"$H$": sorted(df.n_heads.unique())})
for title, mask in columns.items():
    chosen = df[mask].drop_duplicates("n_heads").set_index("n_heads").ratio
    table[title] = table["$H$"].map(chosen)
table["$1/(2H)$"] = 1 / (2 * table["$H$"])
table = table.dropna(axis=1, how="all")
write_table(table, snakemake.output.tex, snakemake.output.csv, formats={c: ".4f" for c in table.columns[1:]})
print(table.to_string(index=False))
