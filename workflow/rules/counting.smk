# Exact counts: the ratio grid, real architectures, closed forms, their tables and macros.


rule counting_ratios:
    input:
        script_inputs("counting_ratios.py"),
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
    input:
        script_inputs("counting_architectures.py"),
        HF_CONFIGS,
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
    input:
        script_inputs("counting_closed_forms.py"),
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
        script_inputs("table_counting.py"),
    output:
        tex=f"{RESULTS}/tables/counting.tex",
        csv=report(f"{RESULTS}/tables/counting.csv", category="Tables"),
    log:
        logfile("table_counting"),
    conda:
        CONDA_ENV
    script:
        "../scripts/table_counting.py"


rule table_architectures:
    input:
        f"{RESULTS}/counting/architectures.csv",
        script_inputs("table_architectures.py"),
    output:
        tex=f"{RESULTS}/tables/architectures.tex",
        csv=report(f"{RESULTS}/tables/architectures.csv", category="Tables"),
    log:
        logfile("table_architectures"),
    conda:
        CONDA_ENV
    script:
        "../scripts/table_architectures.py"


rule macros_counting:
    input:
        script_inputs("macros_counting.py"),
        ratios=f"{RESULTS}/counting/ratios.csv",
        architectures=f"{RESULTS}/counting/architectures.csv",
        paper=PAPER_SOURCES,
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
