"""Formatting results as LaTeX: booktabs tables and \\newcommand macros, all numbers by code."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from .io import atomic_write_text

_ESCAPES = {"&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}"}


def escape(text) -> str:
    """Escape LaTeX special characters in plain text."""
    return "".join(_ESCAPES.get(c, c) for c in str(text))


def booktabs(df: pd.DataFrame, formats: Mapping[str, str] | None = None, align: str | None = None, escape_cells: bool = True) -> str:
    """A booktabs tabular of `df`; `formats` maps a column to a format spec, e.g. {'ratio': '.4f'}.

    Column names are used verbatim (they may contain math); cells are escaped unless
    `escape_cells` is False; missing values print as '--'.
    """
    formats = dict(formats or {})
    align = align or "".join("r" if pd.api.types.is_numeric_dtype(df[c]) else "l" for c in df.columns)

    def cell(col, value):
        if value is None or (isinstance(value, float) and pd.isna(value)):
            return "--"
        if col in formats:
            return format(value, formats[col])
        return escape(value) if escape_cells else str(value)

    lines = [rf"\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(map(str, df.columns)) + r" \\", r"\midrule"]
    for row in df.itertuples(index=False):
        lines.append(" & ".join(cell(c, v) for c, v in zip(df.columns, row)) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)


def scientific(x: float) -> str:
    r"""x as m x 10^e with one decimal in m, in math: 3.1e-16 -> \ensuremath{3.1\times10^{-16}}."""
    mantissa, exponent = f"{float(x):.1e}".split("e")
    return rf"\ensuremath{{{mantissa}\times10^{{{int(exponent)}}}}}"


def macro_name(name: str) -> str:
    """Check a macro name: letters only (LaTeX control words cannot hold digits)."""
    if not re.fullmatch(r"[A-Za-z]+", name):
        raise ValueError(f"LaTeX macro name {name!r} must contain letters only")
    return name


def macros(values: Mapping[str, object] | Iterable[tuple[str, object]]) -> str:
    r"""Lines `\newcommand{\Name}{value}`; values are written as given (format them first)."""
    items = values.items() if isinstance(values, Mapping) else values
    return "".join(f"\\newcommand{{\\{macro_name(k)}}}{{{v}}}\n" for k, v in items)


def write_table(df: pd.DataFrame, tex_path: str | Path, csv_path: str | Path | None = None, **kwargs) -> None:
    """Write `df` as a booktabs .tex (and optionally the same data as .csv), atomically."""
    atomic_write_text(tex_path, booktabs(df, **kwargs))
    if csv_path is not None:
        atomic_write_text(csv_path, df.to_csv(index=False))
