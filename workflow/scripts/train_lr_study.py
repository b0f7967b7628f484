"""The learning-rate study: plain SGD at several learning rates, batched -> metrics.parquet, summary.parquet.

Glue only (attnid.training.job.train_lr_study); progress bars to the rule's log, atomic outputs.
"""


import torch

from attnid.io import atomic_write_parquet, log_to
from attnid.training.job import train_lr_study

log_to(snakemake.log[0])  # progress bars (tqdm, stderr) and prints go to the rule's log
torch.set_num_threads(snakemake.threads)
metrics, summary = train_lr_study(snakemake.params.training, snakemake.params.device)
atomic_write_parquet(snakemake.output.metrics, metrics)
atomic_write_parquet(snakemake.output.summary, summary.drop(columns="config"))
