"""The learning-rate study: plain SGD at several learning rates, batched -> metrics.parquet, summary.parquet.

Glue only (attnid.training.job.train_lr_study); progress bars to the rule's log, atomic outputs.
"""

import sys

import torch

from attnid.io import atomic_write_parquet
from attnid.training.job import train_lr_study

sys.stderr = open(snakemake.log[0], "w", buffering=1)  # noqa: SIM115 - tqdm writes to stderr
torch.set_num_threads(snakemake.threads)
metrics, summary = train_lr_study(snakemake.params.training, snakemake.params.device)
atomic_write_parquet(snakemake.output.metrics, metrics)
atomic_write_parquet(snakemake.output.summary, summary.drop(columns="config"))
