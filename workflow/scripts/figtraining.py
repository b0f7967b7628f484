"""What the training figures share: the 95% interval over seeds, display names, the diverged-run note.

Every figure shows each (task, model) apart: its first step is :func:`with_settings`, which writes the
setting key (`recall/llama`, ...) into the `task` column, and TASK_NAMES here are the settings' display
names (attnid.report.labels.SETTING_NAMES).

Imported by workflow/scripts/fig_*.py of the training study (Snakemake puts this folder on sys.path).
Every interval is the t-interval of attnid.training.analysis (the macros quote the same), passed
to seaborn as its `errorbar` callable.
"""

import numpy as np
import pandas as pd

from attnid.report.labels import OPTIMIZER_NAMES, OPTIMIZER_SHORT, REBALANCE_NAMES, ordered, with_settings
from attnid.report.labels import SETTING_NAMES as TASK_NAMES
from attnid.report.style import MIN_FONT_PT
from attnid.training.analysis import t_interval, t_quantile

CI = t_interval  # seaborn errorbar: values -> (low, high), the 95% t-interval of the mean over seeds
CI_TEXT = "mean and 95% interval over seeds"
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]  # one per optimizer, so coinciding points stay visible
PALETTE_ORDER = [0, 1, 2, 3, 4, 5, 6, 7]  # the palette's colours in the order the optimizers take them
DODGE = 1.07  # factor between neighbouring optimizers' x on a log axis (points at one H drawn apart)


def dodged(x, i: int, n: int):
    """x of the i-th of n series at one position, spread by DODGE around it (log axes)."""
    return np.asarray(x, dtype=float) * DODGE ** (i - (n - 1) / 2)


def mean_ci(df, by: str, value: str):
    """Per value of `by`: columns [by, mean, low, high], the 95% t-interval over the rows (seeds)."""
    rows = [(key, g.mean(), *CI(g)) for key, g in df.groupby(by)[value]]
    return pd.DataFrame(rows, columns=[by, "mean", "low", "high"])


def draw_points(ax, stats, x, color, marker, label):
    """Means with their intervals as error bars, joined by a line (NaN intervals drawn without a bar)."""
    mean = stats["mean"].to_numpy()
    err = np.nan_to_num(np.vstack([mean - stats["low"].to_numpy(), stats["high"].to_numpy() - mean]))
    ax.errorbar(x, mean, yerr=err, color=color, marker=marker, ms=4, lw=1.0, elinewidth=0.9, capsize=0, label=label)


def names(df, column: str, mapping: dict):
    """The display names of df[column], in the mapping's order (unknown values last, as they are)."""
    return [mapping.get(v, v) for v in ordered(df[column], list(mapping))]


def readable(df):
    """A copy with display names for task, optimizer and rebalance (for seaborn's legends)."""
    out = df.copy()
    for column, mapping in (("task", TASK_NAMES), ("optimizer", OPTIMIZER_NAMES), ("rebalance", REBALANCE_NAMES)):
        if column in out:
            out[column] = out[column].map(lambda v, m=mapping: m.get(v, v))
    return out


def band(df, by: list, value: str, x: str = "step", log: bool = False):
    """Mean and 95% t-interval over seeds of `value` against `x` per group `by`, vectorised (for curves of
    hundreds of steps, where calling the interval per point is slow): columns by + [x, mean, low, high].
    log=True: the interval of log10(value), returned as a geometric mean and band (for log axes)."""
    data = df.assign(**{value: np.log10(df[value])}) if log else df
    g = data.groupby([*by, x])[value].agg(["mean", "std", "count"]).reset_index()
    tq = np.array([t_quantile(max(int(n) - 1, 1)) for n in g["count"]])
    half = np.where(g["count"] > 1, tq * g["std"] / np.sqrt(g["count"]), np.nan)
    out = g.assign(low=g["mean"] - half, high=g["mean"] + half)
    if log:
        out[["mean", "low", "high"]] = 10 ** out[["mean", "low", "high"]]
    return out


