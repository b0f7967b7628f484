"""Real models: a Hugging Face `config.json` -> :class:`attnid.model.ModelSpec`, and the real modules.

Torch-free here: `attnid.hf.mapping` (config keys -> the model vocabulary), the published configs
shipped with the package (configs/*.json, each with `_name` and `_source` naming the published file and
paper) and their tables (`attnid.hf.config_tables`). `attnid.hf.modules` and `attnid.hf.verify` import torch
and `transformers` to build and measure the real attention modules.

    model_spec(load_config("config.json"))   # every block, norm, MLP and embedding of the model
    stored_config("llama3_8b"), STORED        # the shipped published configs
"""

from __future__ import annotations

import json
from importlib import resources

from ..errors import SpecError
from .mapping import SUPPORTED_MODEL_TYPES, load_config, model_spec, model_type

__all__ = ["STORED", "SUPPORTED_MODEL_TYPES", "load_config", "model_spec", "model_type", "stored_config"]


def _stored_names() -> tuple[str, ...]:
    folder = resources.files(__package__) / "configs"
    return tuple(sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json")))


STORED = _stored_names()


def stored_config(name: str) -> dict:
    """The stored published config `name` (a file stem of configs/, e.g. 'llama3_8b')."""
    if name not in STORED:
        raise SpecError("model", f"no stored config {name!r}; known: {', '.join(STORED)}")
    return json.loads((resources.files(__package__) / "configs" / f"{name}.json").read_text())
