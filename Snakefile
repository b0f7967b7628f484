# attnid: one DAG from seeds and a config to every figure, table, notebook and the paper.
# Targets: all (default), figures, tables, notebooks, paper; see README.md.
import sys

from snakemake.utils import min_version, validate

from attnid.workflow_config import ConfigError, check, export_producers

min_version("9.0")


configfile: f"{workflow.basedir}/config/config.yaml"


SCHEMA = f"{workflow.basedir}/workflow/schemas/config.schema.yaml"
try:  # one line per problem, naming the key (not Snakemake's dump of schema and config)
    check(config, SCHEMA)
except ConfigError as err:
    sys.exit(f"Error in the config:\n{err}")
validate(config, SCHEMA)  # fills in the schema's defaults


include: "workflow/rules/common.smk"
include: "workflow/rules/counting.smk"
include: "workflow/rules/jacobian.smk"
include: "workflow/rules/hf.smk"
include: "workflow/rules/whole_model.smk"
include: "workflow/rules/provenance.smk"
include: "workflow/rules/corpus.smk"
include: "workflow/rules/training.smk"
include: "workflow/rules/training_report.smk"
include: "workflow/rules/symmetry.smk"
# figures, notebooks, paper: keep these last (they read the outputs of the topic rules above)
include: "workflow/rules/figures.smk"
include: "workflow/rules/notebooks.smk"
include: "workflow/rules/paper.smk"


# a job that reads a corrupt file names the rule that rebuilds it
export_producers(workflow.rules)


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
