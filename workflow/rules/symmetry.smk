# Symmetry toolkit checks: every property of attnid.symmetry measured on a grid of specs,
# a summary table for the paper and its macros. Grid from config `symmetry:`.


rule symmetry_checks:
    input:
        script_inputs("symmetry_checks.py"),
    output:
        report(f"{RESULTS}/symmetry/checks.csv", category="Checks"),
    log:
        logfile("symmetry_checks"),
    benchmark:
        benchfile("symmetry_checks")
    conda:
        CONDA_ENV
    threads: 1  # many tiny float64 problems: torch uses exactly this many threads
    params:
        grid=config["symmetry"],
    script:
        "../scripts/symmetry_checks.py"


rule symmetry_table:
    input:
        f"{RESULTS}/symmetry/checks.csv",
        script_inputs("symmetry_table.py"),
    output:
        tex=f"{RESULTS}/tables/symmetry.tex",
        csv=report(f"{RESULTS}/tables/symmetry.csv", category="Tables"),
    log:
        logfile("symmetry_table"),
    conda:
        CONDA_ENV
    script:
        "../scripts/symmetry_table.py"


rule symmetry_macros:
    input:
        script_inputs("symmetry_macros.py"),
        checks=f"{RESULTS}/symmetry/checks.csv",
        summary=f"{RESULTS}/tables/symmetry.csv",
    output:
        f"{RESULTS}/macros/symmetry.tex",
    log:
        logfile("symmetry_macros"),
    conda:
        CONDA_ENV
    script:
        "../scripts/symmetry_macros.py"


TARGETS["data"] += [*rules.symmetry_checks.output, *rules.symmetry_macros.output]
TARGETS["tables"] += [rules.symmetry_table.output.tex, rules.symmetry_table.output.csv]
MACRO_FRAGMENTS.append(rules.symmetry_macros.output[0])
