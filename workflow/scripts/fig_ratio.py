"""Figure `ratio`: unidentified / total parameters against the number of heads H.

Lines: the exact counts (results/counting/ratios.csv). Open markers: the Jacobian-measured
ratio at the same specs (results/jacobian/ratio_points.csv, joined on `label`). When the points were
measured at another width d' (config jacobian.ratio_points.d_model, where a measurement is cheap),
they are joined on (H, G, RoPE, biases) and drawn on their own thin dotted count line at d', since the
ratio depends on d through the RoPE and bias terms. Wide light grey: the closed form 1/(2H) of standard
multi-head attention (d_k = d_v = d/H, no RoPE, no biases). Three panels: (a) key/value groups (MHA
and GQA with fixed group counts G), (b) RoPE none / half / full, (c) biases without and with RoPE.
Only the rows of attnid.jacobian.ratio_figure_rows (standard head sizes d_k = d_v = d/H, non-causal).
"""

import numpy as np
import pandas as pd

from attnid.jacobian.grids import RATIO_KEYS, ratio_figure_rows
from attnid.report.style import FULL_WIDTH, PALETTE, ordered, use_style
from attnid.layer.spec import bias_text

ROPE_ORDER = ["none", "half", "full"]


def prepare(ratios: pd.DataFrame, points: pd.DataFrame | None) -> pd.DataFrame:
    """The drawn rows of the grid with the measured ratio (NaN where not measured); `ratio_width` is the
    count at the points' width d' and `width_measured` that width (NaN when the points share the grid's)."""
    df = ratio_figure_rows(ratios)
    if points is None or not len(points):
        df["ratio_measured"] = df["ratio_width"] = df["width_measured"] = np.nan
    elif "d_model" not in points or set(points["d_model"]) <= set(df["d_model"]):
        df = df.merge(points[["label", "ratio_measured"]], on="label", how="left")
        df["ratio_width"] = df["width_measured"] = np.nan
    else:
        pts = points.assign(biases=points["biases"].map(bias_text), ratio_width=points["predicted"] / points["total"])
        pts = pts.rename(columns={"d_model": "width_measured"})
        df = df.merge(pts[[*RATIO_KEYS, "ratio_measured", "ratio_width", "width_measured"]], on=RATIO_KEYS, how="left")
    return df.sort_values("n_heads")


def _line(ax, rows: pd.DataFrame, color, label: str, style: str = "-") -> None:
    ax.plot(rows["n_heads"], rows["ratio"], style, color=color, marker=".", label=label)
    measured = rows.dropna(subset=["ratio_measured"])
    if measured["width_measured"].notna().any():  # measured at another width: on its own count line
        ax.plot(measured["n_heads"], measured["ratio_width"], ":", color=color, lw=0.8)
    ax.plot(measured["n_heads"], measured["ratio_measured"], "o", mfc="none", color=color, ms=6, mew=0.9)


def panels(df: pd.DataFrame) -> list[tuple[str, list[tuple[str, pd.DataFrame]]]]:
    """(title, [(legend label, rows)]) for each panel; empty selections are left out."""
    mha = df[df["n_kv_heads"] == df["n_heads"]]
    plain = df[(df["rope"] == "none") & (df["biases"] == "none")]
    groups = [("MHA ($G = H$)", plain[plain["n_kv_heads"] == plain["n_heads"]])]
    for g in sorted(plain.loc[plain["n_kv_heads"] < plain["n_heads"], "n_kv_heads"].unique()):
        groups.append((f"GQA, $G = {g}$", plain[plain["n_kv_heads"] == g]))
    rope = [
        (f"RoPE {r}", mha[(mha["rope"] == r) & (mha["biases"] == "none")]) for r in ordered(mha["rope"], ROPE_ORDER)
    ]
    bias = []
    for r in [x for x in ordered(mha["rope"], ROPE_ORDER) if x in ("none", "full")]:
        for b in ordered(mha["biases"], ["none"]):
            name = f"bias {b}, RoPE {r}"
            bias.append((name, mha[(mha["rope"] == r) & (mha["biases"] == b)]))
    result = [("(a) key/value groups", groups), ("(b) RoPE (MHA)", rope), ("(c) biases (MHA)", bias)]
    return [(t, [(n, rows) for n, rows in lines if len(rows)]) for t, lines in result]


def plot(ratios: pd.DataFrame, points: pd.DataFrame | None = None):
    """The three-panel figure (a matplotlib Figure)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    use_style()
    df = prepare(ratios, points)
    spec = panels(df)
    fig, axes = plt.subplots(1, len(spec), figsize=(FULL_WIDTH, 2.4), sharey=True, constrained_layout=True)
    heads = np.sort(df["n_heads"].unique())
    curve = np.geomspace(heads.min(), heads.max(), 100)
    widths = df["width_measured"].dropna().unique()
    jacobian = "Jacobian" if not len(widths) else f"Jacobian ($d = {int(widths[0])}$)"  # dotted: its count
    for ax, (title, lines) in zip(np.atleast_1d(axes), spec):
        ax.plot(curve, 1 / (2 * curve), "-", color="0.8", lw=4, zorder=0, label=r"$1/(2H)$")
        for i, (name, rows) in enumerate(lines):
            _line(ax, rows, PALETTE[i % len(PALETTE)], name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(heads, [str(h) for h in heads])
        ax.set_xlabel("heads $H$")
        ax.set_title(title, loc="left")
        handles, _ = ax.get_legend_handles_labels()
        marker = Line2D([], [], ls="none", marker="o", mfc="none", color="0.3", label=jacobian)
        ax.legend(handles=[*handles, marker], loc="lower left")
    np.atleast_1d(axes)[0].set_ylabel("unidentified / total")
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
