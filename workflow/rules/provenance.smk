# Provenance: results/provenance.json (package versions, python/platform, torch and CUDA, git commit
# and dirty flag, config sha256, seeds, device) and results/macros/provenance.tex for the paper.
# The fingerprint is a param, so Snakemake's params rerun trigger rebuilds the record whenever code
# (commit or uncommitted changes), config or installed software change, and only then: nothing
# downstream is forced to rerun by a build that changed nothing. Runs where the compute jobs run
# (on a GPU node when device is cuda), so the record shows the GPU they used.
#
# attnid.provenance is imported lazily (in the param): attnid loads torch, and every job (each
# SLURM job too) parses this file; only DAGs that contain rule provenance pay for the import.
from importlib import import_module


rule provenance:
    input:
        workflow.configfiles,
        script_inputs("provenance.py"),
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
        fingerprint=lambda wildcards: import_module("attnid.provenance").fingerprint(
            config, workflow.basedir, workflow.configfiles
        ),
    script:
        "../scripts/provenance.py"


TARGETS["data"].append(rules.provenance.output.record)
MACRO_FRAGMENTS.append(rules.provenance.output.macros)
