"""Rule provenance: the fingerprint (params) + torch's view of this machine -> results/provenance.json
and the paper's macros (\\ProvenanceCommit, \\ProvenanceConfigHash, ...) -> results/macros/provenance.tex."""

import sys

from attnid.io import atomic_write_json, atomic_write_text
from attnid.report.latex import escape, macros
from attnid.provenance import macros as provenance_macros
from attnid.provenance import record

sys.stderr = open(snakemake.log[0], "w")

rec = record(snakemake.params.fingerprint)
atomic_write_json(snakemake.output.record, rec)
atomic_write_text(
    snakemake.output.macros,
    macros({name: escape(value) for name, value in provenance_macros(rec).items()}),
)
print(f"provenance: commit {rec['git']['commit']} dirty={rec['git']['dirty']} config {rec['config_sha256'][:12]}", file=sys.stderr)
