# Provenance: <results_dir>/provenance.json (package versions, python/platform, torch and CUDA, git
# commit and dirty flag, code and config sha256, seeds, device) and macros/provenance.tex for the paper.
# A short hash of the fingerprint (attnid.provenance) is a param, so Snakemake's params rerun trigger
# rebuilds the record when the code results depend on, the config or the installed software change,
# and only then: a README edit or an untracked note reruns nothing. Runs where the compute jobs run
# (on a GPU node when device is cuda), so the record shows the GPU they used. Where a task trains on
# text, the corpus's manifest is an input and its sha256 part of the record (workflow/rules/corpus.smk).
import attnid.provenance as provenance


rule provenance:
    input:
        script_inputs("provenance.py"),
        configfiles=[os.path.relpath(f) for f in workflow.configfiles],
        corpus=lambda wildcards: rules.corpus.output.manifest if CORPUS_USED else [],
    output:
        record=report(
            f"{RESULTS}/provenance.json",
            category="Provenance",
            labels={"what": "build provenance"},
        ),
        macros=f"{RESULTS}/macros/provenance.tex",
    log:
        logfile("provenance"),
    conda:
        CONDA_ENV
    resources:
        gpu=1 if config.get("device", "cpu") == "cuda" else 0,
    params:
        fingerprint=lambda wildcards: provenance.fingerprint_sha256(
            provenance.fingerprint(config, REPO, workflow.configfiles)
        ),
    script:
        "../scripts/provenance.py"


TARGETS["data"].append(rules.provenance.output.record)
MACRO_FRAGMENTS.append(rules.provenance.output.macros)
