r"""LaTeX from results: one number formatter, one macro namer, booktabs tables, \newcommand macros.

Every number the paper prints goes through :func:`number` and every generated control word
through :func:`macro_name`, so a value reads the same in a table, a macro and the text.
No torch here: the Snakefile and the torch-free layers import this module.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from ..io import atomic_write_text

_ESCAPES = {
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\^{}",
}
_DIGITS = ["Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine"]
NEWCOMMAND = re.compile(r"\\(?:re)?newcommand\*?\{?\\([A-Za-z]+)\}?")


def escape(text) -> str:
    """Escape LaTeX special characters in plain text."""
    return "".join(_ESCAPES.get(c, c) for c in str(text))


def scientific(x: float) -> str:
    r"""x as m x 10^e with one decimal in m, in math: 3.1e-16 -> \ensuremath{3.1\times10^{-16}}."""
    mantissa, exponent = f"{float(x):.1e}".split("e")
    return rf"\ensuremath{{{mantissa}\times10^{{{int(exponent)}}}}}"


def number(
    x,
    fmt: str | None = None,
    *,
    digits: int = 3,
    plain: tuple[float, float] = (1e-3, 1e6),
    decimals: int | None = None,
    missing: str = "n/a",
) -> str:
    r"""The one way a number is written for LaTeX.

    - None, NaN, +-inf -> `missing`;
    - `fmt` given: that format spec, thousands separators as `{,}` (e.g. '.4f' for a ratio, ',' for a count);
    - otherwise 0 -> '0'; an int (or an integer-valued float below plain[1]) -> digits with `{,}`
      thousands separators (1{,}234);
      plain[0] <= |x| < plain[1] -> `digits` significant digits (or `decimals` fixed decimals when
      |x| >= 1 and `decimals` is given); anything else -> \ensuremath{m\times10^{e}} (:func:`scientific`).
    """
    if x is None or (isinstance(x, numbers.Real) and not math.isfinite(float(x))):
        return missing
    if fmt is not None:
        return format(x, fmt).replace(",", "{,}")
    if isinstance(x, numbers.Integral) or (float(x).is_integer() and abs(float(x)) < plain[1]):
        return f"{int(x):,}".replace(",", "{,}")
    x = float(x)
    if plain[0] <= abs(x) < plain[1]:
        return f"{x:.{decimals}f}" if decimals is not None and abs(x) >= 1 else f"{x:.{digits}g}"
    return scientific(x)


def macro_name(*parts) -> str:
    """A LaTeX control word from name parts: digits spelled, words joined with a capital first letter.

    ('Unidentified', 'LLaMA-2-70B') -> 'UnidentifiedLLaMATwoSevenZeroB';
    ('PaperOverlapList', 'teacher_student') -> 'PaperOverlapListTeacherStudent';
    ('Overlap', 'sgd_momentum') -> 'OverlapSgdMomentum'. Only the first letter of a word changes.
    """
    text = " ".join(str(p) for p in parts)
    spelled = re.sub(r"\d", lambda m: f" {_DIGITS[int(m.group())]} ", text)
    name = "".join(w[0].upper() + w[1:] for w in re.split(r"[^A-Za-z]+", spelled) if w)
    if not name:
        raise ValueError(f"no LaTeX macro name in {parts!r}")
    return name


def _checked(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z]+", name):
        raise ValueError(f"LaTeX macro name {name!r} must contain letters only (see attnid.report.latex.macro_name)")
    return name


def macros(values: Mapping[str, object] | Iterable[tuple[str, object]]) -> str:
    r"""Lines `\newcommand{\Name}{value}`; values are written as given (format them with :func:`number`)."""
    items = values.items() if isinstance(values, Mapping) else values
    return "".join(f"\\newcommand{{\\{_checked(k)}}}{{{v}}}\n" for k, v in items)


def defined_names(text: str) -> list[str]:
    r"""Names of the macros a LaTeX text defines with \newcommand (in order)."""
    return NEWCOMMAND.findall(text)


def booktabs(
    df: pd.DataFrame, formats: Mapping[str, str] | None = None, align: str | None = None, escape_cells: bool = True
) -> str:
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


def write_table(df: pd.DataFrame, tex_path: str | Path, csv_path: str | Path | None = None, **kwargs) -> None:
    """Write `df` as a booktabs .tex (and optionally the same data as .csv), atomically."""
    atomic_write_text(tex_path, booktabs(df, **kwargs))
    if csv_path is not None:
        atomic_write_text(csv_path, df.to_csv(index=False))
