# Training sweeps with and without rebalancing: one job per (task, model, head count) trains every
# optimizer, rebalancing mode and seed batched in one process; then one aggregation. Grids, steps,
# seeds, models and optimizers come from config `training:` (attnid.training.runs).


include: "training_common.smk"


rule train_job:
    input:
        script_inputs("train_job.py"),
        unpack(train_job_corpus),
    output:
        metrics=f"{TRAIN_JOB}/metrics.parquet",
        summary=f"{TRAIN_JOB}/summary.parquet",
    log:
        logfile("training/{task}/{model}/h{heads}"),
    benchmark:
        benchfile("training/{task}/{model}/h{heads}")
    wildcard_constraints:
        task="[a-z_]+",
        model="[a-z0-9_]+",
        heads="[0-9]+",
    conda:
        CONDA_ENV
    threads: 1  # small batched models: torch uses exactly this many threads
    priority: train_job_priority
    resources:
        gpu=1 if config["device"] == "cuda" else 0,
    params:
        training=train_job_params,
        device=config["device"],
    script:
        "../scripts/train_job.py"


rule train_lr_study:
    input:
        script_inputs("train_lr_study.py"),
    output:
        metrics=f"{RESULTS}/training/lr_study/metrics.parquet",
        summary=f"{RESULTS}/training/lr_study/summary.parquet",
    log:
        logfile("training/lr_study"),
    benchmark:
        benchfile("training/lr_study")
    conda:
        CONDA_ENV
    threads: 1
    resources:
        gpu=1 if config["device"] == "cuda" else 0,
    params:
        training=lr_study_params(),
        device=config["device"],
    script:
        "../scripts/train_lr_study.py"


rule training_aggregate:
    input:
        script_inputs("training_aggregate.py"),
        summaries=training_outputs("summary.parquet"),
        metrics=training_outputs("metrics.parquet"),
        lr_summary=rules.train_lr_study.output.summary,
    output:
        summary=f"{RESULTS}/training/summary.parquet",
        metrics=f"{RESULTS}/training/metrics.parquet",
        checks=report(f"{RESULTS}/training/checks.csv", category="Checks"),
        convergence=report(f"{RESULTS}/training/convergence.csv", category="Checks"),
        tex=f"{RESULTS}/tables/training.tex",
        csv=report(f"{RESULTS}/tables/training.csv", category="Tables"),
        macros=f"{RESULTS}/macros/training.tex",
        decay=f"{RESULTS}/training/weight_decay.parquet",
        effects=f"{RESULTS}/training/rebalance_effects.parquet",
        effect_table=report(
            f"{RESULTS}/tables/rebalance_effects.csv", category="Tables"
        ),
    log:
        logfile("training_aggregate"),
    benchmark:
        benchfile("training_aggregate")
    conda:
        CONDA_ENV
    params:
        checks=TRAINING["checks"],
        converged=TRAINING["converged"],
        strict=TRAINING["strict"],
        target_fraction=TRAINING["target_fraction"],
        dtype=TRAINING["dtype"],
    script:
        "../scripts/training_aggregate.py"


TARGETS["data"] += [
    rules.training_aggregate.output.summary,
    rules.training_aggregate.output.metrics,
    rules.training_aggregate.output.checks,
    rules.training_aggregate.output.macros,
]
TARGETS["tables"] += [
    rules.training_aggregate.output.tex,
    rules.training_aggregate.output.csv,
]
MACRO_FRAGMENTS.append(rules.training_aggregate.output.macros)


# Figures of the training study (one rule per figure; each reads aggregated results only).


rule fig_weight_decay:
    input:
        script_inputs("fig_weight_decay.py"),
        decay=rules.training_aggregate.output.decay,
        lr_summary=rules.train_lr_study.output.summary,
    output:
        pdf=f"{RESULTS}/figures/weight_decay.pdf",
        png=report(
            f"{RESULTS}/figures/weight_decay.png",
            caption="../report/weight_decay.rst",
            category="Training",
        ),
    log:
        logfile("fig_weight_decay"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_weight_decay.py"


rule fig_preconditioner:
    input:
        script_inputs("fig_preconditioner.py"),
        summary=rules.training_aggregate.output.summary,
    output:
        pdf=f"{RESULTS}/figures/preconditioner.pdf",
        png=report(
            f"{RESULTS}/figures/preconditioner.png",
            caption="../report/preconditioner.rst",
            category="Training",
        ),
    log:
        logfile("fig_preconditioner"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_preconditioner.py"


rule fig_gauge:
    input:
        script_inputs("fig_gauge.py"),
        summary=rules.training_aggregate.output.summary,
    output:
        pdf=f"{RESULTS}/figures/gauge.pdf",
        png=report(
            f"{RESULTS}/figures/gauge.png",
            caption="../report/gauge.rst",
            category="Training",
        ),
    log:
        logfile("fig_gauge"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_gauge.py"


rule fig_rebalance_effect:
    input:
        script_inputs("fig_rebalance_effect.py"),
        effects=rules.training_aggregate.output.effects,
    output:
        pdf=f"{RESULTS}/figures/rebalance_effect.pdf",
        png=report(
            f"{RESULTS}/figures/rebalance_effect.png",
            caption="../report/rebalance_effect.rst",
            category="Training",
        ),
    log:
        logfile("fig_rebalance_effect"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_rebalance_effect.py"


rule fig_sources:
    input:
        script_inputs("fig_sources.py"),
        summary=rules.training_aggregate.output.summary,
    output:
        pdf=f"{RESULTS}/figures/sources.pdf",
        png=report(
            f"{RESULTS}/figures/sources.png",
            caption="../report/sources.rst",
            category="Training",
        ),
    log:
        logfile("fig_sources"),
    conda:
        CONDA_ENV
    script:
        "../scripts/fig_sources.py"


TARGETS["figures"] += [
    *rules.fig_sources.output,
    *rules.fig_weight_decay.output,
    *rules.fig_preconditioner.output,
    *rules.fig_gauge.output,
    *rules.fig_rebalance_effect.output,
]
