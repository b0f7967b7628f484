"""Where the Jacobian and training rules run: the config's `device` turned into a torch.device.

The config says `device: cpu` or `device: cuda` (schema: workflow/schemas/config.schema.yaml).
`resolve_device` is the one place that turns that word into a `torch.device`, and it refuses
CUDA loudly when no GPU is visible, instead of letting torch fail deep inside a run (or, worse,
silently falling back to the CPU and reporting CPU timings as GPU ones).

    >>> resolve_device("cpu")
    device(type='cpu')
"""

from __future__ import annotations

import os

import torch


class DeviceError(RuntimeError):
    """The config asks for a device this machine cannot provide."""


def resolve_device(name: str, what: str = "config device") -> torch.device:
    """'cpu' | 'cuda' | 'cuda:N' -> torch.device; DeviceError when CUDA is asked for but absent.

    'cuda' means the current CUDA device (under SLURM, the GPU the job was given:
    `--gpus=1` sets CUDA_VISIBLE_DEVICES, so index 0 of the job's view). `what` names the
    setting in the messages ('config device', or 'device' for an option of a function).
    """
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError) as err:
        raise DeviceError(f"{what} {name!r} is not a device name (use 'cpu' or 'cuda'): {err}") from None
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise DeviceError(f"{what} {name!r}: only 'cpu' and 'cuda' are supported")
    if not torch.cuda.is_available():
        built = torch.version.cuda or "none (a CPU-only build)"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
        raise DeviceError(
            f"{what} {name!r} asked for but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, CUDA build {built}, CUDA_VISIBLE_DEVICES={visible}). "
            "Run on a machine with a GPU (the SLURM profile requests one for the training and "
            "Jacobian rules when device is cuda) or set `device: cpu` in the config "
            "(or pass `--config device=cpu`)."
        )
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        raise DeviceError(f"{what} {name!r} asked for but only {count} CUDA device(s) are visible")
    return device
