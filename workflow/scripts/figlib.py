"""The glue every figure rule shares: read the named inputs, call plot(**tables), save PDF and PNG.

Imported by workflow/scripts/fig_*.py (Snakemake puts this folder on sys.path). The style, the
display names and the statistics over seeds live in the library (attnid.report.style,
attnid.report.seeds), so the tests and the notebooks use the same ones.
"""

import numpy as np


def bias_label(biases) -> str:
    """Canonical bias string: '' for no bias ('none', NaN, '' all map to '')."""
    if biases is None or (isinstance(biases, float) and np.isnan(biases)):
        return ""
    text = str(biases).strip().lower()
    return "" if text in ("", "none", "nan") else text


def main(snakemake, plot) -> None:
    """Glue of every figure rule: read each named input, call plot(**tables) and save the figure
    to output.pdf and output.png (byte-stable: attnid.report.style.save)."""
    from attnid.io import log_to, read_result
    from attnid.report.style import save

    log = log_to(snakemake.log[0], "figure")
    tables = {name: read_result(path) for name, path in snakemake.input.items()}
    for name, df in tables.items():
        log.info("%s: %d rows, columns %s", name, len(df), ", ".join(df.columns))
    save(plot(**tables), snakemake.output.pdf, snakemake.output.png)
