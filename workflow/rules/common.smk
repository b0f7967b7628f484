# Shared helpers. Every topic file appends its final outputs to TARGETS so that the
# aggregate rules in the Snakefile (all, tables, figures, notebooks, paper) stay short.

TARGETS = {"data": [], "tables": [], "figures": [], "notebooks": [], "paper": []}

RESULTS = "results"


def logfile(name):
    return f"{RESULTS}/logs/{name}.log"


def benchfile(name):
    return f"{RESULTS}/benchmarks/{name}.tsv"

# LaTeX macro fragments (one per topic, results/macros/<topic>.tex); rule `macros`
# concatenates them into results/tables/macros.tex, which the paper \input's.
MACRO_FRAGMENTS = []
