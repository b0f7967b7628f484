"""results/tables/verification.tex/.csv: the verification grid summarised by family.

One row per family: number of specs, parameter range, how many agree (measured = predicted),
are invariant (half batch, other seeds) and have their symmetry directions in the null space,
the smallest kept and the largest dropped singular value (relative), the worst gap and the worst
margin of the smallest kept value over the rank tolerance (decades).
"""

import pandas as pd

from attnid.io import log_to, read_result
from attnid.report.latex import write_table

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
table["family"] = table["family"].str.replace("_", " ")
formats = {
    r"min $\sigma_{\mathrm{kept}}$": ".1e", r"max $\sigma_{\mathrm{drop}}$": ".1e", "gap (dec.)": ".1f", "margin (dec.)": ".1f"
}  # fmt: skip
write_table(table, snakemake.output.tex, snakemake.output.csv, formats=formats)
print(table.to_string())
