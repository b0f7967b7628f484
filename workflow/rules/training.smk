# Training sweeps with and without rebalancing (issue 5): one job per run, then one aggregation.
# Grids, steps, seeds and optimizers come from config `training:` (see attnid.sweep).


include: "training_common.smk"


rule train_run:
    input:
        script_inputs("train_run.py"),
    output:
        metrics=f"{TRAIN_RUN}/metrics.parquet",
        summary=f"{TRAIN_RUN}/summary.json",
    log:
        logfile("training/{task}/{optimizer}/{rebalance}/h{heads}/s{seed}"),
    benchmark:
        benchfile("training/{task}/{optimizer}/{rebalance}/h{heads}/s{seed}")
    wildcard_constraints:
        task="[a-z_]+",
        optimizer="[a-z_]+",
        rebalance="none|project|balance",
        heads=r"\d+",
        seed=r"\d+",
    conda:
        CONDA_ENV
    threads: 1  # one small model per job: torch uses exactly this many threads
    resources:
        gpu=1 if config["device"] == "cuda" else 0,
    params:
        training=train_run_params,
        device=config["device"],
    script:
        "../scripts/train_run.py"


rule training_aggregate:
    input:
        script_inputs("training_aggregate.py"),
        summaries=training_outputs("summary.json"),
        metrics=training_outputs("metrics.parquet"),
    output:
        summary=f"{RESULTS}/training/summary.parquet",
        metrics=f"{RESULTS}/training/metrics.parquet",
        checks=report(f"{RESULTS}/training/checks.csv", category="Checks"),
        tex=f"{RESULTS}/tables/training.tex",
        csv=report(f"{RESULTS}/tables/training.csv", category="Tables"),
        macros=f"{RESULTS}/macros/training.tex",
    log:
        logfile("training_aggregate"),
    benchmark:
        benchfile("training_aggregate")
    conda:
        CONDA_ENV
    params:
        checks=TRAINING["checks"],
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
