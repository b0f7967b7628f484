# Real models: every real `transformers` attention module of the configured cases, built from a
# shrunk published config with random float64 weights, measured as P - rank of its Jacobian and
# compared with the count of the mapped spec (attnid.hf). The measurement rule fails on any
# disagreement.

HF = config["hf"]


rule hf_modules:
    input:
        script_inputs("hf_modules.py"),
        HF_CONFIGS,
    output:
        f"{RESULTS}/hf/modules.csv",
    log:
        logfile("hf_modules"),
    benchmark:
        benchfile("hf_modules")
    conda:
        CONDA_ENV
    threads: 2
    params:
        cfg=HF,
    script:
        "../scripts/hf_modules.py"


rule hf_verification:
    input:
        f"{RESULTS}/hf/modules.csv",
        script_inputs("hf_table.py"),
    output:
        tex=f"{RESULTS}/tables/hf_modules.tex",
        csv=report(f"{RESULTS}/tables/hf_modules.csv", category="Tables"),
    log:
        logfile("hf_verification"),
    conda:
        CONDA_ENV
    script:
        "../scripts/hf_table.py"


rule hf_macros:
    input:
        script_inputs("hf_macros.py"),
        modules=f"{RESULTS}/hf/modules.csv",
    output:
        f"{RESULTS}/macros/hf.tex",
    log:
        logfile("hf_macros"),
    conda:
        CONDA_ENV
    script:
        "../scripts/hf_macros.py"


TARGETS["data"] += [rules.hf_modules.output[0], rules.hf_macros.output[0]]
TARGETS["tables"] += [
    rules.hf_verification.output.tex,
    rules.hf_verification.output.csv,
]
MACRO_FRAGMENTS.append(rules.hf_macros.output[0])
