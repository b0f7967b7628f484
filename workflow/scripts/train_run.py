"""One training run of the sweep: wildcards + config section `training:` -> metrics.parquet, summary.json.

Glue only (the run is attnid.train.train): the progress bar and any error go to the rule's log;
the metrics are written first and the summary last, each atomically, so an interrupted or
diverged run leaves no summary.json that looks complete.
"""

import sys

import torch

from attnid.io import atomic_write_json, atomic_write_parquet
from attnid.sweep import run_config, summary_row, with_run_keys
from attnid.train import train

sys.stderr = open(snakemake.log[0], "w", buffering=1)  # noqa: F821, SIM115 - tqdm writes to stderr
torch.set_num_threads(snakemake.threads)  # noqa: F821
wildcards = dict(snakemake.wildcards)  # noqa: F821
cfg = run_config(snakemake.params.training, snakemake.params.device, **wildcards)  # noqa: F821
print(f"run {cfg.name}: {cfg}", file=sys.stderr)
metrics, summary = train(cfg)
atomic_write_parquet(snakemake.output.metrics, with_run_keys(metrics, wildcards))  # noqa: F821
atomic_write_json(snakemake.output.summary, summary_row(wildcards, cfg, summary))  # noqa: F821
print(f"done in {summary['seconds']:.1f} s", file=sys.stderr)
