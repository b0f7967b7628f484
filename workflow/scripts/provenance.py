"""Rule provenance: the fingerprint + torch's view of this machine (+ the text corpus's manifest, when the sweep
trains on text) -> <results_dir>/provenance.json and the paper's macros (\\ProvenanceCommit,
\\ProvenanceConfigHash, ...) -> macros/provenance.tex."""

from pathlib import Path

from attnid.io import atomic_write_json, atomic_write_text, log_to
from attnid.provenance import corpus_record, fingerprint, fingerprint_sha256, record
from attnid.report.macros import fragment, provenance_macros

log = log_to(snakemake.log[0], "provenance")
repo = Path(snakemake.scriptdir).resolve().parents[1]
fp = fingerprint(snakemake.config, repo, snakemake.input.configfiles)
if fingerprint_sha256(fp) != snakemake.params.fingerprint:
    log.warning("the fingerprint changed between planning and running this job (code or config edited meanwhile)")
manifest = snakemake.input.get("corpus")
rec = record(fp, repo, corpus_record(manifest) if manifest else None)
atomic_write_json(snakemake.output.record, rec)
atomic_write_text(snakemake.output.macros, fragment(provenance_macros(rec), "workflow/scripts/provenance.py"))
log.info(
    "commit %s dirty=%s code %s config %s",
    rec["git"]["commit"],
    rec["git"]["dirty"],
    rec["code_sha256"][:12],
    rec["config_sha256"][:12],
)
