"""One figure style for the whole artifact: sizes for a two-column paper, a colour-blind-safe palette.

Every figure script calls :func:`use_style` first and :func:`save` last, which writes the
vector PDF (paper) and a PNG (notebooks, report) atomically.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .io import atomic_path  # noqa: E402

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
COLUMN_WIDTH = 3.4  # inches: one column of a two-column paper
FULL_WIDTH = 7.0  # inches: both columns

STYLE = {
    "figure.figsize": (COLUMN_WIDTH, 2.4),
    "figure.dpi": 150,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "lines.linewidth": 1.2,
    "lines.markersize": 4,
    "legend.frameon": False,
    "pdf.fonttype": 42,
}


def use_style() -> None:
    """Apply the shared style (call before creating figures)."""
    plt.rcParams.update(STYLE)


def save(fig, pdf_path: str | Path, png_path: str | Path | None = None) -> None:
    """Save `fig` as PDF (and PNG if given) atomically, then close it."""
    for path in (pdf_path, png_path):
        if path is None:
            continue
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=Path(path).suffix.lstrip("."))
    plt.close(fig)
