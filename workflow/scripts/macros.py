r"""Rule `macros`: the topic fragments (results/macros/<topic>.tex) -> results/tables/macros.tex.

Stops, naming the macro, when the paper cites a generated-style macro that no fragment defines or
a macro is defined twice; logs the generated macros the paper does not cite (attnid.report.macros).
"""

from pathlib import Path

from attnid.io import atomic_write_text, log_to
from attnid.report.latex import defined_names
from attnid.report.macros import citation_mismatch, combine, paper_citations

if __name__ == "__main__" and "snakemake" in globals():
    log = log_to(snakemake.log[0])
    fragments = {str(p): Path(p).read_text() for p in snakemake.input.fragments}
    text = combine(fragments)
    cited = paper_citations(Path(p).read_text() for p in snakemake.input.paper)
    uncited, missing = citation_mismatch(defined_names(text), cited)
    log.info(
        "%d macros from %d fragments; generated but not cited: %s", len(defined_names(text)), len(fragments), uncited
    )
    if missing:
        raise SystemExit("the paper cites macros that no rule generates: " + ", ".join("\\" + n for n in missing))
    atomic_write_text(snakemake.output[0], text)