def draw_band(ax, b, color, x: str = "step", **style) -> None:
    """A mean curve of :func:`band` output with its interval as a shaded band."""
    ax.plot(b[x], b["mean"], color=color, lw=0.9, **style)
    ax.fill_between(b[x], b["low"], b["high"], color=color, alpha=0.2, lw=0)


def panel_grid(n: int, width: float, row_height: float, ncols: int = 3, extra: float = 0.6, **kwargs):
    """(fig, axes): n panels in rows of at most `ncols`, the unused places empty; axes a flat list of the n."""
    import math

    import matplotlib.pyplot as plt

    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(width, extra + row_height * nrows), squeeze=False, **kwargs)
    axes = list(grid.flat)
    for ax in axes[n:]:
        fig.delaxes(ax)
    return fig, axes[:n]


SETTINGS_PER_ROW = 5  # settings side by side at the full text width before they wrap (titles and ticks stay apart)
TITLE_CHARS = 22  # a longer setting name ("Markov, Llama, fixed head size") takes two lines


def setting_blocks(n: int, rows: int, width: float, row_height: float, columns: int = SETTINGS_PER_ROW,
                   extra: float = 0.9, **kwargs):  # fmt: skip
    """(fig, at): n settings side by side, each a column of `rows` panels, at most `columns` settings to a row of
    blocks (more wrap into the next block of `rows` rows); at(k, i) is setting k's i-th panel. The last block's
    empty places are removed."""
    import math

    import matplotlib.pyplot as plt

    columns = min(columns, n)
    blocks = math.ceil(n / columns)
    fig, grid = plt.subplots(rows * blocks, columns, figsize=(width, extra + row_height * rows * blocks), squeeze=False,
                             **kwargs)  # fmt: skip
    for place in range(n, blocks * columns):
        for i in range(rows):
            fig.delaxes(grid[rows * (place // columns) + i, place % columns])
    return fig, lambda k, i: grid[rows * (k // columns) + i, k % columns]


def title(name: str) -> str:
    """A setting's panel title, on two lines when long."""
    import textwrap

    return textwrap.fill(name, TITLE_CHARS)


def label_log_y(ax) -> None:
    """A log y axis labelled in plain numbers (0.02, 2.2), its minor ticks too where the panel spans under a decade
    (matplotlib's LogFormatter picks which ticks to label)."""
    from matplotlib.ticker import LogFormatter

    class PlainLog(LogFormatter):
        def __call__(self, x, pos=None):
            return f"{x:g}" if super().__call__(x, pos) else ""

    ax.yaxis.set_major_formatter(PlainLog(labelOnlyBase=False, minor_thresholds=(1, 0.4)))
    ax.yaxis.set_minor_formatter(PlainLog(labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def short(df, column: str = "optimizer"):
    """A copy with the short display names of the optimizers (narrow category axes)."""
    out = df.copy()
    out[column] = out[column].map(lambda v: OPTIMIZER_SHORT.get(v, OPTIMIZER_NAMES.get(v, v)))
    return out


def slanted(ax) -> None:
    """x tick labels (optimizer names) at 30 degrees, anchored at their right end."""
    ax.tick_params(axis="x", labelrotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")


def note_diverged(fig, summary) -> None:
    """A footnote naming how many runs diverged (they are left out of the panels), if any."""
    if "diverged" in summary and summary["diverged"].any():
        n = int(summary["diverged"].sum())
        fig.text(0.01, 0.0, f"{n} diverged run(s) left out: {', '.join(sorted(set(summary.loc[summary['diverged'], 'optimizer'])))}",
                 fontsize=MIN_FONT_PT, color="#D55E00", va="bottom")  # fmt: skip


__all__ = [
    "CI",
    "CI_TEXT",
    "MARKERS",
    "OPTIMIZER_NAMES",
    "OPTIMIZER_SHORT",
    "PALETTE_ORDER",
    "REBALANCE_NAMES",
    "TASK_NAMES",
    "band",
    "dodged",
    "draw_band",
    "draw_points",
    "mean_ci",
    "names",
    "note_diverged",
    "panel_grid",
    "readable",
    "short",
    "with_settings",
]
