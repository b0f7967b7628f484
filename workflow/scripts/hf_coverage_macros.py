r"""results/macros/coverage.tex: the coverage numbers the paper's appendix cites (\Coverage...).

Classified (results/hf/model_types.csv): model types of the installed transformers, mapped, mapped with the whole
model counted, refused, refused with attention the count models but no mapper yet, and the transformers version.
Checked (results/hf/coverage.csv): how many types the preset's self-check measured, how many parts (attention
layers and whole models), and how many types agree in every part.
"""

import transformers

from attnid.io import atomic_write_text, log_to, read_result
from attnid.report.latex import number
from attnid.report.macros import fragment

log = log_to(snakemake.log[0])
types = read_result(snakemake.input.model_types, columns=["model_type", "status", "category", "counted"])
checked = read_result(snakemake.input.coverage, columns=["model_type", "part", "verdict"])
mapped = types[types["status"] == "mapped"]
agree = checked.groupby("model_type")["verdict"].apply(lambda v: (v == "agree").all())
values = {
    "CoverageTypes": number(len(types)),
    "CoverageMapped": number(len(mapped)),
    "CoverageMappedWhole": number(int((mapped["counted"] == "whole model").sum())),
    "CoverageRefused": number(int((types["status"] == "refused").sum())),
    "CoverageNotYetMapped": number(int((types["category"] == "not yet mapped").sum())),
    "CoverageTransformers": transformers.__version__,
    "CoverageChecked": number(checked["model_type"].nunique()),
    "CoverageCheckedParts": number(len(checked)),
    "CoverageCheckedAgree": number(int(agree.sum())),
}
atomic_write_text(snakemake.output[0], fragment(values, "workflow/scripts/hf_coverage_macros.py"))
log.info("%s", values)
