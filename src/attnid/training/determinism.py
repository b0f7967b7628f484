"""Deterministic mode for a training run: one config gives the same bits in every process on one machine.

Every random draw of a run comes from generators seeded by the run seed (attnid.training.tasks);
what is left is the order of floating-point reductions and memory the code never wrote.
:func:`deterministic` turns on ``torch.use_deterministic_algorithms`` for the duration of a run
(the reference loop and the batched trainer both train inside it) and restores the previous setting:

  * kernels with a deterministic variant use it (``warn_only``: the others warn and run);
  * on CUDA, cuBLAS needs a fixed workspace (``CUBLAS_WORKSPACE_CONFIG=:4096:8``, set if unset);
  * new tensors (``torch.empty`` and friends) are filled with NaN
    (``torch.utils.deterministic.fill_uninitialized_memory``, on by default in this mode), so a
    number can never depend on what an earlier allocation left in memory. Measured: without the
    filling, the gauge overlap of a teacher-student job differed at the 1e-14 level between two
    processes (tests/test_determinism.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def deterministic(device: str) -> Iterator[None]:
    """Run the body with torch's deterministic algorithms on (module docstring); restore the setting after."""
    if device.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # required by deterministic cuBLAS
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    _set_deterministic(True, warn_only=True)
    try:
        yield
    finally:
        _set_deterministic(*before)


def _set_deterministic(mode: bool, warn_only: bool) -> None:
    """``torch.use_deterministic_algorithms`` without its first line, which imports ``torch._inductor`` (and with it
    ``torch._dynamo``) only to copy the flag into the compiler's config. Nothing here is compiled, and that import
    costs 1.2 CPU-s, measured (`python -c "import torch; torch.use_deterministic_algorithms(True)"`: 2.4-2.6 CPU-s
    against 1.3 for `import torch`), in every training job. The rest of it is this one call (torch 2.13's
    torch/__init__.py)."""
    torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)
