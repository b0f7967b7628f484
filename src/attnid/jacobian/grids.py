"""The verification grids: specs from compact config families, verified in bulk, and the bias effects.

A family in the config (`jacobian.grid` in config/*.yaml) is a dict of lists, one per spec field
(SPEC_KEYS: the spec's field names, with the RoPE word or dims under `rope`); the family expands to the
product of its lists (invalid combinations skipped). :func:`verify_grid` runs
:func:`attnid.jacobian.verify` on each spec; :func:`bias_effects` measures, for each bias, how many of
its entries are unidentified, as the difference of two measured unidentified dimensions.
"""

from __future__ import annotations

import itertools

from ..layer.counting import count
from ..layer.layout import Layout
from ..layer.spec import AttentionSpec, SpecError
from .dense import RANK_RTOL, measure, singular_values
from .sizing import DTYPE
from .verification import resolve_device_option, verify

BIAS_SUBSETS = ["".join(c) for n in range(5) for c in itertools.combinations("qkvo", n)]  # all 16, '' first

# Config keys of a family or a spec: the AttentionSpec field names, with the RoPE word under `rope`.
SPEC_KEYS = ("d_model", "n_heads", "n_kv_heads", "d_head_qk", "d_head_v", "rope", "rope_base", "biases", "causal")


def spec_from_fields(fields: dict) -> AttentionSpec:
    """A spec from config fields (SPEC_KEYS; `rope` is the RoPE word or dims of attnid.layer.spec.parse_rope)."""
    unknown = set(fields) - set(SPEC_KEYS)
    if unknown:
        raise ValueError(f"unknown spec keys {sorted(unknown)}; use {', '.join(SPEC_KEYS)}")
    mapping = {("rope_dims" if key == "rope" else key): value for key, value in fields.items() if value is not None}
    return AttentionSpec.from_config(mapping)


