"""results/figures/jacobian_spectrum.pdf/.png: singular values of J (relative to the largest) of a
few specs on a log scale, the predicted rank marked, the rank tolerance as a dotted line."""

import matplotlib.pyplot as plt

from attnid.io import log_to, read_result
from attnid.report.style import PALETTE, save, use_style

log_to(snakemake.log[0])
use_style()
df = read_result(snakemake.input[0])
fig, ax = plt.subplots()
for colour, (label, spec) in zip(PALETTE, df.groupby("label", sort=False)):
    rank = int(spec["predicted_rank"].iloc[0])
    x = spec["index"] / len(spec)  # fraction of the P parameters, so specs of any size share the axis
    ax.semilogy(x, spec["sigma"].clip(lower=1e-18), color=colour, label=f"{label} (P={len(spec)})")
    ax.axvline(rank / len(spec), color=colour, linestyle="--", linewidth=0.8)
ax.axhline(df["rank_rtol"].iloc[0], color="0.4", linestyle=":", linewidth=0.8, label="rank tolerance")
ax.set_xlabel("singular value index / P (dashed: predicted rank)")
ax.set_ylabel(r"$\sigma_i / \sigma_{\max}$")
ax.set_ylim(1e-18, 3)
ax.legend(loc="lower left", fontsize=5)
save(fig, snakemake.output.pdf, snakemake.output.png)
