"""Closed forms of the counts (sympy) for the families the paper discusses, emitted as LaTeX.

The general count of :mod:`attnid.layer.counting`, specialised to the common regime d_k <= d,
d_v <= d and G d_v <= d, is (per layer, r = H / G query heads per KV group, p rotated dims)

    unidentified = G [ (d_k - p)^2 + p ] + G d_v^2 + [b_K] G (d_k - p) + [b_V] ([b_O] G d_v + (1 - [b_O]) (G d_v - min(G d_v, d)))

and each family below substitutes its shapes. `check_against_counts` evaluates every closed
form at concrete sizes and compares with the exact integer count, so the algebra here cannot
drift from the verified counting code.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from .counting import count
from .spec import AttentionSpec

d, H, G, p = sp.symbols("d H G p", positive=True, integer=True)


@dataclass(frozen=True)
class ClosedForm:
    key: str  # letters only: used for LaTeX macro names
    family: str  # human-readable description
    total: sp.Expr
    unidentified: sp.Expr
    example: dict  # symbol values at which `spec(example)` builds the matching AttentionSpec
    spec_config: object  # callable: {symbol: value} -> AttentionSpec config (field -> value)

    @property
    def ratio(self) -> sp.Expr:
        return sp.factor(sp.simplify(self.unidentified / self.total))

    def spec(self, values: dict) -> AttentionSpec:
        return AttentionSpec.from_config(self.spec_config(values))


def _heads(values):
    return {"d_model": int(values[d]), "n_heads": int(values[H])}


CLOSED_FORMS = [
    ClosedForm(
        "OneHead",
        "one head, $d_k = d_v = d$",
        total=4 * d**2,
        unidentified=2 * d**2,
        example={d: 16},
        spec_config=lambda v: {"d_model": int(v[d]), "n_heads": 1},
    ),
    ClosedForm(
        "MHA",
        "$H$ heads, $d_k = d_v = d/H$",
        total=4 * d**2,
        unidentified=H * 2 * (d / H) ** 2,
        example={d: 16, H: 4},
        spec_config=_heads,
    ),
    ClosedForm(
        "GQA",
        "$H$ query heads, $G$ key/value groups, $d_k = d_v = d/H$",
        total=2 * H * d * (d / H) + 2 * G * d * (d / H),
        unidentified=2 * G * (d / H) ** 2,
        example={d: 16, H: 4, G: 2},
        spec_config=lambda v: {"d_model": int(v[d]), "n_heads": int(v[H]), "n_kv_heads": int(v[G])},
    ),
    ClosedForm(
        "RoPE",
        "$H$ heads, RoPE on all of $d_k = d/H$",
        total=4 * d**2,
        unidentified=H * ((d / H) + (d / H) ** 2),
        example={d: 16, H: 4},
        spec_config=lambda v: {"d_model": int(v[d]), "n_heads": int(v[H]), "rope_dims": int(v[d]) // int(v[H])},
    ),
    ClosedForm(
        "PartialRoPE",
        "$H$ heads, RoPE on $p$ of $d_k = d/H$ dims",
        total=4 * d**2,
        unidentified=H * ((d / H - p) ** 2 + p + (d / H) ** 2),
        example={d: 16, H: 2, p: 4},
        spec_config=lambda v: {"d_model": int(v[d]), "n_heads": int(v[H]), "rope_dims": int(v[p])},
    ),
    ClosedForm(
        "Bias",
        "$H$ heads, $d_k = d_v = d/H$, all four biases",
        total=4 * d**2 + 4 * d,
        unidentified=2 * d**2 / H + 2 * d,
        example={d: 16, H: 4},
        spec_config=lambda v: {"d_model": int(v[d]), "n_heads": int(v[H]), "biases": "qkvo"},
    ),
    ClosedForm(
        "BiasRoPE",
        "$H$ heads, $d_k = d_v = d/H$, all four biases, full RoPE",
        total=4 * d**2 + 4 * d,
        unidentified=d**2 / H + d + d,
        example={d: 16, H: 4},
        spec_config=lambda v: {
            "d_model": int(v[d]),
            "n_heads": int(v[H]),
            "biases": "qkvo",
            "rope_dims": int(v[d]) // int(v[H]),
        },
    ),
]


def check_against_counts(forms=CLOSED_FORMS, scales=(1, 2, 4)) -> list[str]:
    """Evaluate every closed form at its example sizes (scaled) and compare with `count`; return mismatches."""
    problems = []
    for form in forms:
        for scale in scales:
            values = {sym: (val * scale if sym == d else val) for sym, val in form.example.items()}
            spec = form.spec(values)
            exact = count(spec)
            total = int(form.total.subs(values))
            unidentified = int(form.unidentified.subs(values))
            if (total, unidentified) != (exact.total, exact.unidentified):
                problems.append(
                    f"{form.key} at {values}: closed form ({total}, {unidentified}) != count ({exact.total}, {exact.unidentified})"
                )
    return problems


def latex_table(forms=CLOSED_FORMS) -> str:
    """A booktabs table: family, total, unidentified, ratio (all as LaTeX maths)."""
    lines = [
        r"\begin{tabular}{lccc}",
        r"\toprule",
        r"Family & Total $P$ & Unidentified & Ratio \\",
        r"\midrule",
    ]
    for f in forms:
        lines.append(
            f"{f.family} & ${sp.latex(sp.expand(f.total))}$ & ${sp.latex(sp.simplify(f.unidentified))}$ & ${sp.latex(f.ratio)}$ \\\\"
        )
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)


def closed_forms_frame(forms=CLOSED_FORMS):
    """One row per family: key, family, total, unidentified, ratio (sympy expressions as text)."""
    import pandas as pd

    rows = [
        {
            "key": f.key,
            "family": f.family,
            "total": str(f.total),
            "unidentified": str(sp.simplify(f.unidentified)),
            "ratio": str(f.ratio),
        }
        for f in forms
    ]
    return pd.DataFrame(rows)


def latex_macros(forms=CLOSED_FORMS) -> dict[str, str]:
    """Macros \\RatioMHA etc. holding each family's ratio as LaTeX maths (no $ delimiters)."""
    return {f"Ratio{f.key}": sp.latex(f.ratio) for f in forms}
