r"""One figure style for the whole artifact: sizes for a two-column paper, a colour-blind-safe palette.

Every figure script calls :func:`use_style` first and :func:`save` last, which writes the
vector PDF (paper) and a PNG (notebooks, report) atomically and byte-stable: no creation date
or software version is embedded, so rerunning a figure on unchanged data gives the same bytes
and nothing downstream (the paper) reruns.

A figure is drawn at the width the paper prints it (COLUMN_WIDTH for \columnwidth, FULL_WIDTH for
\textwidth: paper/main.tex's geometry, 0.75 in margins and a 0.25 in column gap on letter paper) and
saved at exactly that size (constrained layout, no tight bounding box), so LaTeX never scales it
and every text is printed at its own size, at least MIN_FONT_PT points. Display names of the
categorical values of the training sweep come from attnid.report.labels (re-exported here for the
figure scripts).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from ..io import atomic_path
from .labels import OPTIMIZER_NAMES, REBALANCE_NAMES, TASK_NAMES, ordered  # noqa: F401 - the figures' names

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
FULL_WIDTH = 7.0  # inches: \textwidth of paper/main.tex (8.5 in letter paper less two 0.75 in margins)
COLUMN_WIDTH = (FULL_WIDTH - 0.25) / 2  # inches: \columnwidth (two columns, 0.25 in apart): 3.375
TEXT_HEIGHT = 9.5  # inches: \textheight of paper/main.tex (11 in letter paper less two 0.75 in margins)
MAX_HEIGHT = TEXT_HEIGHT - 1.0  # inches: the tallest figure that leaves its caption room on one page
MIN_FONT_PT = 7  # no text of a figure is printed smaller (the paper's body text is 10 pt)

STYLE = {
    "figure.figsize": (COLUMN_WIDTH, 2.4),
    "figure.dpi": 150,
    "figure.constrained_layout.use": True,  # everything inside figsize: the saved size is the printed size
    "savefig.dpi": 200,
    "savefig.bbox": None,
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
    "svg.hashsalt": "attnid",  # stable ids in SVG output
}

# Metadata that would change on every run (dates) or with the installed matplotlib (software).
STABLE_METADATA = {
    "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
    "png": {"Software": None},
}

LINESTYLES = ["-", "--", "-.", (0, (3, 1, 1, 1, 1, 1))]  # by rebalancing mode
CHANCE_STYLE = (0, (1, 2))  # dotted: chance levels


def use_style() -> None:
    """Apply the shared style (call before creating figures)."""
    plt.rcParams.update(STYLE)


def label_grid(axes, rows: list[str], cols: list[str], ylabel: str) -> None:
    """Column titles on the top row, 'row name' + ylabel on the left column, x label on the bottom;
    panels without data (a combination the preset does not sweep) say so."""
    for ax in axes.flat:
        if not any(len(ln.get_xdata()) > 2 for ln in ax.lines):  # axhline has 2 points
            ax.text(0.5, 0.5, "not run", transform=ax.transAxes, ha="center", va="center", color="0.5")
    for j, col in enumerate(cols):
        axes[0, j].set_title(col, fontsize=MIN_FONT_PT)
    for i, row in enumerate(rows):
        axes[i, 0].set_ylabel(f"{row}\n{ylabel}")
    for ax in axes[-1, :]:
        ax.set_xlabel("step")


def save(fig, pdf_path: str | Path, png_path: str | Path | None = None) -> None:
    """Save `fig` as PDF (and PNG if given) atomically and without dates, then close it."""
    for path in (pdf_path, png_path):
        if path is None:
            continue
        kind = Path(path).suffix.lstrip(".")
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=kind, metadata=STABLE_METADATA.get(kind))
    plt.close(fig)
