r"""results/macros/whole_model.tex: the whole-model numbers the paper cites (\WholeModel..., \Whole<model>...).

Measured (results/whole_model/verification.csv): cases checked, how many agree, how many are real
`transformers` models, the worst gap. Counted (results/tables/whole_model.csv): for GPT-2 and
Llama-3-8B the unidentified share of the whole model, its unidentified parameters, and the share
of them the attention layers alone account for; how many shipped configs the count covers.
"""

from attnid.io import atomic_write_text, log_to, read_result
from attnid.report.latex import macro_name, number
from attnid.report.macros import fragment

log = log_to(snakemake.log[0])
checks = read_result(snakemake.input.verification, columns=["agree", "gap", "kind"])
shipped = read_result(snakemake.input.table, columns=["model", "status"])
values = {
    "WholeModelCases": str(len(checks)),
    "WholeModelAgree": str(int(checks["agree"].astype(bool).sum())),
    "WholeModelReal": str(int((checks["kind"] == "transformers").sum())),
    "WholeModelWorstGap": number(checks["gap"].min(), ".1f"),
    "WholeModelShipped": str(int((shipped["status"] == "ok").sum())),
    "WholeModelStored": str(len(shipped)),
}
for row in shipped[shipped["model"].isin(["gpt2", "llama3_8b"])].itertuples():
    values[macro_name("Whole", row.model, "Ratio")] = number(100 * row.ratio, ".3f")
    values[macro_name("Whole", row.model, "Unidentified")] = number(row.unidentified / 1e6, ".1f") + "M"
    values[macro_name("Whole", row.model, "AttentionShare")] = number(100 * row.attention_share_of_unidentified, ".0f")
atomic_write_text(snakemake.output[0], fragment(values, "workflow/scripts/whole_model_macros.py"))
log.info("%s", values)
