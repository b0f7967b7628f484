"""The paper's tables, built from result frames: one function per table.

Each function takes the frame a rule wrote (results/<preset>/counting/*.csv, the symmetry checks'
summary, the training sweep's overlap table) and returns the table as printed (LaTeX column titles)
and, for numeric cells, a format spec per column, for :func:`attnid.report.latex.booktabs` /
:func:`attnid.report.latex.write_table`. No torch, pandas only; nothing is measured here, the
numbers come from :mod:`attnid.layer.counting`, :mod:`attnid.symmetry.checks` and :mod:`attnid.training.sweep`.
"""

from __future__ import annotations

import math

import pandas as pd

from .latex import number


def counting_table(ratios: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The unidentified ratio by head count H for the main variants, next to 1/(2H).

    Columns: MHA, MHA with all four biases, MHA with half / full RoPE, MQA (MQA with one head is
    MHA, so it falls back to the MHA row); a variant the grid does not hold is left out.
    """
    df = ratios
    plain = (df.rope == "none") & (df.biases == "none")
    columns = {
        "MHA": (df.variant == "MHA") & plain,
        "MHA+bias": (df.variant == "MHA") & (df.rope == "none") & (df.biases == "qkvo"),
        "RoPE half": (df.variant == "MHA") & (df.rope == "half") & (df.biases == "none"),
        "RoPE full": (df.variant == "MHA") & (df.rope == "full") & (df.biases == "none"),
        "MQA": ((df.variant == "MQA") | (df.n_heads == 1)) & plain,
    }
    table = pd.DataFrame({"$H$": sorted(df.n_heads.unique())})
    for title, mask in columns.items():
        chosen = df[mask].drop_duplicates("n_heads").set_index("n_heads").ratio
        table[title] = table["$H$"].map(chosen)
    table["$1/(2H)$"] = 1 / (2 * table["$H$"])
    table = table.dropna(axis=1, how="all")
    return table, {c: ".4f" for c in table.columns[1:]}


def rope_text(rope_dims: int, d_head_qk: int) -> str:
    """'none', 'full', or 'p/k' rotated dims of the query/key head."""
    if rope_dims == 0:
        return "none"
    return "full" if rope_dims == d_head_qk else f"{rope_dims}/{d_head_qk}"


def architectures_table(architectures: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """Attention parameters of real models (whole model), unidentified and their share."""
    df = architectures
    table = pd.DataFrame(
        {
            "Model": df.model,
            "$d$": df.d_model,
            "$H$": df.n_heads,
            "$G$": df.n_kv_heads,
            "RoPE": [rope_text(p, k) for p, k in zip(df.rope_dims, df.d_head_qk)],
            "Biases": df.biases,
            "Attn. params": df.model_total,
            "Unidentified": df.model_unidentified,
            "Share (\\%)": 100 * df.ratio,
        }
    )
    return table, {"Attn. params": ",d", "Unidentified": ",d", "Share (\\%)": ".3f"}


def check_number(x: float) -> str:
    r"""A measured check value or its bound: plain for 0.01 <= |x| < 1000 (and 0), else
    \ensuremath{m\times10^{e}}; 'n/a' for NaN (:func:`attnid.report.latex.number`)."""
    return number(x, plain=(1e-2, 1e3))


# the symmetry table's first column: check names wrapped at a width that fits one column of the paper
SYMMETRY_CHECK_COLUMN = r">{\raggedright\arraybackslash}p{3.1cm}"


def bound_text(direction: str, bound: float) -> str:
    """'$<10^{-10}$' for a power of ten, else '$<$ 0.5' (direction '<' or '>')."""
    exponent = math.log10(bound) if bound > 0 else math.nan
    if math.isfinite(exponent) and exponent == round(exponent) and exponent != 0:
        return f"${direction}10^{{{int(exponent)}}}$"
    return f"${direction}$ {number(bound)}"


def symmetry_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The symmetry checks' summary (attnid.symmetry.checks.summarize_checks) with LaTeX cells: the check, the
    worst value over the grid, the bound it must stay below (or above) as a power of ten where it is one, the
    specs; the dim T = count row reads 'agreeing/specs' against 'all'."""
    rows = []
    for row in summary.itertuples():
        if row.direction == "=":  # the share of specs where dim T = count
            worst, bound = f"{round(row.worst * row.specs)}/{row.specs}", "all"
        else:
            worst, bound = number(row.worst, digits=2), bound_text(row.direction, row.bound)
        rows.append(
            {"check": row.check.replace("dim T", "$\\dim T$"), "worst": worst, "bound": bound, "specs": str(row.specs)}
        )
    return pd.DataFrame(rows)


def training_table(table: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The training sweep's overlap table (attnid.training.sweep.overlap_table) with readable headers;
    overlaps and losses in scientific notation, the chance level with three decimals."""
    names = {"task": "task", "model": "model", "optimizer": "optimizer", "heads": "$H$", "overlap_none": "overlap",
             "overlap_project": "overlap (project)", "overlap_balance": "overlap (balance)", "chance": "chance",
             "final_eval_loss": "eval loss"}  # fmt: skip
    formats = {names[c]: ".1e" for c in table.columns if c.startswith("overlap") or c == "final_eval_loss"}
    formats[names["chance"]] = ".3f"
    return table.rename(columns=names), formats
