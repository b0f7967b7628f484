"""Rule nb_publish: an executed notebook (the notebook rule's log) -> results/notebooks/<name>.ipynb and .html.

Published only when every code cell has run (an execution count on each): a notebook that stopped early
is an error naming the first cell that did not run, not a file that looks finished. Both outputs are
written atomically.
"""

from pathlib import Path

import nbconvert
import nbformat

from attnid.io import atomic_write_text, log_to

log = log_to(snakemake.log[0], "nb_publish")
executed = Path(snakemake.params.executed)
notebook = nbformat.read(executed, as_version=4)
code = [c for c in notebook.cells if c.cell_type == "code"]
missing = [i for i, c in enumerate(code) if c.get("execution_count") is None]
if missing:
    raise SystemExit(f"{executed}: code cell {missing[0] + 1} of {len(code)} did not run; rerun its notebook rule")
html, _ = nbconvert.HTMLExporter().from_notebook_node(notebook)
atomic_write_text(snakemake.output.notebook, nbformat.writes(notebook))
atomic_write_text(snakemake.output.html, html)
log.info("%s: %d cells -> %s, %s", executed.name, len(notebook.cells), snakemake.output.notebook, snakemake.output.html)