def expand_family(family: dict) -> list[AttentionSpec]:
    """Specs of one grid family: the product of its lists (config `jacobian.grid`).

    Keys: name, and lists for the keys of :func:`spec_from_fields` (omitted: spec defaults;
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
            f"{i + 1:3d}/{len(specs)} {row['status']:9s} {spec.label:32s} P={row['total']:5d} "
            f"predicted={row['predicted']:4d} measured={row['measured']} margin={row['margin']:.1f} "
            f"gap={row['gap']:.1f} {row['seconds']:.2f}s"
        )
    return pd.DataFrame(rows)


RATIO_POINT_COLUMNS = [
    "label", "d_model", "n_heads", "n_kv_heads", "rope", "biases", "total", "predicted", "measured", "ratio_measured",
    "sigma_kept", "sigma_dropped", "margin", "status", "passed", "method", "seconds",
]  # fmt: skip
RATIO_KEYS = ["n_heads", "n_kv_heads", "rope", "biases"]  # a ratio-grid spec apart from its width (rope: the word)


def ratio_figure_rows(ratios):
    """The rows of the counting ratio grid that the ratio figure draws (workflow/scripts/fig_ratio.py):
    non-causal, the grid's width, standard head sizes d_k = d_v = d / H, and of those: no RoPE and no
    bias at every group count (panel a); MHA with no bias at every RoPE variant (panel b); MHA without
    or with full RoPE at every bias subset (panel c)."""
    from ..layer.spec import bias_text

    df = ratios.copy()
    df["biases"] = df["biases"].map(bias_text)  # the table vocabulary: 'none' or canonical letters
    if "causal" in df:
        df = df[~df["causal"].astype(bool)]
    d = df["d_model"].mode().iloc[0]  # the grid's width (one d_model in every preset)
    df = df[(df["d_model"] == d) & (df["d_head_qk"] * df["n_heads"] == d) & (df["d_head_v"] == df["d_head_qk"])]
    mha = df["n_kv_heads"] == df["n_heads"]
    plain = (df["rope"] == "none") & (df["biases"] == "none")
    drawn = plain | (mha & (df["biases"] == "none")) | (mha & df["rope"].isin(["none", "full"]))
    return df[drawn]


def ratio_grid_at_width(ratios, d_model: int):
    """The same (H, G, RoPE word, biases) as the rows of `ratios`, at width `d_model` with standard head
    sizes d / H (:func:`attnid.layer.counting.ratio_grid`); head counts that do not divide d_model, and RoPE
    words that round to no rotated dims at the smaller head size, are left out."""
    from ..layer.counting import ratio_grid
    from ..layer.spec import bias_text

    heads = sorted(h for h in ratios["n_heads"].unique() if d_model % h == 0)
    if not heads:
        raise ValueError(f"jacobian.ratio_points.d_model: no head count of the grid divides {d_model}")
    grid = ratio_grid(d_model, heads, sorted(ratios["n_kv_heads"].unique()), list(dict.fromkeys(ratios["rope"])),
                      list(dict.fromkeys(ratios["biases"])))  # fmt: skip
    keys = ratios[RATIO_KEYS].assign(biases=ratios["biases"].map(bias_text)).drop_duplicates()
    return (
        grid.assign(_b=grid["biases"].map(bias_text))
        .merge(keys.rename(columns={"biases": "_b"}), on=["n_heads", "n_kv_heads", "rope", "_b"])
        .drop(columns="_b")
    )


def ratio_points(ratios, max_params: int, log=print, d_model: int | None = None, drawn_only: bool = False, **options):
    """The measured unidentified dimension of rows of the counting ratio grid (a DataFrame of spec rows
    with `total` and the RoPE word `rope`), without the invariance and direction checks; rows above
    max_params are skipped (logged). drawn_only: only the rows the ratio figure draws
    (:func:`ratio_figure_rows`); d_model: measure the same (H, G, RoPE, biases) at this width instead
    (:func:`ratio_grid_at_width`). `options` go to :func:`attnid.jacobian.verify`."""
    import pandas as pd

    if drawn_only:
        ratios = ratio_figure_rows(ratios)
    if d_model is not None:
        ratios = ratio_grid_at_width(ratios, d_model)
    rows = []
    for _, r in ratios.iterrows():
        spec = AttentionSpec.from_row(r)
        if int(r["total"]) > max_params:
            log(f"skip {spec.label}: P={r['total']} > max_params={max_params}")
            continue
        res = verify(spec, other_seeds=(), half_batch=False, directions=False, **options)
        measured = res["measured"]
        res["ratio_measured"] = measured / res["total"] if measured is not None else float("nan")
        res["rope"] = r["rope"]
        rows.append({key: res[key] for key in RATIO_POINT_COLUMNS})
        log(f"{spec.label}: predicted {res['predicted']}, measured {measured}, {res['status']}, {res['seconds']:.2f}s")
    return pd.DataFrame(rows, columns=RATIO_POINT_COLUMNS)


def failures_message(df, what: str = "specs") -> str:
    """A readable list of the rows whose `passed` is false, saying which check failed."""
    bad = df[~df["passed"].astype(bool)]
    lines = [f"{len(bad)} of {len(df)} {what} disagree:"]
    for _, row in bad.iterrows():
        why = [f"predicted={row['predicted']} measured={row['measured']}"]
        why.append(f"status={row['status']}") if "status" in row else None
        for col in (
            "measured_half",
            "measured_other_seeds",
            "margin",
            "gap",
            "symmetry_rank",
            "symmetry_residual",
            "outside_min",
        ):
            if col in row and row[col] == row[col]:
                why.append(f"{col}={row[col]:.3g}" if isinstance(row[col], float) else f"{col}={row[col]}")
        lines.append(f"  {row['label']}: " + ", ".join(why))
    return "\n".join(lines)


def bias_effects(
    bases, ropes, seed: int = 0, oversample: float = 3.0, device="cpu", dtype=DTYPE, rtol: float = RANK_RTOL,
    positions: str = "spread", log=print,
):  # fmt: skip
    """How much of each bias is unidentified: count and Jacobian of (others + b) minus (others).

    For each base shape (spec fields without rope and biases), RoPE variant, bias letter b and
    context (others = no other bias, or the three others), the marginal unidentified dims that
    adding b brings, counted and measured; `bias_params` is the number of entries of b.
    """
    import pandas as pd

    cache, device = {}, resolve_device_option(device)

    def both(spec):
        if spec.label not in cache:
            measured = measure(spec, seed, oversample, device, rtol, dtype=dtype, positions=positions)[0]["measured"]
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
                **{key: value for key, value in with_b.to_row().items() if key not in ("label", "biases")},
                "bias_params": Layout(with_b).size - Layout(without).size,
                "counted": c1 - c0,
                "measured": m1 - m0,
            }
        )
        log(f"b_{letter} rope={rope} others={others or 'none'} {with_b.label}: counted {c1 - c0}, measured {m1 - m0}")
    df = pd.DataFrame(rows)
    df["agree"] = df["counted"] == df["measured"]
    return df


def spectra(specs, seed: int = 0, oversample: float = 3.0, device="cpu", dtype=DTYPE, rtol: float = RANK_RTOL,
            positions: str = "spread", log=print):  # fmt: skip
    """All singular values of J / sigma_max of each spec, long format: label, index (1..P), sigma,
    total, predicted_rank (= P - predicted unidentified), measured_rank, rank_rtol."""
    import pandas as pd

    frames, device = [], resolve_device_option(device)
    for spec in specs:
        sigma = singular_values(spec, seed, oversample, device, dtype, positions)
        c = count(spec)
        frame = pd.DataFrame({"label": spec.label, "index": range(1, len(sigma) + 1), "sigma": sigma.numpy()})
        frame["total"] = c.total
        frame["predicted_rank"] = c.identified
        frame["measured_rank"] = int((sigma > rtol).sum())
        frame["rank_rtol"] = rtol
        frames.append(frame)
        log(f"{spec.label}: P={c.total}, predicted rank {c.identified}, measured {frame['measured_rank'].iloc[0]}")
    return pd.concat(frames, ignore_index=True)


def real_heads_table(rows):
    """The real-head family as a short table (one row per spec; tables/real_heads.tex). `kept` is the
    smallest kept singular value over the largest (for the certificate a lower bound of it), `margin`
    log10(kept / tol.) with the method's tolerance, `gap` log10(kept / largest dropped), in decades."""
    import pandas as pd

    out = []
    for _, r in rows.iterrows():
        spec = AttentionSpec.from_row(r)
        out.append(
            {
                "$d_k$": spec.d_head_qk,
                "planes": spec.rope_dims // 2,
                "base": f"{spec.rope_base:g}",
                "$H/G$": f"{spec.n_heads}/{spec.n_kv_heads}",
                "$d$": spec.d_model,
                "$P$": int(r["total"]),
                "method": r["method"],
                "count": int(r["predicted"]),
                "measured": int(r["measured"]),
                "tol.": float(r["cert_rtol"]) if r["method"] == "certificate" else RANK_RTOL,
                "kept": float(r["sigma_kept"]),
                "margin": float(r["margin"]),
                "gap": float(r["gap"]),
            }
        )
    return pd.DataFrame(out)
