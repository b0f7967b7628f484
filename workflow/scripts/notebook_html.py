"""Rule nb_html: an executed notebook (kept by the notebook rule as its log) -> HTML for the report."""

from pathlib import Path

import nbconvert
import nbformat

from attnid.io import atomic_write_text, log_to

log = log_to(snakemake.log[0], "nb_html")
notebook = nbformat.read(snakemake.params.notebook, as_version=4)
html, _ = nbconvert.HTMLExporter().from_notebook_node(notebook)
atomic_write_text(snakemake.output[0], html)
log.info("%s: %d cells -> %s", Path(snakemake.params.notebook).name, len(notebook.cells), snakemake.output[0])
