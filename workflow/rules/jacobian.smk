# Jacobian verification: every count measured as P - rank of the Jacobian at random points
# (attnid.jacobian). Each rule fails, listing the specs, when any spec fails or cannot be decided.

JACOBIAN = config["jacobian"]
JAC = f"{RESULTS}/jacobian"


# A GPU request when the config runs on CUDA (the SLURM plugin turns it into --gpus=1).
JACOBIAN_GPU = 1 if config["device"] == "cuda" else 0


rule jacobian_verification:
    input:
        script_inputs("jacobian_verification.py"),
    output:
        report(f"{JAC}/verification.csv", category="Checks"),
    log:
        logfile("jacobian_verification"),
    benchmark:
        benchfile("jacobian_verification")
    conda:
        CONDA_ENV
    threads: 2
    resources:
        gpu=JACOBIAN_GPU,
    params:
        cfg=JACOBIAN,
        device=config.get("device", "cpu"),
    script:
        "../scripts/jacobian_verification.py"


rule jacobian_ratio_points:
    input:
        f"{RESULTS}/counting/ratios.csv",
        script_inputs("jacobian_ratio_points.py"),
    output:
        f"{JAC}/ratio_points.csv",
    log:
        logfile("jacobian_ratio_points"),
    benchmark:
        benchfile("jacobian_ratio_points")
    conda:
        CONDA_ENV
    threads: 2
    resources:
        gpu=JACOBIAN_GPU,
    params:
        cfg=JACOBIAN,
        device=config.get("device", "cpu"),
    script:
        "../scripts/jacobian_ratio_points.py"


rule jacobian_spectra:
    input:
        script_inputs("jacobian_spectra.py"),
    output:
        f"{JAC}/spectra.csv",
    log:
        logfile("jacobian_spectra"),
    benchmark:
        benchfile("jacobian_spectra")
    conda:
        CONDA_ENV
    threads: 2
    resources:
        gpu=JACOBIAN_GPU,
    params:
        cfg=JACOBIAN,
        device=config.get("device", "cpu"),
    script:
        "../scripts/jacobian_spectra.py"


rule jacobian_bias_effects:
    input:
        script_inputs("jacobian_bias_effects.py"),
    output:
        f"{JAC}/bias_effects.csv",
    log:
        logfile("jacobian_bias_effects"),
    benchmark:
        benchfile("jacobian_bias_effects")
    conda:
        CONDA_ENV
    threads: 2
    resources:
        gpu=JACOBIAN_GPU,
    params:
        cfg=JACOBIAN,
        device=config.get("device", "cpu"),
    script:
        "../scripts/jacobian_bias_effects.py"


rule jacobian_table_verification:
    input:
        f"{JAC}/verification.csv",
        script_inputs("jacobian_table_verification.py"),
    output:
        tex=f"{RESULTS}/tables/verification.tex",
        csv=report(f"{RESULTS}/tables/verification.csv", category="Tables"),
    log:
        logfile("jacobian_table_verification"),
    conda:
        CONDA_ENV
    script:
        "../scripts/jacobian_table_verification.py"


rule jacobian_table_bias_effects:
    input:
        f"{JAC}/bias_effects.csv",
        script_inputs("jacobian_table_bias_effects.py"),
    output:
        tex=f"{RESULTS}/tables/bias_effects.tex",
        csv=report(f"{RESULTS}/tables/bias_effects.csv", category="Tables"),
    log:
        logfile("jacobian_table_bias_effects"),
    conda:
        CONDA_ENV
    script:
        "../scripts/jacobian_table_bias_effects.py"


rule fig_spectrum:
    input:
        script_inputs("fig_spectrum.py"),
        spectra=f"{JAC}/spectra.csv",
    output:
        pdf=f"{RESULTS}/figures/jacobian_spectrum.pdf",
        png=report(
            f"{RESULTS}/figures/jacobian_spectrum.png",
            caption="../report/spectrum.rst",
            category="Verification",
        ),
    log:
        logfile("fig_spectrum"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_spectrum.py"


if "large" in JACOBIAN:

    rule jacobian_large:
        input:
            script_inputs("jacobian_large.py"),
        output:
            f"{JAC}/large.json",
        log:
            logfile("jacobian_large"),
        benchmark:
            benchfile("jacobian_large")
        conda:
            CONDA_ENV
        threads: 2
        resources:
            mem_mb=8000,
            gpu=JACOBIAN_GPU,
        params:
            cfg=JACOBIAN,
            device=config.get("device", "cpu"),
        script:
            "../scripts/jacobian_large.py"

    TARGETS["data"].append(rules.jacobian_large.output[0])


rule jacobian_real_heads:
    input:
        script_inputs("jacobian_real_heads.py"),
    output:
        f"{JAC}/real_heads.csv",
    log:
        logfile("jacobian_real_heads"),
    benchmark:
        benchfile("jacobian_real_heads")
    conda:
        CONDA_ENV
    threads: 2
    resources:
        mem_mb=int(1024 * JACOBIAN["real_heads"]["max_memory_gb"]),
        gpu=JACOBIAN_GPU,
    params:
        cfg=JACOBIAN,
        device=config.get("device", "cpu"),
    script:
        "../scripts/jacobian_real_heads.py"


rule jacobian_table_real_heads:
    input:
        f"{JAC}/real_heads.csv",
        script_inputs("jacobian_table_real_heads.py"),
    output:
        tex=f"{RESULTS}/tables/real_heads.tex",
        csv=report(f"{RESULTS}/tables/real_heads.csv", category="Tables"),
    log:
        logfile("jacobian_table_real_heads"),
    conda:
        CONDA_ENV
    script:
        "../scripts/jacobian_table_real_heads.py"


rule jacobian_macros:
    input:
        script_inputs("jacobian_macros.py"),
        verification=f"{JAC}/verification.csv",
    output:
        f"{RESULTS}/macros/jacobian.tex",
    log:
        logfile("jacobian_macros"),
    conda:
        CONDA_ENV
    script:
        "../scripts/jacobian_macros.py"


TARGETS["data"] += [
    *rules.jacobian_verification.output,
    *rules.jacobian_ratio_points.output,
    *rules.jacobian_macros.output,
]
TARGETS["tables"] += [
    *rules.jacobian_table_verification.output,
    *rules.jacobian_table_real_heads.output,
    *rules.jacobian_table_bias_effects.output,
]
TARGETS["figures"] += [rules.fig_spectrum.output.pdf, rules.fig_spectrum.output.png]
MACRO_FRAGMENTS.append(rules.jacobian_macros.output[0])
