"""results/tables/symmetry.{tex,csv}: the worst value of every symmetry check over the grid, with its bound.

The CSV is attnid.symmetry.checks.summarize_checks as computed; the LaTeX table (attnid.report.tables.
symmetry_table) fits one column of the paper: the check named in a wrapped first column, the worst value
over the specs it ran on, its bound written as a power of ten where it is one, and the number of specs.
"""

from attnid.io import atomic_write_csv, atomic_write_text, log_to, read_result
from attnid.report.latex import booktabs
from attnid.report.tables import SYMMETRY_CHECK_COLUMN, symmetry_table
from attnid.symmetry.checks import summarize_checks

log_to(snakemake.log[0])
summary = summarize_checks(read_result(snakemake.input[0]))
atomic_write_csv(snakemake.output.csv, summary)
tex = booktabs(symmetry_table(summary), align=SYMMETRY_CHECK_COLUMN + "rrr", escape_cells=False)
atomic_write_text(snakemake.output.tex, tex)
print(summary.to_string(index=False))
