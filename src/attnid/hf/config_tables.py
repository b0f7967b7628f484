"""Tables of the shipped published configs (torch-free): their attention layers, and their whole models.

    architecture_table()   layer 0's attention spec and counts, and the attention layers summed over the model
    shipped_table(names)   the whole model (`attnid.model.count_model`) beside its attention layers alone

The attention layers alone (`attnid.model.count_attention_layers`) are a lower bound on the whole model's
count that ignores every symmetry between layers (norm gains, MLP units, the residual stream). A model the
whole-model count does not cover is listed with the reason (the field it refuses).
"""

from __future__ import annotations

import pandas as pd

from ..layer.counting import count
from ..errors import SpecError
from ..model.counting import count_attention_layers, count_model
from . import model_spec, model_type, stored_config

# The stored configs of the architecture table, in its row order: the ten models of the first table, then
# the models people use now.
ARCHITECTURE_MODELS = (
    "gpt2", "gpt2_xl", "bert_base", "llama2_7b", "llama2_70b", "mistral_7b", "falcon_7b", "qwen2_7b", "gptj_6b",
    "pythia_1.4b", "llama3_8b", "llama3_70b", "qwen3_8b", "gemma3_27b", "olmo2_7b", "mixtral_8x7b", "deepseek_v3",
    "gpt_oss_20b", "phi3_mini",
)  # fmt: skip


def architecture_table(names=ARCHITECTURE_MODELS) -> pd.DataFrame:
    """One row per stored config: layer 0's spec fields and counts, and the model's attention layers summed."""
    rows = []
    for name in names:
        cfg = stored_config(name)
        spec = model_spec(cfg)
        first = spec.layer_specs[0].attention
        summed = count_attention_layers(spec)
        rows.append(
            {
                "model": cfg["_name"],
                "source": cfg["_source"],
                "n_layers": spec.n_layers,
                **first.to_row(label=False),
                **count(first).to_dict(flat=True),
                "model_total": summed.total,
                "model_unidentified": summed.unidentified,
                "model_identified": summed.identified,
                "model_weakly_identified": summed.weakly_identified,
            }
        )
    return pd.DataFrame(rows)


def shipped_row(name: str, seq_len: int | None = None) -> dict:
    """One row for the stored config `name`, used on seq_len positions (default as `attnid.hf.model_spec`);
    `status` is 'ok' or the refusal."""
    cfg = stored_config(name)
    spec = model_spec(cfg, seq_len)
    attention = count_attention_layers(spec)
    row = {
        "model": name,
        "name": cfg.get("_name", name),
        "model_type": model_type(cfg),
        "attention_P": attention.total,
        "attention_unidentified": attention.unidentified,
    }
    try:
        counts = count_model(spec)
    except SpecError as err:
        return {**row, "status": f"refused: {err}"}
    row |= {"P": counts.total, "unidentified": counts.unidentified, "weakly_identified": counts.weakly_identified}
    row |= {"ratio": counts.ratio, "identified_share": counts.identified / counts.total, "status": "ok"}
    row["attention_share_of_unidentified"] = row["attention_unidentified"] / max(counts.unidentified, 1)
    return {**row, **{f"src_{k}": v for k, v in counts.breakdown.items()}}


def shipped_table(names, seq_len: int | None = None) -> pd.DataFrame:
    """DataFrame of :func:`shipped_row` over `names` (source columns 0 where a model has none)."""
    df = pd.DataFrame([shipped_row(n, seq_len) for n in names])
    sources = [c for c in df.columns if c.startswith("src_")]
    df[sources] = df[sources].fillna(0).astype(int)
    return df
