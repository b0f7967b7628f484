r"""results/macros/whole_model.tex: the whole-model numbers the paper cites (\WholeModel..., \Whole<model>...).

Measured (results/whole_model/verification.csv): how many of the cases checked agree ('all 35'), how many are real
`transformers` models, the worst gap, how many are certified from both sides (the generators' rank as well). Counted (results/tables/whole_model.csv): for GPT-2 and
Llama-3-8B the unidentified share of the whole model, its unidentified parameters, and the share
of them the attention layers alone account for; how many of the shipped configs the count covers.
"""

from attnid.io import atomic_write_text, log_to, read_result
from attnid.report.latex import macro_name, number
from attnid.report.macros import count_phrase, fragment

log = log_to(snakemake.log[0])
checks = read_result(snakemake.input.verification, columns=["agree", "gap", "kind", "two_sided"])
shipped = read_result(snakemake.input.table, columns=["model", "status"])
values = {
    "WholeModelAgreement": count_phrase(int(checks["agree"].astype(bool).sum()), len(checks)),
    "WholeModelReal": str(int((checks["kind"] == "transformers").sum())),
    "WholeModelTwoSided": count_phrase(int(checks["two_sided"].fillna(False).astype(bool).sum()), len(checks)),
    "WholeModelWorstGap": number(checks["gap"].min(), ".1f"),
    "WholeModelCovered": count_phrase(int((shipped["status"] == "ok").sum()), len(shipped)),
}
for row in shipped[shipped["model"].isin(["gpt2", "llama3_8b"])].itertuples():
    values[macro_name("Whole", row.model, "Ratio")] = number(100 * row.ratio, ".3f")
    values[macro_name("Whole", row.model, "Unidentified")] = number(row.unidentified / 1e6, ".1f") + "M"
    values[macro_name("Whole", row.model, "AttentionShare")] = number(100 * row.attention_share_of_unidentified, ".0f")
atomic_write_text(snakemake.output[0], fragment(values, "workflow/scripts/whole_model_macros.py"))
log.info("%s", values)
