# Notebooks: executed by Snakemake's `notebook:` directive, which keeps the copy being executed as the
# rule's notebook log (results/<preset>/logs/notebooks/). They read results and figures, never recompute
# them; each writes a small JSON of what it read (its output, so the rule has a target). Rule
# nb_publish then publishes the executed copy, only when every cell ran, under results/notebooks/
# (atomically, with its HTML): an interrupted notebook leaves a log, never a file that looks finished.
# Include after figures.smk (they show its figures).


rule nb_counting:
    input:
        script_inputs("01_counting.py.ipynb"),
        ratios=f"{RESULTS}/counting/ratios.csv",
        architectures=f"{RESULTS}/counting/architectures.csv",
        closed_forms=f"{RESULTS}/counting/closed_forms.csv",
        fig_ratio=rules.fig_ratio.output.png,
        fig_architectures=rules.fig_architectures.output.png,
    output:
        summary=f"{RESULTS}/notebooks/01_counting.json",
    log:
        notebook=f"{RESULTS}/logs/notebooks/01_counting.ipynb",
    conda:
        CONDA_ENV
    notebook:
        "../../notebooks/01_counting.py.ipynb"


rule nb_jacobian:
    input:
        script_inputs("02_jacobian.py.ipynb"),
        verification=f"{RESULTS}/jacobian/verification.csv",
        ratio_points=f"{RESULTS}/jacobian/ratio_points.csv",
        bias_effects=f"{RESULTS}/tables/bias_effects.csv",
        symmetry=f"{RESULTS}/symmetry/checks.csv",
        fig_spectrum=f"{RESULTS}/figures/jacobian_spectrum.png",
        fig_ratio=rules.fig_ratio.output.png,
    output:
        summary=f"{RESULTS}/notebooks/02_jacobian.json",
    log:
        notebook=f"{RESULTS}/logs/notebooks/02_jacobian.ipynb",
    conda:
        CONDA_ENV
    notebook:
        "../../notebooks/02_jacobian.py.ipynb"


rule nb_training:
    input:
        script_inputs("03_training.py.ipynb"),
        metrics=f"{RESULTS}/training/metrics.parquet",
        summary=f"{RESULTS}/training/summary.parquet",
        fig_overlap=rules.fig_overlap.output.png,
        fig_loss=rules.fig_loss.output.png,
        fig_conserved=rules.fig_conserved.output.png,
    output:
        summary=f"{RESULTS}/notebooks/03_training.json",
    log:
        notebook=f"{RESULTS}/logs/notebooks/03_training.ipynb",
    conda:
        CONDA_ENV
    notebook:
        "../../notebooks/03_training.py.ipynb"


# The executed notebooks, published with their HTML (linked from `snakemake --report`, category Notebooks).
rule nb_publish:
    input:
        script_inputs("notebook_publish.py"),
        executed=f"{RESULTS}/notebooks/{{name}}.json",
    output:
        notebook=f"{RESULTS}/notebooks/{{name}}.ipynb",
        html=report(f"{RESULTS}/notebooks/{{name}}.html", category="Notebooks"),
    log:
        logfile("nb_publish/{name}"),
    wildcard_constraints:
        name=r"\d\d_[a-z_]+",
    conda:
        CONDA_ENV
    params:
        executed=lambda wildcards: f"{RESULTS}/logs/notebooks/{wildcards.name}.ipynb",
    script:
        "../scripts/notebook_publish.py"


TARGETS["notebooks"] += [
    *rules.nb_counting.output,
    *rules.nb_jacobian.output,
    *rules.nb_training.output,
]
TARGETS["notebooks"] += [
    f.replace(".json", suffix)
    for f in list(TARGETS["notebooks"])
    if f.endswith(".json")
    for suffix in (".ipynb", ".html")
]
