r"""Rule `macros`: every number the paper's text uses, in one file results/tables/macros.tex.

Concatenates the topic fragments (MACRO_FRAGMENTS: results/macros/<topic>.tex, one per topic,
each written by that topic's rules from its aggregated results; provenance has its own), then adds
the `Paper*` macros that the paper's prose needs and no topic writes, computed here from the
aggregated results (summaries over the verification grid and the training sweep: counts, means,
maxima; no result is recomputed). A macro defined twice stops the rule with the names and the files
(LaTeX would fail later, less clearly).
"""

import math
import re
from pathlib import Path

import pandas as pd

from figlib import OPTIMIZER_NAMES, REBALANCE_NAMES, ordered

from attnid.io import atomic_write_text
from attnid.latex import macros, scientific

PAPER_TASKS = ("teacher_student", "recall")
NEWCOMMAND = re.compile(r"\\(?:re)?newcommand\*?\{?\\([A-Za-z]+)\}?")


def defined_names(text: str) -> list[str]:
    """Names of the macros a LaTeX text defines with \\newcommand."""
    return NEWCOMMAND.findall(text)


def letters(text: str) -> str:
    """'sgd_momentum' -> 'SgdMomentum': a letters-only macro-name part."""
    return "".join(w.capitalize() for w in re.split(r"[^A-Za-z]+", str(text)) if w)


def number(x: float) -> str:
    r"""A number for the text: integers with thousands separators, 3 significant digits for
    ordinary sizes, m\times10^{e} (in math) below 1e-3 or from 1e6 on."""
    x = float(x)
    if x == 0 or (1e-3 <= abs(x) < 1e6 and not x.is_integer()):
        return f"{x:.2f}" if abs(x) >= 1 else f"{x:.3g}"
    if x.is_integer() and abs(x) < 1e6:
        return f"{int(x):,}".replace(",", "{,}")
    return scientific(x)


def verification_macros(verification: pd.DataFrame) -> dict[str, str]:
    """Size and outcome of the Jacobian verification grid (results/jacobian/verification.csv:
    passed; sigma_kept / sigma_dropped relative to the largest singular value; gap =
    log10(sigma_kept / sigma_dropped) in decades)."""
    finite = lambda col: verification[col].replace([math.inf, -math.inf], math.nan).dropna()  # noqa: E731
    return {
        "PaperVerifiedSpecs": str(len(verification)),
        "PaperVerifiedPassed": str(int(verification["passed"].astype(bool).sum())),
        "PaperVerifiedWorstGap": f"{finite('gap').min():.1f}",
        "PaperVerifiedMinKept": number(finite("sigma_kept").min()),
        "PaperVerifiedMaxDropped": number(finite("sigma_dropped").max()),
    }


def training_macros(summary: pd.DataFrame) -> dict[str, str]:
    """Sweep size and, per task, the mean overlap and final loss of each optimizer (means over
    heads and seeds; results/training/summary.parquet, one row per run). The lists are prose
    ('SGD 0.01, Adam 0.27'), so the text reads right for whichever optimizers a preset sweeps."""
    out = {
        "PaperTrainSeeds": str(summary["seed"].nunique()),
        "PaperTrainSteps": str(int(summary["steps"].max())),
        "PaperTrainHeads": ", ".join(str(h) for h in sorted(summary["heads"].unique())),
        "PaperTrainOptimizers": ", ".join(OPTIMIZER_NAMES.get(o, o) for o in ordered(summary["optimizer"], list(OPTIMIZER_NAMES))),
        "PaperTrainModes": ", ".join(REBALANCE_NAMES.get(m, m) for m in ordered(summary["rebalance"], list(REBALANCE_NAMES))),
        "PaperChanceMin": number(summary["chance_all"].min()),
        "PaperChanceMax": number(summary["chance_all"].max()),
    }
    for task in PAPER_TASKS:  # the paper's prose names both tasks; a preset may run one
        for key in ("PaperOverlapList", "PaperBalanceOverlapList", "PaperFinalLossList"):
            out[f"{key}{letters(task)}"] = "not run in this preset"
    for task, runs in summary.groupby("task"):
        cell = runs.groupby(["optimizer", "rebalance"])[["mean_overlap_all", "final_loss"]].mean()
        optimizers = ordered(runs["optimizer"], list(OPTIMIZER_NAMES))
        modes = ordered(runs["rebalance"], list(REBALANCE_NAMES))
        name = lambda o: OPTIMIZER_NAMES.get(o, o)  # noqa: E731
        overlaps = [f"{name(o)} {number(cell.loc[(o, 'none'), 'mean_overlap_all'])}" for o in optimizers if (o, "none") in cell.index]
        balanced = [f"{name(o)} {number(cell.loc[(o, 'balance'), 'mean_overlap_all'])}" for o in optimizers if (o, "balance") in cell.index]
        losses = [
            f"{name(o)}: " + ", ".join(f"{number(cell.loc[(o, m), 'final_loss'])} ({REBALANCE_NAMES.get(m, m)})" for m in modes if (o, m) in cell.index)
            for o in optimizers
        ]  # fmt: skip
        out[f"PaperOverlapList{letters(task)}"] = ", ".join(overlaps) or "not measured"
        out[f"PaperBalanceOverlapList{letters(task)}"] = ", ".join(balanced) or "not measured"
        out[f"PaperFinalLossList{letters(task)}"] = "; ".join(losses)
    return out


def combine(fragments: dict[str, str], derived: dict[str, str] | None = None) -> str:
    """One macros file from {path: text} (in order); a name defined twice is an error."""
    sources: dict[str, list[str]] = {}
    for path, text in fragments.items():
        for name in defined_names(text):
            sources.setdefault(name, []).append(path)
    for name in derived or {}:
        sources.setdefault(name, []).append("macros.py")
    twice = {n: s for n, s in sources.items() if len(s) > 1}
    if twice:
        lines = [f"\\{n}: {', '.join(s)}" for n, s in sorted(twice.items())]
        raise ValueError("LaTeX macros defined more than once:\n  " + "\n  ".join(lines))
    parts = ["% generated by workflow/scripts/macros.py: every number in the paper's text; do not edit\n"]
    parts += [f"% --- {path}\n{text.rstrip()}\n" for path, text in fragments.items()]
    if derived:
        parts.append("% --- derived by macros.py from the aggregated results\n" + macros(derived))
    return "\n".join(parts)


if __name__ == "__main__" and "snakemake" in globals():
    fragments = {str(p): Path(p).read_text() for p in snakemake.input.fragments}  # noqa: F821
    derived = verification_macros(pd.read_csv(snakemake.input.verification))  # noqa: F821
    derived |= training_macros(pd.read_parquet(snakemake.input.training))  # noqa: F821
    text = combine(fragments, derived)
    atomic_write_text(snakemake.output[0], text)  # noqa: F821
    Path(snakemake.log[0]).write_text(f"{len(defined_names(text))} macros from {len(fragments)} fragments\n")  # noqa: F821
