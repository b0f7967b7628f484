"""Whole-model counts of real language models from their published `config.json` (torch-free).

For every stored config (`attnid.hf.configs`) the whole model (`attnid.model.from_hf.model_spec`,
counted by `attnid.model.counting.count_model`) is set beside its attention layers alone
(`attnid.counting.count` of every layer, summed): the attention-only count is a lower bound that
ignores every symmetry between layers. A model the whole-model count does not cover is listed with
the reason (the field it refuses).
"""

from __future__ import annotations

from ..counting import count
from ..hf import load_config, stored_config
from ..hf.mapping import model_facts
from ..spec import SpecError
from .counting import count_model
from .from_hf import model_spec

DEFAULT_SEQ_LEN = 2048  # positions used where a config names no maximum (Falcon, BLOOM)


def default_seq_len(cfg: dict, seq_len: int | None = None) -> int | None:
    """The positions T a config is counted on: seq_len if given, else the config's maximum; a model without
    learned positions (ALiBi, RoPE, none) and no maximum takes DEFAULT_SEQ_LEN (T enters its count only through
    the hypotheses T >= T_min); None (refused by `model_spec`) where learned positions name no maximum."""
    if seq_len is not None:
        return seq_len
    facts = model_facts(cfg)
    if facts.max_positions is None and facts.positions != "learned":
        return DEFAULT_SEQ_LEN
    return facts.max_positions


def count_whole_model(config, seq_len: int | None = None) -> dict:
    """The whole-model counts of a config (a mapping, or a path to a config.json): total, unidentified,
    identified, ratio, weakly_identified, the breakdown by source (the keys of `attnid count`) and the
    positions seq_len it was counted on (:func:`default_seq_len`)."""
    cfg = config if isinstance(config, dict) else load_config(config)
    spec = model_spec(cfg, default_seq_len(cfg, seq_len))
    return {**count_model(spec).to_dict(), "seq_len": spec.seq_len}


def count_from_args(args) -> dict:
    """`attnid count --hf-config PATH|--model NAME --whole-model [--seq-len T]`: count_whole_model of that config."""
    cfg = load_config(args.hf_config) if args.hf_config else stored_config(args.model)
    return count_whole_model(cfg, args.seq_len)


def shipped_row(name: str, seq_len: int | None = None) -> dict:
    """One table row for the stored config `name`, used on seq_len positions (default: :func:`default_seq_len`);
    `status` is 'ok' or the refusal."""
    cfg = stored_config(name)
    facts = model_facts(cfg)
    seq_len = default_seq_len(cfg, seq_len)
    attn = [count(spec) for spec in (block.attention for block in facts.blocks)]
    row = {
        "model": name,
        "name": cfg.get("_name", name),
        "model_type": facts.model_type,
        "attention_P": sum(c.total for c in attn),
        "attention_unidentified": sum(c.unidentified for c in attn),
    }
    try:
        counts = count_model(model_spec(cfg, seq_len))
    except SpecError as err:
        return {**row, "status": f"refused: {err}"}
    row |= {"P": counts.total, "unidentified": counts.unidentified, "weakly_identified": counts.weakly_identified}
    row |= {"ratio": counts.ratio, "identified_share": counts.identified / counts.total, "status": "ok"}
    row["attention_share_of_unidentified"] = row["attention_unidentified"] / max(counts.unidentified, 1)
    return {**row, **{f"src_{k}": v for k, v in counts.breakdown.items()}}


def shipped_table(names, seq_len: int | None = None):
    """DataFrame of :func:`shipped_row` over `names` (source columns 0 where a model has none)."""
    import pandas as pd

    df = pd.DataFrame([shipped_row(n, seq_len) for n in names])
    sources = [c for c in df.columns if c.startswith("src_")]
    df[sources] = df[sources].fillna(0).astype(int)
    return df
