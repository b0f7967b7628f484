"""What every figure of the paper must satisfy, checked on the Figure a script's plot() returns.

- drawn at the width the paper prints it (paper/**/*.tex: \\includegraphics[width=\\columnwidth or
  \\textwidth]{results/figures/<name>.pdf}; attnid.report.style's COLUMN_WIDTH and FULL_WIDTH), so LaTeX
  does not scale it;
- no text below attnid.report.style.MIN_FONT_PT (mathtext sub- and superscripts are 0.7 of their text),
  and none cut off at the figure's edge (the saved figure is exactly the drawn one: no tight bbox);
- no legend entry or tick label that is a config id or a spec label.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG_ID = re.compile(r"teacher_student|sgd_wd|sgd_momentum|adam_shared|\bd\d+_h\d+_g\d+")


def printed_width(name: str) -> float:
    """The width in inches at which the paper includes results/figures/<name>.pdf."""
    from attnid.report.style import COLUMN_WIDTH, FULL_WIDTH

    tex = "\n".join(p.read_text() for p in sorted((ROOT / "paper").glob("**/*.tex")))
    found = re.findall(rf"\\includegraphics\[width=\\(columnwidth|textwidth)\]\{{results/figures/{name}\.pdf\}}", tex)
    assert len(found) == 1, f"results/figures/{name}.pdf is included {len(found)} times"
    return COLUMN_WIDTH if found[0] == "columnwidth" else FULL_WIDTH


def texts(fig):
    """Every visible, non-empty text a figure draws (titles, labels, ticks, legends, annotations); tick labels
    of ticks outside the axis limits are not drawn and left out."""
    import matplotlib.text

    hidden = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            for ticks, labels in ((axis.get_majorticklocs(), axis.get_majorticklabels()),
                                  (axis.get_minorticklocs(), axis.get_minorticklabels())):  # fmt: skip
                hidden |= {id(t) for loc, t in zip(ticks, labels) if not low - 1e-12 <= loc <= high + 1e-12}
    return [t for t in fig.findobj(matplotlib.text.Text)
            if t.get_visible() and t.get_text().strip() and id(t) not in hidden]  # fmt: skip


def _inside(extent, box, tolerance: float = 1.0) -> bool:
    """Whether a text's window extent lies within the figure's box (to a pixel)."""
    return (extent.x0 >= box.x0 - tolerance and extent.x1 <= box.x1 + tolerance
            and extent.y0 >= box.y0 - tolerance and extent.y1 <= box.y1 + tolerance)  # fmt: skip


def assert_printable(fig, name: str) -> None:
    from attnid.report.style import MAX_HEIGHT, MIN_FONT_PT

    fig.canvas.draw()  # tick labels exist only after a draw
    width, height = fig.get_size_inches()
    printed = printed_width(name)
    assert abs(width - printed) < 1e-6, f"{name}: drawn {width:.3f} in wide, printed {printed:.3f}"
    assert height <= MAX_HEIGHT + 1e-9, f"{name}: {height:.2f} in tall, a page leaves a figure {MAX_HEIGHT} in"
    small = [(t.get_text(), t.get_fontsize()) for t in texts(fig) if t.get_fontsize() < MIN_FONT_PT - 1e-9]
    assert not small, f"{name}: text below {MIN_FONT_PT} pt: {small[:5]}"
    renderer = fig.canvas.get_renderer()
    box = fig.bbox
    outside = [t.get_text() for t in texts(fig) if not _inside(t.get_window_extent(renderer), box)]
    assert not outside, f"{name}: text cut off at the figure's edge: {outside[:5]}"
    coded = [t.get_text() for t in texts(fig) if CONFIG_ID.search(t.get_text())]
    assert not coded, f"{name}: config ids or spec labels shown: {coded[:5]}"
    import matplotlib

    assert matplotlib.rcParams["savefig.bbox"] in (None, "standard"), "a tight bounding box changes the printed size"
    matplotlib.pyplot.close(fig)
