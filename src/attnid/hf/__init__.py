"""Real models: a Hugging Face `config.json` -> this project's specs and counts, and the real modules.

Torch-free here (`mapping`, the stored configs); `attnid.hf.modules` and `attnid.hf.verify`
import torch and `transformers` to build and measure the real attention modules.

    count_model(path_or_mapping) -> {"layer": counts of layer 0, "model": summed over layers,
                                     "layers": {index: counts} for layers whose spec differs}
    stored_config(name), STORED: the published configs shipped with the package (configs/*.json,
    each with `_name` and `_source` naming the published file and paper).
"""

from __future__ import annotations

import json
from importlib import resources

from ..spec import SpecError
from .mapping import (
    SUPPORTED_MODEL_TYPES,
    BlockFacts,
    MLPFacts,
    ModelFacts,
    attention_specs,
    load_config,
    model_facts,
)

__all__ = [
    "STORED",
    "SUPPORTED_MODEL_TYPES",
    "BlockFacts",
    "MLPFacts",
    "ModelFacts",
    "attention_specs",
    "count_model",
    "load_config",
    "model_facts",
    "stored_config",
]


def _stored_names() -> tuple[str, ...]:
    folder = resources.files(__package__) / "configs"
    return tuple(sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json")))


STORED = _stored_names()


def stored_config(name: str) -> dict:
    """The stored published config `name` (a file stem of configs/, e.g. 'llama3_8b')."""
    if name not in STORED:
        raise SpecError("model", f"no stored config {name!r}; known: {', '.join(STORED)}")
    return json.loads((resources.files(__package__) / "configs" / f"{name}.json").read_text())


def _as_mapping(config) -> dict:
    return config if isinstance(config, dict) else load_config(config)


def count_model(config) -> dict:
    """Per-layer and per-model attention counts of a config (a mapping, or a path to a config.json).

    `layer` is the count of layer 0, `model` the sum over all layers (attention parameters only),
    `layers` the counts of every layer whose spec differs from layer 0's, keyed by its index.
    """
    from ..counting import count

    specs = attention_specs(_as_mapping(config))
    counts = [count(s) for s in specs]
    first = counts[0].to_dict()
    model = {key: sum(c.to_dict()[key] for c in counts) for key in ("total", "unidentified", "identified")}
    for key, value in first.items():
        if key not in model and isinstance(value, int):
            model[key] = sum(c.to_dict()[key] for c in counts)
    model["ratio"] = model["unidentified"] / model["total"]
    breakdown = {}
    for c in counts:
        for source, dims in c.breakdown.items():
            breakdown[source] = breakdown.get(source, 0) + dims
    model["breakdown"] = breakdown
    model["n_layers"] = len(specs)
    layers = {i: counts[i].to_dict() for i in range(1, len(specs)) if specs[i] != specs[0]}
    return {"layer": first, "model": model, "layers": layers}
