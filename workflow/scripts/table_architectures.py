"""results/tables/architectures.{tex,csv}: attention parameters of real models, identified and not."""

from attnid.io import log_to, read_result
from attnid.report.latex import write_table
from attnid.report.tables import architectures_table

log = log_to(snakemake.log[0])
table, formats = architectures_table(read_result(snakemake.input[0], keep_default_na=False))
write_table(table, snakemake.output.tex, snakemake.output.csv, formats=formats)
log.info("\n%s", table.to_string(index=False))
