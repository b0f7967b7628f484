# The paper (issue 6): rule `macros` gathers every number of the text into results/tables/macros.tex;
# rule `paper` builds results/paper/main.pdf with latexmk from paper/ and the generated tables,
# figures and macros. Include this file last: its inputs are the other topics' outputs.

from pathlib import Path


rule macros:
    input:
        fragments=lambda wildcards: MACRO_FRAGMENTS,
        # aggregated results that macros.py summarises for the prose (Paper* macros)
        verification=f"{RESULTS}/jacobian/verification.csv",
        training=f"{RESULTS}/training/summary.parquet",
    output:
        f"{RESULTS}/tables/macros.tex",
    log:
        logfile("macros"),
    conda:
        CONDA_ENV
    script:
        "../scripts/macros.py"


rule paper:
    input:
        tex="paper/main.tex",
        sections=sorted(
            str(p) for p in Path("paper").glob("**/*.tex") if p.name != "main.tex"
        ),
        bib="paper/references.bib",
        macros=rules.macros.output[0],
        tables=lambda wildcards: TARGETS["tables"],
        figures=lambda wildcards: [f for f in TARGETS["figures"] if f.endswith(".pdf")],
    output:
        pdf=f"{RESULTS}/paper/main.pdf",
    log:
        logfile("paper"),
    conda:
        CONDA_ENV
    script:
        "../scripts/paper.py"


TARGETS["paper"] += [rules.paper.output.pdf]
