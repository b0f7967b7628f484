"""Shared by the training tests: one torch thread, and the tiny run every test starts from."""

import pytest
import torch

from attnid.layer.spec import AttentionSpec
from attnid.training.runs import RunConfig

ROUNDING = 1e-10  # float64: overlaps and function changes at rounding are ~1e-15


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models run fastest on one thread (and the machine is shared)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny(**changes) -> RunConfig:
    """A run of a few milliseconds: d_model 8, 2 heads, 12 steps (recall: causal, 6 keys, 2 pairs)."""
    recall = changes.get("task") == "recall"
    base = {"task": "teacher_student", "attention": AttentionSpec(8, 2, causal=recall), "seq_len": 4, "batch": 8,
            "steps": 12, "eval_every": 5, "eval_batch": 16, "probe_batch": 4, "rebalance_interval": 4, "vocab": 6,
            "pairs": 2, "mlp_ratio": 2}  # fmt: skip
    return RunConfig(**(base | changes))
