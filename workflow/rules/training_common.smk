# Helpers of workflow/rules/training.smk (kept apart: snakemake --lint wants rules and functions
# in separate files). The run grid mirrors attnid.sweep.runs without importing torch into the DAG.

TRAINING = config["training"]
TRAIN_RUN = (
    f"{RESULTS}/training/runs/{{task}}/{{optimizer}}/{{rebalance}}/h{{heads}}/s{{seed}}"
)


def training_runs():
    """Wildcards of every run (as attnid.sweep.runs, without importing torch into the DAG)."""
    for section in TRAINING["tasks"]:
        for optimizer in section["optimizers"]:
            for rebalance in TRAINING["rebalance"]:
                for heads in section["heads"]:
                    for seed in TRAINING["seeds"]:
                        yield dict(
                            task=section["task"],
                            optimizer=optimizer["name"],
                            rebalance=rebalance,
                            heads=heads,
                            seed=seed,
                        )


def train_run_params(wildcards):
    """The part of `training:` that defines this run (editing another run's settings reruns only that run)."""
    (section,) = [s for s in TRAINING["tasks"] if s["task"] == wildcards.task]
    (optimizer,) = [
        o for o in section["optimizers"] if o["name"] == wildcards.optimizer
    ]
    section = {k: v for k, v in section.items() if k != "heads"} | {
        "optimizers": [optimizer]
    }
    common = {
        k: v
        for k, v in TRAINING.items()
        if k not in ("tasks", "seeds", "rebalance", "checks")
    }
    return common | {"tasks": [section]}


def training_outputs(name):
    return [f"{TRAIN_RUN}/{name}".format(**run) for run in training_runs()]
