"""Determinism across processes: the same config and seed give the same bytes in two fresh processes.

Within one process two runs can agree by accident (the allocator hands out the same memory again);
only separate processes show a result that depends on memory the code never wrote. Measured: with
deterministic mode's NaN-filling of new tensors turned off, the gauge overlap of the smoke preset's
teacher-student SGD job differed at the 1e-14 level between processes; the whole-model gauge's Gram, summed
over a set of block names in hash order, differed at 1e-17 (now summed in sorted order). The job measured is the
Markov chain on GPT-2: both gauges, the real module.
"""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from attnid.training.determinism import deterministic

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import hashlib, sys, torch, yaml
torch.set_num_threads(1)
from attnid.training.job import train_job
from attnid.training.runs import job_params
cfg = yaml.safe_load(sys.stdin.read())
metrics, summary = train_job(job_params(cfg, "markov", "gpt2", 2), "cpu", "markov", "gpt2", 2, progress=False)
numbers = metrics.select_dtypes("number").drop(columns=["seconds"], errors="ignore")
print(hashlib.sha256(numbers.to_numpy().tobytes()).hexdigest())
"""


def _digest(cfg: dict) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], input=yaml.safe_dump(cfg), capture_output=True, text=True, check=True, cwd=ROOT
    )
    return proc.stdout.strip().splitlines()[-1]


def test_training_job_is_identical_in_two_processes():
    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())["training"]
    first, second = _digest(cfg), _digest(cfg)
    assert len(first) == 64
    assert first == second, "the same training job gave different numbers in two processes"


def test_deterministic_mode_fills_new_tensors_and_restores_the_setting():
    before = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    with deterministic("cpu"):
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
        assert torch.empty(16, dtype=torch.float64).isnan().all()  # never what an earlier allocation left
    assert (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) == before
    with pytest.raises(RuntimeError), deterministic("cpu"):
        raise RuntimeError("a run that fails")
    assert torch.are_deterministic_algorithms_enabled() == before[0]
