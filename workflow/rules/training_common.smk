# Helpers of workflow/rules/training.smk (kept apart: snakemake --lint wants rules and functions
# in separate files). The job and run lists come from attnid.training.runs (torch-free).
from attnid.training.runs import job_params, job_priorities, jobs, task_section

TRAINING = config["training"]
TRAIN_JOB = f"{RESULTS}/training/jobs/{{task}}/{{model}}/h{{heads}}"
TRAIN_PRIORITY = job_priorities(TRAINING)


def train_job_params(wildcards):
    """The part of `training:` that defines this job (editing another job's settings reruns only that one)."""
    return job_params(TRAINING, wildcards.task, wildcards.model, int(wildcards.heads))


def train_job_priority(wildcards):
    """The job's rank by estimated work (attnid.training.runs.job_priorities): Snakemake starts the ready job
    of highest priority, so the longest training job runs beside the others, not after them."""
    return TRAIN_PRIORITY[(wildcards.task, wildcards.model, int(wildcards.heads))]


def train_job_corpus(wildcards):
    """A text job's corpus (the corpus rule's token arrays, tokenizer and manifest); other jobs read none."""
    section = task_section(TRAINING, wildcards.task, wildcards.model)
    if section["task"] != "text":
        return {}
    return {f"corpus_{name}": path for name, path in rules.corpus.output.items()}


def lr_study_params():
    """The part of `training:` that defines the learning-rate study."""
    study = TRAINING["lr_study"]
    return job_params(TRAINING, study["task"]) | {"lr_study": study}


def training_outputs(name):
    return [f"{TRAIN_JOB}/{name}".format(**job) for job in jobs(TRAINING)]
