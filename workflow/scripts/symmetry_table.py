"""results/tables/symmetry.{tex,csv}: the worst value of every symmetry check over the grid, with its bound."""

from attnid.io import atomic_write_csv, atomic_write_text, log_to, read_result
from attnid.report.latex import booktabs
from attnid.report.tables import symmetry_table
from attnid.symmetry.checks import summarize_checks

log_to(snakemake.log[0])
summary = summarize_checks(read_result(snakemake.input[0]))
atomic_write_csv(snakemake.output.csv, summary)
atomic_write_text(snakemake.output.tex, booktabs(symmetry_table(summary), align="lrrr", escape_cells=False))
print(summary.to_string(index=False))
