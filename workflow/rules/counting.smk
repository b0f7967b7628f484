# Exact counts (issue 2): the ratio grid, real architectures, closed forms, their tables and macros.


rule counting_ratios:
    output:
        f"{RESULTS}/counting/ratios.csv",
    log:
        logfile("counting_ratios"),
    benchmark:
        benchfile("counting_ratios")
    conda:
        CONDA_ENV
    params:
        grid=config["counting"],
    script:
        "../scripts/counting_ratios.py"


rule counting_architectures:
    output:
        f"{RESULTS}/counting/architectures.csv",
    log:
        logfile("counting_architectures"),
    benchmark:
        benchfile("counting_architectures")
    conda:
        CONDA_ENV
    script:
        "../scripts/counting_architectures.py"


rule counting_closed_forms:
    output:
        tex=f"{RESULTS}/counting/closed_forms.tex",
        csv=f"{RESULTS}/counting/closed_forms.csv",
    log:
        logfile("counting_closed_forms"),
    conda:
        CONDA_ENV
    script:
        "../scripts/counting_closed_forms.py"


rule table_counting:
    input:
        f"{RESULTS}/counting/ratios.csv",
    output:
        tex=f"{RESULTS}/tables/counting.tex",
        csv=f"{RESULTS}/tables/counting.csv",
    log:
        logfile("table_counting"),
    conda:
        CONDA_ENV
    script:
        "../scripts/table_counting.py"


rule table_architectures:
    input:
        f"{RESULTS}/counting/architectures.csv",
    output:
        tex=f"{RESULTS}/tables/architectures.tex",
        csv=f"{RESULTS}/tables/architectures.csv",
    log:
        logfile("table_architectures"),
    conda:
        CONDA_ENV
    script:
        "../scripts/table_architectures.py"


rule macros_counting:
    input:
        ratios=f"{RESULTS}/counting/ratios.csv",
        architectures=f"{RESULTS}/counting/architectures.csv",
    output:
        f"{RESULTS}/macros/counting.tex",
    log:
        logfile("macros_counting"),
    conda:
        CONDA_ENV
    script:
        "../scripts/macros_counting.py"


TARGETS["data"] += [
    rules.counting_closed_forms.output.csv,
    *rules.macros_counting.output,
]
TARGETS["tables"] += [
    rules.counting_closed_forms.output.tex,
    *rules.table_counting.output,
    *rules.table_architectures.output,
]
MACRO_FRAGMENTS.append(rules.macros_counting.output[0])
