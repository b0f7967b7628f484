# Figures: one rule per figure, named after it; each reads aggregated results only
# (never per-run files) and writes results/figures/<name>.pdf (paper) and .png (notebooks, report).
# The PNG goes into `snakemake --report` with its caption (workflow/report/<name>.rst).
# Include this file after the topic files whose results it plots.


rule fig_ratio:
    input:
        script_inputs("fig_ratio.py"),
        ratios=f"{RESULTS}/counting/ratios.csv",
        points=f"{RESULTS}/jacobian/ratio_points.csv",
    output:
        pdf=f"{RESULTS}/figures/ratio.pdf",
        png=report(
            f"{RESULTS}/figures/ratio.png",
            caption="../report/ratio.rst",
            category="Counting",
        ),
    log:
        logfile("fig_ratio"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_ratio.py"


rule fig_architectures:
    input:
        script_inputs("fig_architectures.py"),
        architectures=f"{RESULTS}/counting/architectures.csv",
    output:
        pdf=f"{RESULTS}/figures/architectures.pdf",
        png=report(
            f"{RESULTS}/figures/architectures.png",
            caption="../report/architectures.rst",
            category="Counting",
        ),
    log:
        logfile("fig_architectures"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_architectures.py"


rule fig_overlap:
    input:
        script_inputs("fig_overlap.py"),
        summary=f"{RESULTS}/training/summary.parquet",
    output:
        pdf=f"{RESULTS}/figures/overlap.pdf",
        png=report(
            f"{RESULTS}/figures/overlap.png",
            caption="../report/overlap.rst",
            category="Training",
        ),
    log:
        logfile("fig_overlap"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_overlap.py"


rule fig_loss:
    input:
        script_inputs("fig_loss.py"),
        metrics=f"{RESULTS}/training/metrics.parquet",
        summary=f"{RESULTS}/training/summary.parquet",
    output:
        pdf=f"{RESULTS}/figures/loss.pdf",
        png=report(
            f"{RESULTS}/figures/loss.png",
            caption="../report/loss.rst",
            category="Training",
        ),
    log:
        logfile("fig_loss"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_loss.py"


rule fig_conserved:
    input:
        script_inputs("fig_conserved.py"),
        metrics=f"{RESULTS}/training/metrics.parquet",
        summary=f"{RESULTS}/training/summary.parquet",
    output:
        pdf=f"{RESULTS}/figures/conserved.pdf",
        png=report(
            f"{RESULTS}/figures/conserved.png",
            caption="../report/conserved.rst",
            category="Training",
        ),
    log:
        logfile("fig_conserved"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_conserved.py"


TARGETS["figures"] += [
    *rules.fig_ratio.output,
    *rules.fig_architectures.output,
    *rules.fig_overlap.output,
    *rules.fig_loss.output,
    *rules.fig_conserved.output,
]
