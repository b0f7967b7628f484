"""results/macros/counting.tex: the numbers of the counting results that the paper cites.

Families (a closed-form ratio per spec family, three numbers per real architecture) are written
only for the members the paper cites (attnid.report.macros.paper_citations).
"""

from pathlib import Path

from attnid.io import atomic_write_text, log_to, read_result
from attnid.report.latex import macro_name, number
from attnid.report.macros import fragment, paper_citations
from attnid.layer.symbolic import latex_macros

log = log_to(snakemake.log[0])
ratios = read_result(snakemake.input.ratios, keep_default_na=False)
arch = read_result(snakemake.input.architectures, keep_default_na=False)
cited = paper_citations(Path(p).read_text() for p in snakemake.input.paper)

family = dict(latex_macros())  # closed-form ratios, e.g. \RatioMHA = \frac{1}{2 H}
for row in arch.itertuples():
    family[macro_name("Unidentified", row.model)] = number(int(row.model_unidentified))
    family[macro_name("UnidentifiedPct", row.model)] = number(100 * row.ratio, ".3f")
    family[macro_name("AttnParams", row.model)] = number(int(row.model_total))
values = {k: v for k, v in family.items() if k in cited}
values["CountGridDModel"] = str(int(ratios.d_model.iloc[0]))
values["CountGridSpecs"] = str(len(ratios))
values["CountGridMinRatio"] = number(ratios.ratio.min(), ".4f")
values["CountGridMinUnidentified"] = str(int(ratios.unidentified.min()))
values["NumArchitectures"] = str(len(arch))
atomic_write_text(snakemake.output[0], fragment(values, "workflow/scripts/macros_counting.py"))
log.info("%d macros", len(values))
