"""Every model type of the installed `transformers`, classified: mapped (its whole model counted, or its
attention layers only) or refused, with a one-line reason that is true of that type's code.

The types: every causal LM the installed `transformers` registers (`MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`)
and the encoders the mapping supports (BERT, checked as BertForMaskedLM). A mapping alias that is no
`transformers` model type (Falcon's legacy RefinedWeb keys) is not listed. Each type, first match wins:

    mapped    in attnid.hf.mapping.SUPPORTED_MODEL_TYPES. `counted` says how much of the class's default
              config (`transformers.CONFIG_MAPPING[t]()`, as `attnid check --model-type` builds it) is
              counted: `whole model`, or `layers only` when its ModelSpec records what it does not model
              (`not_modelled`) or `count_model` refuses it, or `default config refused` when it does not map
    refused   the reason of the mapping family that examined the type (a module of attnid.hf.mapping
              exporting REFUSED = {model_type: reason}), else the reason of attnid.hf.refusals.REASONS, read
              from the type's code in the installed `transformers`

A reason starts with its category, one of attnid.hf.refusals.CATEGORIES, then ': ' and what that type's
code does (a family's reason without a known category is counted under `other`). A type both mapped and
refused by a family is a bug of the families and stops `coverage()`; a REASONS entry of a type that a
family now maps or refuses is superseded.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections import Counter

from ..errors import SpecError
from . import mapping
from .mapping import MAPPERS, SUPPORTED_MODEL_TYPES, model_spec
from .refusals import CATEGORIES, REASONS

OTHER = "other"  # the category of a family's reason that names none of CATEGORIES


def families() -> list[tuple[str, object]]:
    """(name, module) of every module of attnid.hf.mapping (one family each), by name."""
    found = sorted(pkgutil.iter_modules(mapping.__path__), key=lambda m: m.name)
    return [(info.name, importlib.import_module(f"{mapping.__name__}.{info.name}")) for info in found]


def family_refusals(modules=None) -> dict[str, str]:
    """model_type -> reason, from every family module (default: families()) that defines REFUSED; a type that is
    also mapped, or refused by two families, stops it (RuntimeError naming the type)."""
    refused: dict[str, str] = {}
    for name, family in families() if modules is None else modules:
        for mt, reason in getattr(family, "REFUSED", {}).items():
            if mt in MAPPERS:
                raise RuntimeError(f"model_type {mt!r} is both mapped and refused (family {name})")
            if mt in refused:
                raise RuntimeError(f"model_type {mt!r} is refused by two families ({name} and another)")
            if not isinstance(reason, str) or not reason.strip():
                raise RuntimeError(f"model_type {mt!r}: family {name} refuses it without a reason")
            refused[mt] = reason
    return refused


def model_types() -> dict[str, str]:
    """model_type -> the `transformers` class the check builds: every registered causal LM, and the encoders
    (attnid.hf.mapping.ENCODERS: BERT's)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from .mapping import ENCODERS

    return dict(sorted({**MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, **ENCODERS}.items()))


def category_of(reason: str) -> str:
    """The category a reason starts with (`other` when it names none of CATEGORIES)."""
    head = reason.split(":", 1)[0].strip()
    return head if head in CATEGORIES else OTHER


def default_config(mt: str) -> dict:
    """The default config of a model type: its config class's defaults (what `attnid check --model-type` reads),
    with the keys its family fills (DEFAULT_GAPS of its module of `attnid.hf.mapping`).
    The class's warnings about its own defaults (token ids outside a small vocabulary) are not shown."""
    from transformers import CONFIG_MAPPING
    from transformers.utils import logging

    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        cfg = {**CONFIG_MAPPING[mt]().to_dict(), "model_type": mt}
    finally:
        logging.set_verbosity(level)
    return _filled(cfg, mapping.DEFAULT_GAPS.get(mt, {}))


def _filled(cfg: dict, gaps: dict) -> dict:
    """cfg with every key of gaps that it leaves None or lacks set (sub-configs filled key by key)."""
    for key, value in gaps.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = _filled(dict(cfg[key]), value)
        elif cfg.get(key) is None:
            cfg[key] = value
    return cfg


def checked_config(mt: str) -> tuple[str, dict]:
    """(where it comes from, config mapping) that the coverage self-check measures for a mapped type: its default
    config, or, where that does not map, the first stored published config of that type (attnid.hf.STORED)."""
    from . import STORED, stored_config

    cfg = default_config(mt)
    try:
        model_spec(cfg)
    except SpecError:
        for name in STORED:
            if stored_config(name)["model_type"] == mt:
                return name, stored_config(name)
        raise
    return "default", cfg


def counted(mt: str) -> tuple[str, str]:
    """(how much of a mapped type's default config is counted, why not more): `whole model`, `layers only`
    or `default config refused` (module docstring)."""
    from ..model.counting import count_model

    try:
        spec = model_spec(default_config(mt))
    except SpecError as err:
        return "default config refused", f"it does not map: {err}"
    except Exception as err:  # noqa: BLE001 -- the config class itself fails on its defaults
        return "default config refused", f"its config class fails: {type(err).__name__}: {err}"
    if spec.not_modelled:
        return "layers only", "; ".join(f"{key}: {why}" for key, why in spec.not_modelled)
    try:
        count_model(spec)
    except SpecError as err:
        return "layers only", str(err)
    return "whole model", ""


def classify(mt: str, refusals: dict[str, str] | None = None, family: str = "") -> dict:
    """{model_type, status, category, reason, counted}: one type's row (module docstring); `family`: the name of
    the mapping family that maps it."""
    refusals = family_refusals() if refusals is None else refusals
    if mt in MAPPERS:
        how, why = counted(mt)
        reason = f"mapped (family {family or mapping_family(mt)}): {how}" + (f"; {why}" if why else "")
        return {"model_type": mt, "status": "mapped", "category": "mapped", "reason": reason, "counted": how}
    reason = refusals.get(mt) or REASONS.get(mt) or "not examined: no family and no entry of REASONS names it"
    return {"model_type": mt, "status": "refused", "category": category_of(reason), "reason": reason, "counted": ""}


def mapping_family(mt: str) -> str:
    """The name of the family module whose MAPPERS maps `mt` ('' when none)."""
    return next((name for name, family in families() if mt in getattr(family, "MAPPERS", {})), "")


def coverage() -> list[dict]:
    """One row per model type of the installed `transformers` (model_types()), sorted by model type."""
    refusals = family_refusals()
    family = {mt: name for name, module in families() for mt in getattr(module, "MAPPERS", {})}
    return [{**classify(mt, refusals, family.get(mt, "")), "class": cls} for mt, cls in model_types().items()]


def summary(rows: list[dict]) -> dict:
    """How many types: in all, mapped (whole model / layers only / default config refused), refused by category."""
    mapped = [r for r in rows if r["status"] == "mapped"]
    by_category = Counter(r["category"] for r in rows if r["status"] == "refused")
    order = [*CATEGORIES, OTHER]
    return {
        "types": len(rows),
        "mapped": len(mapped),
        "mapped_counted": dict(Counter(r["counted"] for r in mapped)),
        "refused": sum(by_category.values()),
        "refused_by_category": {c: by_category[c] for c in order if by_category[c]},
    }




COUNTED = ("whole model", "layers only", "default config refused")  # how much of a mapped type is counted


def coverage_by_category(rows):
    """DataFrame (class, count, types): the mapped types by how much is counted (COUNTED), then the refused ones by
    category (CATEGORIES, then OTHER); `rows` as coverage() gives them (or their DataFrame). Empty classes left out."""
    import pandas as pd

    records = rows.to_dict("records") if isinstance(rows, pd.DataFrame) else list(rows)
    classes = [("mapped", f"mapped: {how}", lambda r, how=how: r["counted"] == how) for how in COUNTED]
    classes += [("refused", f"refused: {c}", lambda r, c=c: r["category"] == c) for c in (*CATEGORIES, OTHER)]
    out = []
    for status, name, member in classes:
        types = sorted(r["model_type"] for r in records if r["status"] == status and member(r))
        if types:
            out.append({"class": name, "count": len(types), "types": ", ".join(types)})
    return pd.DataFrame(out, columns=["class", "count", "types"])


# The columns of one self-check row in results/<preset>/hf/coverage.csv (attnid.hf.check's rows, flattened).
CHECK_COLUMNS = (
    "model_type", "config", "part", "spec", "verdict", "P", "P_spec", "count", "measured", "measured_half",
    "weak_count", "weak_measured", "gap", "margin", "measured_eps", "sketch_rows", "seconds", "reason",
)  # fmt: skip
PASSING = ("agree", "refused")  # a refused row is a part the count refuses (its layers only are counted)


def check_rows(mt: str, seed: int = 0, oversample: float = 3.0, sketch: bool = True) -> list[dict]:
    """The self-check of one mapped type (attnid.hf.check.check_config of checked_config(mt)), one row per part with
    CHECK_COLUMNS. A config the check refuses is one `refused` row, and a failure of the transformers class on the
    shrunk config one `error` row, each with the reason, so that one type never hides the others."""
    import time

    from .check import check_config

    start = time.perf_counter()
    where = "default"
    try:
        where, cfg = checked_config(mt)
        rows = check_config(cfg, seed=seed, oversample=oversample, sketch=sketch)
    except SpecError as err:
        rows = [{"part": "config", "verdict": "refused", "reason": str(err)}]
    except Exception as err:  # noqa: BLE001 -- the library's own class failed on the shrunk config
        rows = [{"part": "config", "verdict": "error", "reason": f"{type(err).__name__}: {err}"}]
    if "seconds" not in rows[0]:
        rows[0]["seconds"] = time.perf_counter() - start
    return [{key: {"model_type": mt, "config": where, **row}.get(key) for key in CHECK_COLUMNS} for row in rows]


def check_failures(rows: list[dict]) -> str:
    """One line per self-check row that disagrees, is undecided or failed ('' when every row passes)."""
    bad = [r for r in rows if r["verdict"] not in PASSING]

    def line(r):
        numbers = f"P={r['P']} (spec {r['P_spec']}) count={r['count']} measured={r['measured']}"
        return f"{r['model_type']} ({r['config']}) {r['part']}: {r['verdict']}; " + (r["reason"] or numbers)

    return "\n".join(line(r) for r in bad)


def mapped_types() -> list[str]:
    """The mapped types that are model types of the installed `transformers` (not Falcon's legacy aliases)."""
    from transformers import CONFIG_MAPPING

    return [mt for mt in SUPPORTED_MODEL_TYPES if mt in CONFIG_MAPPING]


def _check_one(args: tuple) -> list[dict]:
    import torch

    torch.set_num_threads(1)  # one core per worker: the Jacobians are small, the workers run side by side
    return check_rows(*args)


def check_types(model_types, seed: int = 0, oversample: float = 3.0, workers: int = 1, log=None) -> list[dict]:
    """check_rows of each model type ("mapped": mapped_types()), `workers` types at a time in worker processes,
    in the order given; log(line) after each type. The workers are spawned (never forked from a process that may
    hold torch's threads), so a calling script keeps its work under `if __name__ == "__main__":`."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from contextlib import nullcontext

    types = mapped_types() if model_types == "mapped" else list(model_types)
    jobs = [(mt, seed, oversample) for mt in types]
    rows = []
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=spawn) if workers > 1 else nullcontext() as pool:
        results = pool.map(_check_one, jobs) if pool is not None else map(_check_one, jobs)
        for mt, found in zip(types, results, strict=True):
            rows += found
            if log is not None:
                seconds = sum(r["seconds"] or 0 for r in found)
                log(f"{mt}: " + ", ".join(f"{r['part']} {r['verdict']}" for r in found) + f" ({seconds:.0f} s)")
    return rows
