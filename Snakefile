# attnid: one DAG from seeds and a config to every figure, table, notebook and the paper.
# Targets: all (default), figures, tables, notebooks, paper; see README.md.
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/counting.smk"
include: "workflow/rules/jacobian.smk"
include: "workflow/rules/provenance.smk"
include: "workflow/rules/training.smk"
include: "workflow/rules/symmetry.smk"
# figures, notebooks, paper: keep these last (they read the outputs of the topic rules above)
include: "workflow/rules/figures.smk"
include: "workflow/rules/notebooks.smk"
include: "workflow/rules/paper.smk"


rule all:
    default_target: True
    input:
        TARGETS["data"],
        TARGETS["tables"],
        TARGETS["figures"],
        TARGETS["notebooks"],
        TARGETS["paper"],


rule tables:
    input:
        TARGETS["tables"],


rule figures:
    input:
        TARGETS["figures"],


rule notebooks:
    input:
        TARGETS["notebooks"],
