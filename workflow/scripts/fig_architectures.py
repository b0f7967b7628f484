"""Figure `architectures`: the identified share of attention parameters in real models.

Reads results/counting/architectures.csv (one row per model, counts per layer and per model).
Dot: identified / total attention parameters of one layer (every layer of these models has the
same attention shape, so it is also the per-model share). Text on the right, under its heading: the
identified share and, in brackets, the unidentified attention parameters of the whole model.
Tick: the share 1 - 1/(2H) that standard MHA with the model's H would give, for comparison.
"""

import numpy as np
import pandas as pd

from attnid.report.style import COLUMN_WIDTH, MIN_FONT_PT, PALETTE, use_style


def _millions(n: float) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n / 1e3:.1f}k"


def plot(architectures: pd.DataFrame):
    """Dots of the identified share, sorted, one per model (a matplotlib Figure)."""
    import matplotlib.pyplot as plt

    use_style()
    df = architectures.assign(share=100 * architectures["identified"] / architectures["total"]).sort_values("share")
    y = np.arange(len(df))
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 1.0 + 0.22 * len(df)))
    ax.plot(df["share"], y, "o", color=PALETTE[0], clip_on=False, label="identified (exact count)")
    ax.plot(100 * (1 - 1 / (2 * df["n_heads"])), y, "|", color=PALETTE[3], ms=9, mew=1.5, label=r"MHA $1 - 1/(2H)$")
    side = ax.get_yaxis_transform()  # x in axes coordinates, y in data coordinates
    for yi, (share, unid) in zip(y, zip(df["share"], df["model_unidentified"])):
        ax.text(1.03, yi, f"{share:.2f}% ({_millions(unid)})", transform=side, va="center", fontsize=MIN_FONT_PT)
    ax.text(1.03, len(df) - 0.45, "identified\n(unidentified)", transform=side, va="bottom", fontsize=MIN_FONT_PT)
    ax.set_yticks(y, df["model"])
    low = min(df["share"].min(), (100 * (1 - 1 / (2 * df["n_heads"]))).min())
    ax.set_xlim(low - 0.1 * (100 - low), 100)
    ax.set_ylim(-0.6, len(df) - 0.4)
    ax.set_xlabel("identified share of attention parameters (%)")
    ax.grid(axis="y", visible=False)
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=2)
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
