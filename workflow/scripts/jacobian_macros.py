r"""results/macros/jacobian.tex: the Jacobian verification's numbers for the paper (\Jacobian...)."""

import json
import math

import pandas as pd

from attnid.io import atomic_write_text, log_to
from attnid.latex import macros, scientific

log_to(snakemake.log[0])


def sci(x: float) -> str:
    """1.2e-06 -> 1.2 x 10^-6 in LaTeX maths (0 and non-finite values as they are)."""
    if x == 0 or not math.isfinite(x):
        return "$0$" if x == 0 else str(x)
    return scientific(x)


grid = pd.read_csv(snakemake.input.verification)
points = pd.read_csv(snakemake.input.ratio_points)
bias = pd.read_csv(snakemake.input.bias_effects)
finite = lambda s: s.replace([math.inf, -math.inf], math.nan).dropna()  # noqa: E731
values = {
    "JacobianSpecs": len(grid),
    "JacobianAgree": int(grid["passed"].astype(bool).sum()),
    "JacobianWorstGap": f"{finite(grid['gap']).min():.1f}",
    "JacobianMinKept": sci(grid["sigma_kept"].min()),
    "JacobianMaxDropped": sci(grid["sigma_dropped"].max()),
    "JacobianRankTolerance": sci(snakemake.params.cfg["rank_rtol"]),
    "JacobianOversample": f"{snakemake.params.cfg['oversample']:g}",
    "JacobianRatioPoints": len(points),
    "JacobianRatioAgree": int(points["passed"].astype(bool).sum()) if len(points) else 0,
    "JacobianBiasRows": len(bias),
    "JacobianBiasAgree": int(bias["agree"].astype(bool).sum()),
}
for path in snakemake.input.large:
    large = json.loads(open(path).read())
    values |= {
        "JacobianLargeParams": f"{large['total']:,}".replace(",", "{,}"),
        "JacobianLargeUnidentified": f"{large['predicted']:,}".replace(",", "{,}"),
        "JacobianLargeSeconds": f"{large['seconds']:.0f}",
        "JacobianLargeMemoryGiB": f"{large['peak_memory_bytes'] / 2**30:.1f}",
        "JacobianLargeCertifiedKept": sci(large["cert_rtol"]),
    }
atomic_write_text(snakemake.output[0], macros({k: str(v) for k, v in values.items()}))
print(values)
