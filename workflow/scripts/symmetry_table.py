r"""results/tables/symmetry.{tex,csv}: the worst value of every symmetry check over the grid, with its bound.

The CSV is attnid.symmetry.checks.summarize as computed. The LaTeX table fits one column of the paper:
the check named in a wrapped first column, the worst value over the specs it ran on, the bound it
must stay below (or above), written as a power of ten where it is one, and the number of specs.
"""

import math

import pandas as pd

from attnid.report.latex import booktabs, number

CHECK_COLUMN = r">{\raggedright\arraybackslash}p{3.1cm}"  # wrapped check names (package array)


def bound_text(direction: str, bound: float) -> str:
    """'$<10^{-10}$' for a power of ten, else '$<$ 0.5' (direction '<' or '>')."""
    exponent = math.log10(bound) if bound > 0 else math.nan
    if math.isfinite(exponent) and exponent == round(exponent) and exponent != 0:
        return f"${direction}10^{{{int(exponent)}}}$"
    return f"${direction}$ {number(bound)}"


def latex_table(summary: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for row in summary.itertuples():
        if row.direction == "=":  # the share of specs where dim T = count
            worst, bound = f"{round(row.worst * row.specs)}/{row.specs}", "all"
        else:
            worst, bound = number(row.worst, digits=2), bound_text(row.direction, row.bound)
        check = row.check.replace("dim T", "$\\dim T$")
        rows.append({"check": check, "worst": worst, "bound": bound, "specs": str(row.specs)})
    return pd.DataFrame(rows)


if __name__ == "__main__" and "snakemake" in globals():
    from attnid.io import atomic_write_csv, atomic_write_text, log_to, read_result
    from attnid.symmetry.checks import summarize

    log_to(snakemake.log[0])
    summary = summarize(read_result(snakemake.input[0]))
    atomic_write_csv(snakemake.output.csv, summary)
    tex = booktabs(latex_table(summary), align=CHECK_COLUMN + "rrr", escape_cells=False)
    atomic_write_text(snakemake.output.tex, tex)
    print(summary.to_string(index=False))
