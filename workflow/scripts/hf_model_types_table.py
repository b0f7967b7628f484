"""results/tables/hf_model_types.tex/.csv: the coverage of the installed `transformers`, by status and reason.

One row per class of model type: mapped (the whole model counted, its layers only, or a default config that
does not map), then refused by category (attnid.hf.refusals.CATEGORIES); how many types, and which.
"""

from attnid.hf.coverage import coverage_by_category
from attnid.io import log_to, read_result
from attnid.report.latex import write_table

log_to(snakemake.log[0])
df = read_result(snakemake.input[0], columns=["model_type", "status", "category", "counted"])
table = coverage_by_category(df).rename(columns={"types": "model types"})
write_table(table, snakemake.output.tex, snakemake.output.csv, align=r"lrp{0.68\textwidth}")
print(table[["class", "count"]].to_string(index=False))
