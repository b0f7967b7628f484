"""One training job: every run of one (task, model, head count), batched -> metrics.parquet, summary.parquet.

Glue only (the job is attnid.training.job.train_job): the progress bars go to the rule's log; each
output is written atomically. A run that diverged is kept in the summary (`diverged`), not fatal. A text job
reads the corpus its input names (the folder of `corpus_manifest`, relative to the working directory).
The log's last line gives the process's CPU seconds (attnid.training.job.job_cpu_line says why).
"""

import os
import sys

import torch

from attnid.io import atomic_write_parquet, log_to
from attnid.training.job import job_cpu_line, train_job

log_to(snakemake.log[0])  # progress bars (tqdm, stderr) and prints go to the rule's log
torch.set_num_threads(snakemake.threads)
wildcards = snakemake.wildcards
manifest = snakemake.input.get("corpus_manifest")
metrics, summary = train_job(
    snakemake.params.training, snakemake.params.device, wildcards.task, wildcards.model, int(wildcards.heads),
    corpus=os.path.dirname(manifest) if manifest else "",
)
for row in summary[summary["diverged"]].itertuples():
    print(
        f"run {row.task}/{row.model}/{row.optimizer}/{row.rebalance}/h{row.heads}/s{row.seed} diverged at step "
        f"{row.diverged_step}",
        file=sys.stderr,
    )
atomic_write_parquet(snakemake.output.metrics, metrics)
atomic_write_parquet(snakemake.output.summary, summary.drop(columns="config"))
print(f"{len(summary)} runs in {summary['seconds'].sum():.1f} s", file=sys.stderr)
print(job_cpu_line(), file=sys.stderr)
