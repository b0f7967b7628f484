r"""results/macros/training_text.tex: the real-text paragraph's numbers (attnid.report.text_study), from the
aggregated training results and the corpus manifest (absent in a preset without the text task: 'n/a')."""

import json

from attnid.io import atomic_write_text, log_to, read_result
from attnid.report.macros import fragment
from attnid.report.text_study import text_macros

log = log_to(snakemake.log[0])
inp = snakemake.input
manifest = json.loads(open(inp.manifest).read()) if "manifest" in inp.keys() else None
values = text_macros(read_result(inp.summary), read_result(inp.effects), read_result(inp.decay), manifest)
atomic_write_text(snakemake.output[0], fragment(values, "workflow/scripts/training_text_macros.py"))
log.info("%s", values)
