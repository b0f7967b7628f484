# Figures (issue 6): one rule per figure, named after it; each reads aggregated results only
# (never per-run files) and writes results/figures/<name>.pdf (paper) and .png (notebooks, report).
# Include this file after the topic files whose results it plots.

FIGLIB = (
    "workflow/scripts/figlib.py"  # shared plotting helpers: a change reruns the figures
)


def figure_output(name, category, subcategory=None):
    """PDF and PNG of one figure; the PNG goes into the Snakemake report with its caption."""
    return {
        "pdf": f"{RESULTS}/figures/{name}.pdf",
        "png": report(
            f"{RESULTS}/figures/{name}.png",
            caption=f"../report/{name}.rst",
            category=category,
            subcategory=subcategory,
        ),
    }


def producible(*paths):
    """True when some rule of the workflow writes every path (so the figure can be built)."""
    outputs = {str(f) for r in workflow.rules for f in r.output}
    return all(str(p) in outputs for p in paths)


rule fig_ratio:
    input:
        ratios=f"{RESULTS}/counting/ratios.csv",
        points=f"{RESULTS}/jacobian/ratio_points.csv",
        helper=FIGLIB,
    output:
        **figure_output("ratio", "Counting"),
    log:
        logfile("fig_ratio"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_ratio.py"


rule fig_architectures:
    input:
        architectures=f"{RESULTS}/counting/architectures.csv",
        helper=FIGLIB,
    output:
        **figure_output("architectures", "Counting"),
    log:
        logfile("fig_architectures"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_architectures.py"


rule fig_overlap:
    input:
        metrics=f"{RESULTS}/training/metrics.parquet",
        helper=FIGLIB,
    output:
        **figure_output("overlap", "Training"),
    log:
        logfile("fig_overlap"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_overlap.py"


rule fig_loss:
    input:
        metrics=f"{RESULTS}/training/metrics.parquet",
        helper=FIGLIB,
    output:
        **figure_output("loss", "Training"),
    log:
        logfile("fig_loss"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_loss.py"


rule fig_conserved:
    input:
        metrics=f"{RESULTS}/training/metrics.parquet",
        helper=FIGLIB,
    output:
        **figure_output("conserved", "Training"),
    log:
        logfile("fig_conserved"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_conserved.py"


FIGURE_RULES = [
    rules.fig_ratio,
    rules.fig_architectures,
    rules.fig_overlap,
    rules.fig_loss,
    rules.fig_conserved,
]
for figure_rule in FIGURE_RULES:
    data = [f for name, f in figure_rule.input.items() if name != "helper"]
    if producible(*data):
        TARGETS["figures"] += [figure_rule.output.pdf, figure_rule.output.png]
