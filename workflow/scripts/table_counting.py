r"""results/tables/counting.{tex,csv}: the unidentified ratio by head count for the main variants.

The LaTeX headers of two words ('RoPE half', 'MHA+bias') are stacked on two lines (\shortstack) so
that the table fits one column of the paper; the CSV keeps them on one.
"""

from attnid.io import atomic_write_text, log_to, read_result
from attnid.report.latex import write_table
from attnid.report.tables import counting_table


def stacked(title: str) -> str:
    """'RoPE half' -> '\\shortstack{RoPE\\\\half}', 'MHA+bias' -> '\\shortstack{MHA\\\\+bias}'; others unchanged."""
    for sep, keep in ((" ", ""), ("+", "+")):
        if sep in title and not title.startswith("$"):
            first, rest = title.split(sep, 1)
            return rf"\shortstack{{{first}\\{keep}{rest}}}"
    return title


if __name__ == "__main__" and "snakemake" in globals():
    log = log_to(snakemake.log[0])
    table, formats = counting_table(read_result(snakemake.input[0], keep_default_na=False))
    atomic_write_text(snakemake.output.csv, table.to_csv(index=False))
    names = {c: stacked(c) for c in table.columns}
    write_table(table.rename(columns=names), snakemake.output.tex, formats={names[c]: f for c, f in formats.items()})
    log.info("\n%s", table.to_string(index=False))
