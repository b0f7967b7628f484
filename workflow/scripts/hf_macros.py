r"""results/macros/hf.tex: the real-module and modern-variant numbers the paper cites (\Hf..., \Variant...).

Measured (results/hf/modules.csv): how many of the real modules checked agree ('all 28'), the worst gap, the
range of the weakly identified singular values. Counted (attnid.layer.counting_variants.EXAMPLE_VARIANTS,
the same in every preset): unidentified and weakly identified dimensions of one small shape under
each variant.
"""

from attnid.layer.counting import count
from attnid.layer.counting_variants import EXAMPLE_SHAPE, EXAMPLE_VARIANTS
from attnid.io import atomic_write_text, log_to, read_result
from attnid.report.latex import macro_name, number, scientific
from attnid.report.macros import count_phrase, fragment
from attnid.layer.spec import AttentionSpec

log = log_to(snakemake.log[0])
df = read_result(snakemake.input.modules, columns=["agree", "gap", "weak_sigma_min", "weak_sigma_max"])
values = {
    "HfModulesAgreement": count_phrase(int(df["agree"].astype(bool).sum()), len(df)),
    "HfWorstGap": number(df["gap"].min(), ".1f"),
    "HfWeakSigmaMin": scientific(df["weak_sigma_min"].min()),
    "HfWeakSigmaMax": scientific(df["weak_sigma_max"].max()),
}
for name, fields in EXAMPLE_VARIANTS.items():
    counts = count(AttentionSpec(**{**EXAMPLE_SHAPE, **fields}))  # a variant may replace a field of the shape
    values[macro_name("Variant", name)] = str(counts.unidentified)
    if counts.weakly_identified:
        values[macro_name("VariantWeak", name)] = str(counts.weakly_identified)
atomic_write_text(snakemake.output[0], fragment(values, "workflow/scripts/hf_macros.py"))
log.info("%s", values)
