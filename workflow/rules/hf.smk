# Real models: every real `transformers` attention module of the configured cases, built from a
# shrunk published config with random float64 weights, measured as P - rank of its Jacobian and
# compared with the count of the mapped spec (attnid.hf). The measurement rule fails on any
# disagreement. The coverage: every model type of the installed transformers, mapped or refused and
# why (attnid.hf.coverage), and the self-check of the configured types' default configs (every
# attention layer and the whole model inside the real class), which fails on any disagreement too.
import glob

HF = config["hf"]
COVERAGE = HF["coverage"]
if COVERAGE == "mapped":  # every mapped type of the installed transformers, one job each
    from attnid.hf.coverage import mapped_types

    COVERAGE_TYPES = mapped_types()
else:
    COVERAGE_TYPES = list(COVERAGE)
# The mapping families are found by name when the mapping is imported, not imported by name: list them.
MAPPING_FAMILIES = sorted(
    os.path.relpath(p)
    for p in glob.glob(os.path.join(PACKAGE_SRC, "attnid", "hf", "mapping", "*.py"))
)


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


rule hf_model_types:
    input:
        script_inputs("hf_model_types.py"),
        MAPPING_FAMILIES,
    output:
        f"{RESULTS}/hf/model_types.csv",
    log:
        logfile("hf_model_types"),
    conda:
        CONDA_ENV
    script:
        "../scripts/hf_model_types.py"


rule hf_model_types_table:
    input:
        f"{RESULTS}/hf/model_types.csv",
        script_inputs("hf_model_types_table.py"),
    output:
        tex=f"{RESULTS}/tables/hf_model_types.tex",
        csv=report(f"{RESULTS}/tables/hf_model_types.csv", category="Tables"),
    log:
        logfile("hf_model_types_table"),
    conda:
        CONDA_ENV
    script:
        "../scripts/hf_model_types_table.py"


rule hf_check:
    input:
        script_inputs("hf_check.py"),
        MAPPING_FAMILIES,
        HF_CONFIGS,
    output:
        f"{RESULTS}/hf/checks/{{model_type}}.csv",
    log:
        logfile("hf_check_{model_type}"),
    benchmark:
        benchfile("hf_check_{model_type}")
    conda:
        CONDA_ENV
    threads: 1
    params:
        cfg={"seed": HF["seed"], "oversample": HF["oversample"], "sketch": HF.get("sketch", True)},
    script:
        "../scripts/hf_check.py"


rule hf_coverage:
    input:
        script_inputs("hf_coverage.py"),
        checks=expand(f"{RESULTS}/hf/checks/{{model_type}}.csv", model_type=COVERAGE_TYPES),
    output:
        report(f"{RESULTS}/hf/coverage.csv", category="Checks"),
    log:
        logfile("hf_coverage"),
    conda:
        CONDA_ENV
    script:
        "../scripts/hf_coverage.py"


rule hf_coverage_table:
    input:
        script_inputs("hf_coverage_table.py"),
        coverage=f"{RESULTS}/hf/coverage.csv",
    output:
        tex=f"{RESULTS}/tables/hf_coverage.tex",
        csv=report(f"{RESULTS}/tables/hf_coverage.csv", category="Tables"),
    log:
        logfile("hf_coverage_table"),
    conda:
        CONDA_ENV
    script:
        "../scripts/hf_coverage_table.py"


rule hf_coverage_macros:
    input:
        script_inputs("hf_coverage_macros.py"),
        model_types=f"{RESULTS}/hf/model_types.csv",
        coverage=f"{RESULTS}/hf/coverage.csv",
    output:
        f"{RESULTS}/macros/coverage.tex",
    log:
        logfile("hf_coverage_macros"),
    conda:
        CONDA_ENV
    script:
        "../scripts/hf_coverage_macros.py"


TARGETS["data"] += [
    rules.hf_modules.output[0],
    rules.hf_macros.output[0],
    rules.hf_model_types.output[0],
    rules.hf_coverage.output[0],
    rules.hf_coverage_macros.output[0],
]
TARGETS["tables"] += [
    rules.hf_verification.output.tex,
    rules.hf_verification.output.csv,
    rules.hf_model_types_table.output.tex,
    rules.hf_model_types_table.output.csv,
    rules.hf_coverage_table.output.tex,
    rules.hf_coverage_table.output.csv,
]
MACRO_FRAGMENTS += [rules.hf_macros.output[0], rules.hf_coverage_macros.output[0]]
