"""Attention configurations of real models, from their published config.json files.

Each entry is a stored published config (attnid/hf/configs/, mapped by attnid.hf.mapping): layer 0's
AttentionSpec, every layer's spec and the number of layers L; counts are per layer
(attnid.counting.count) and per model, summed over the layers (attention parameters only:
embeddings, MLPs and norms are not counted here). No torch.
Position encoding: learned absolute (GPT-2) or absolute sinusoidal/learned (BERT) positions are
added to the residual stream before attention, so the layer itself has no RoPE.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .counting import count
from .spec import AttentionSpec


@dataclass(frozen=True)
class Architecture:
    name: str
    n_layers: int
    spec: AttentionSpec  # layer 0's attention
    source: str  # where the hyperparameters come from
    layer_specs: tuple = ()  # every layer's spec (empty: all equal to `spec`)

    @property
    def specs(self) -> tuple:
        return self.layer_specs or (self.spec,) * self.n_layers


# The published config.json of each model, stored in attnid/hf/configs/<name>.json (fields used, `_name`,
# `_source` naming the file and the paper) and mapped by attnid.hf.mapping: the ten models of the first
# table, then the models people use now.
STORED_MODELS = (
    "gpt2", "gpt2_xl", "bert_base", "llama2_7b", "llama2_70b", "mistral_7b", "falcon_7b", "qwen2_7b", "gptj_6b",
    "pythia_1.4b", "llama3_8b", "llama3_70b", "qwen3_8b", "gemma3_27b", "olmo2_7b", "mixtral_8x7b", "deepseek_v3",
    "gpt_oss_20b", "phi3_mini",
)  # fmt: skip


def from_stored(name: str) -> Architecture:
    """The Architecture of a stored published config (attnid.hf)."""
    from .hf import model_facts, stored_config

    cfg = stored_config(name)
    specs = model_facts(cfg).layer_specs
    varied = specs if any(s != specs[0] for s in specs) else ()
    return Architecture(cfg["_name"], len(specs), specs[0], cfg["_source"], varied)


ARCHITECTURES = [from_stored(name) for name in STORED_MODELS]


def architecture_table(architectures=ARCHITECTURES) -> pd.DataFrame:
    """One row per model: spec fields, per-layer counts and per-model attention totals."""
    rows = []
    for arch in architectures:
        c = count(arch.spec)
        layers = [count(s) for s in arch.specs]  # the model: summed over its layers
        rows.append(
            {
                "model": arch.name,
                "source": arch.source,
                "n_layers": arch.n_layers,
                **arch.spec.to_row(label=False),
                **c.to_dict(flat=True),
                "model_total": sum(x.total for x in layers),
                "model_unidentified": sum(x.unidentified for x in layers),
                "model_identified": sum(x.identified for x in layers),
                "model_weakly_identified": sum(x.weakly_identified for x in layers),
            }
        )
    return pd.DataFrame(rows)
