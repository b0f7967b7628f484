# The paper: rule `macros` gathers every number of the text into results/tables/macros.tex;
# rule `paper` builds results/paper/main.pdf with latexmk from paper/ and the generated tables,
# figures and macros. Include this file last: its inputs are the other topics' outputs.


rule macros:
    input:
        script_inputs("macros.py"),
        fragments=lambda wildcards: MACRO_FRAGMENTS,
        paper=PAPER_SOURCES,
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
        script_inputs("paper.py"),
        tex=PAPER_SOURCES,
        bib=os.path.relpath(os.path.join(REPO, "paper", "references.bib")),
        macros=rules.macros.output[0],
        tables=lambda wildcards: TARGETS["tables"],
        figures=lambda wildcards: [f for f in TARGETS["figures"] if f.endswith(".pdf")],
    output:
        pdf=report(f"{RESULTS}/paper/main.pdf", category="Paper"),
    log:
        logfile("paper"),
    conda:
        CONDA_ENV
    script:
        "../scripts/paper.py"


TARGETS["paper"] += [rules.paper.output.pdf]
