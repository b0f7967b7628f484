"""The verification grids: specs from compact config families, verified in bulk, and the bias effects.

A family in the config (`jacobian.grid` in config/*.yaml) is a dict of lists, one per spec field
(d_model, n_heads, n_kv_heads, d_head_qk, d_head_v, rope, biases, causal); the family expands to the
product of its lists (invalid combinations skipped). :func:`verify_grid` runs
:func:`attnid.jacobian.verify` on each spec; :func:`bias_effects` measures, for each bias, how many of
its entries are unidentified, as the difference of two measured unidentified dimensions.
"""

from __future__ import annotations

import itertools

from .counting import count, rope_dims_for
from .jacobian import DTYPE, RANK_RTOL, measure, spec_row, verify
from .layout import Layout
from .spec import AttentionSpec, SpecError

BIAS_SUBSETS = ["".join(c) for n in range(5) for c in itertools.combinations("qkvo", n)]  # all 16, '' first

SPEC_KEYS = ("d_model", "n_heads", "n_kv_heads", "d_head_qk", "d_head_v", "rope", "biases", "causal")


def _rope_dims(value, d_head_qk: int) -> int:
    text = str(value).strip().lower()
    return rope_dims_for(text, d_head_qk) if text in ("none", "half", "full") else int(text)


def spec_from_fields(fields: dict) -> AttentionSpec:
    """A spec from config fields (d_model, n_heads, n_kv_heads, d_head_qk, d_head_v, rope, biases, causal).

    rope: none | half | full | rotated dims (half and full as in the counting grid); absent = spec defaults.
    """
    unknown = set(fields) - set(SPEC_KEYS)
    if unknown:
        raise ValueError(f"unknown spec keys {sorted(unknown)}; use {', '.join(SPEC_KEYS)}")
    f = {key: fields.get(key) for key in SPEC_KEYS}
    base = AttentionSpec(f["d_model"], f["n_heads"], f["n_kv_heads"], f["d_head_qk"], f["d_head_v"])
    return AttentionSpec(
        base.d_model, base.n_heads, base.n_kv_heads, base.d_head_qk, base.d_head_v,
        rope_dims=_rope_dims(f["rope"] if f["rope"] is not None else "none", base.d_head_qk),
        biases=f["biases"] or "", causal=bool(f["causal"]),
    )  # fmt: skip


def expand_family(family: dict) -> list[AttentionSpec]:
    """Specs of one grid family: the product of its lists (config `jacobian.grid`).

    Keys: name, and lists for the fields of :func:`spec_from_fields` (omitted: spec defaults;
    biases may list 'all' for the 16 subsets). Combinations the spec rejects (a group count that
    does not divide the heads, RoPE wider than the head) are skipped; a family with no valid spec
    is an error.
    """
    fields = {key: value for key, value in family.items() if key != "name"}
    unknown = set(fields) - set(SPEC_KEYS)
    if unknown:
        raise ValueError(f"jacobian grid family {family.get('name')!r}: unknown keys {sorted(unknown)}")
    lists = {key: list(fields[key]) for key in fields}
    if "all" in lists.get("biases", []):
        lists["biases"] = BIAS_SUBSETS
    specs = []
    for values in itertools.product(*lists.values()):
        try:
            specs.append(spec_from_fields(dict(zip(lists, values))))
        except SpecError:
            continue
    if not specs:
        raise ValueError(f"jacobian grid family {family.get('name')!r} has no valid spec")
    return specs


def expand_grid(families: list[dict]) -> list[tuple[str, AttentionSpec]]:
    """(family name, spec) for every family, each spec once (the first family that lists it)."""
    seen, out = set(), []
    for family in families:
        for spec in expand_family(family):
            if spec.label not in seen:
                seen.add(spec.label)
                out.append((family.get("name", "grid"), spec))
    return out


def verify_grid(specs, log=print, **options):
    """verify() for each (family, spec) with the same options; a DataFrame with a `family` column first."""
    import pandas as pd

    rows = []
    for i, (family, spec) in enumerate(specs):
        row = {"family": family, **verify(spec, **options)}
        rows.append(row)
        log(
            f"{i + 1:3d}/{len(specs)} {'ok  ' if row['passed'] else 'FAIL'} {spec.label:32s} P={row['total']:5d} "
            f"predicted={row['predicted']:4d} measured={row['measured']:4d} gap={row['gap']:.1f} {row['seconds']:.2f}s"
        )
    return pd.DataFrame(rows)


def failures_message(df, what: str = "specs") -> str:
    """A readable list of the rows whose `passed` is false, saying which check failed."""
    bad = df[~df["passed"].astype(bool)]
    lines = [f"{len(bad)} of {len(df)} {what} disagree:"]
    for _, row in bad.iterrows():
        why = [f"predicted={row['predicted']} measured={row['measured']}"]
        for col in ("measured_half", "measured_seed", "symmetry_rank", "symmetry_residual", "outside_min"):
            if col in row and row[col] == row[col]:
                why.append(f"{col}={row[col]:.3g}" if isinstance(row[col], float) else f"{col}={row[col]}")
        lines.append(f"  {row['label']}: " + ", ".join(why))
    return "\n".join(lines)


def bias_effects(
    bases, ropes, seed: int = 0, oversample: float = 3.0, device=None, dtype=DTYPE, rtol: float = RANK_RTOL, log=print
):
    """How much of each bias is unidentified: count and Jacobian of (others + b) minus (others).

    For each base shape (spec fields without rope and biases), RoPE variant, bias letter b and
    context (others = no other bias, or the three others), the marginal unidentified dims that
    adding b brings, counted and measured; `bias_params` is the number of entries of b.
    """
    import pandas as pd

    cache = {}

    def both(spec):
        if spec.label not in cache:
            measured = measure(spec, seed, oversample, device, rtol, dtype=dtype)[0]["measured"]
            cache[spec.label] = (count(spec).unidentified, measured)
        return cache[spec.label]

    rows = []
    for base, rope, letter, context in itertools.product(bases, ropes, "qkvo", ("alone", "with others")):
        others = "" if context == "alone" else "qkvo".replace(letter, "")
        without = spec_from_fields({**base, "rope": rope, "biases": others})
        with_b = spec_from_fields({**base, "rope": rope, "biases": others + letter})
        (c0, m0), (c1, m1) = both(without), both(with_b)
        rows.append(
            {
                "bias": letter,
                "others": others or "none",
                "rope": str(rope),
                **{key: value for key, value in spec_row(with_b).items() if key not in ("label", "biases")},
                "bias_params": Layout(with_b).size - Layout(without).size,
                "counted": c1 - c0,
                "measured": m1 - m0,
            }
        )
        log(f"b_{letter} rope={rope} others={others or 'none'} {with_b.label}: counted {c1 - c0}, measured {m1 - m0}")
    df = pd.DataFrame(rows)
    df["agree"] = df["counted"] == df["measured"]
    return df
