# Whole models: exact counts of every parameter of a language model (attnid.model), judged by the
# Jacobian of all logits on this project's model function and on real transformers language models
# (the verification rule fails on any disagreement); the whole-model counts of every shipped config
# beside its attention layers alone, and the figure of where the unidentified parameters live.

WHOLE = config["whole_model"]


rule whole_model_verification:
    input:
        script_inputs("whole_model_verification.py"),
    output:
        report(f"{RESULTS}/whole_model/verification.csv", category="Checks"),
    log:
        logfile("whole_model_verification"),
    benchmark:
        benchfile("whole_model_verification")
    conda:
        CONDA_ENV
    threads: 2
    params:
        cfg=WHOLE,
    script:
        "../scripts/whole_model_verification.py"


rule whole_model_table:
    input:
        script_inputs("whole_model_table.py"),
    output:
        tex=f"{RESULTS}/tables/whole_model.tex",
        csv=report(f"{RESULTS}/tables/whole_model.csv", category="Tables"),
    log:
        logfile("whole_model_table"),
    conda:
        CONDA_ENV
    script:
        "../scripts/whole_model_table.py"


rule fig_whole_model:
    input:
        script_inputs("fig_whole_model.py"),
        whole_model=f"{RESULTS}/tables/whole_model.csv",
    output:
        pdf=f"{RESULTS}/figures/whole_model.pdf",
        png=report(
            f"{RESULTS}/figures/whole_model.png",
            caption="../report/whole_model.rst",
            category="Counting",
        ),
    log:
        logfile("fig_whole_model"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_whole_model.py"


rule whole_model_macros:
    input:
        script_inputs("whole_model_macros.py"),
        verification=f"{RESULTS}/whole_model/verification.csv",
        table=f"{RESULTS}/tables/whole_model.csv",
    output:
        f"{RESULTS}/macros/whole_model.tex",
    log:
        logfile("whole_model_macros"),
    conda:
        CONDA_ENV
    script:
        "../scripts/whole_model_macros.py"


MACRO_FRAGMENTS.append(rules.whole_model_macros.output[0])
TARGETS["data"] += [
    rules.whole_model_verification.output[0],
    rules.whole_model_macros.output[0],
]
TARGETS["tables"] += [
    rules.whole_model_table.output.tex,
    rules.whole_model_table.output.csv,
]
TARGETS["figures"] += [
    rules.fig_whole_model.output.pdf,
    rules.fig_whole_model.output.png,
]
