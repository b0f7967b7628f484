"""results/tables/verification.tex/.csv: the verification grid summarised by family.

One row per family: number of specs, parameter range, how many agree (measured = predicted),
are invariant (half batch, other seeds) and have their symmetry directions in the null space,
the smallest kept and the largest dropped singular value (relative), the worst gap and the worst
margin of the smallest kept value over the rank tolerance (decades). Families are shown by the
display names of FAMILY_NAMES (the config's grid names otherwise, with spaces for underscores).
"""

import pandas as pd

from attnid.io import atomic_write_csv, log_to, read_result
from attnid.report.latex import scientific, write_table

FAMILY_NAMES = {
    "heads": "heads $H$",
    "gqa": "grouped queries",
    "head_sizes": "head sizes",
    "rope_causal": "RoPE, causal",
    "biases": "biases",
    "biases_partial_rope": "biases, partial RoPE",
}

log_to(snakemake.log[0])
df = read_result(snakemake.input[0], columns=["family", "total", "sigma_kept", "gap", "margin"])


def summary(group: pd.DataFrame) -> pd.Series:
    flag = lambda col: int(group[col].astype(bool).sum()) if col in group else len(group)
    return pd.Series(
        {
            "specs": len(group),
            "$P$": f"{group['total'].min()}--{group['total'].max()}",
            "agree": flag("agree"),
            "invariant": flag("invariant"),
            "directions": flag("directions_ok"),
            r"min $\sigma_{\mathrm{kept}}$": group["sigma_kept"].min(),
            r"max $\sigma_{\mathrm{drop}}$": group["sigma_dropped"].max(),
            "gap (dec.)": group["gap"].min(),
            "margin (dec.)": group["margin"].min(),
        }
    )


table = df.groupby("family", sort=False).apply(summary, include_groups=False).reset_index()
total = summary(df)
total["family"] = "all"
table = pd.concat([table, total.to_frame().T], ignore_index=True)
for col in ("specs", "agree", "invariant", "directions"):
    table[col] = table[col].astype(int)
for col in (r"min $\sigma_{\mathrm{kept}}$", r"max $\sigma_{\mathrm{drop}}$", "gap (dec.)", "margin (dec.)"):
    table[col] = table[col].astype(float)
table["family"] = [FAMILY_NAMES.get(f, f.replace("_", " ")) for f in table["family"]]
atomic_write_csv(snakemake.output.csv, table)
for col in (r"min $\sigma_{\mathrm{kept}}$", r"max $\sigma_{\mathrm{drop}}$"):
    table[col] = [scientific(x) for x in table[col]]
table = table.rename(columns={"gap (dec.)": "gap", "margin (dec.)": "margin"})
write_table(table, snakemake.output.tex, None, formats={"gap": ".1f", "margin": ".1f"}, escape_cells=False)
print(table.to_string())
