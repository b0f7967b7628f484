"""results/tables/real_heads.tex/.csv: the real-head family, one row per spec: head size, rotated
planes, base, heads and KV groups, d_model, P, method, predicted and measured unidentified
dimension, smallest kept singular value (relative), margin over the tolerance and gap (decades)."""

from attnid.io import log_to, read_result
from attnid.jacobian import real_heads_table
from attnid.report.latex import write_table

log_to(snakemake.log[0])
table = real_heads_table(read_result(snakemake.input[0], columns=["label", "margin", "gap", "method"]))
write_table(
    table,
    snakemake.output.tex,
    snakemake.output.csv,
    formats={"tol.": ".0e", "kept": ".1e", "margin": ".1f", "gap": ".1f"},
)
print(table.to_string())
