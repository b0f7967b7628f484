"""Figure `jacobian_spectrum`: singular values of the Jacobian of a few specs, the predicted rank marked.

Reads results/jacobian/spectra.csv (long: label, index 1..P, sigma relative to the largest,
predicted_rank, rank_rtol). x: the index over P, so specs of any size share the axis; y: sigma_i /
sigma_max on a log scale (zeros drawn at the axis floor); dashed vertical: the predicted rank P - N
of each spec; dotted horizontal: the rank tolerance. The legend names each spec in words
(attnid.report.labels.spec_text), not by its label.
"""

import pandas as pd

from attnid.report.labels import spec_text
from attnid.report.style import COLUMN_WIDTH, PALETTE, use_style

FLOOR = 1e-18  # exact zeros of the float64 SVD are drawn here


def plot(spectra: pd.DataFrame):
    import matplotlib.pyplot as plt

    use_style()
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 2.6))
    for colour, (label, spec) in zip(PALETTE, spectra.groupby("label", sort=False)):
        P, rank = len(spec), int(spec["predicted_rank"].iloc[0])
        ax.semilogy(spec["index"] / P, spec["sigma"].clip(lower=FLOOR), color=colour,
                    label=f"{spec_text(label)}\n$P = {P}$, $N = {P - rank}$ unidentified")  # fmt: skip
        ax.axvline(rank / P, color=colour, linestyle="--", linewidth=0.8)
    ax.axhline(spectra["rank_rtol"].iloc[0], color="0.4", linestyle=":", linewidth=0.8, label="rank tolerance")
    ax.set_xlabel(r"index $i / P$ (dashed: predicted rank $(P - N)/P$)")
    ax.set_ylabel(r"$\sigma_i / \sigma_{\max}$")
    ax.set_ylim(FLOOR, 3)
    fig.legend(loc="outside lower center", ncol=1)
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
