# Shared helpers. Every topic file appends its final outputs to TARGETS so that the
# aggregate rules in the Snakefile (all, tables, figures, notebooks, paper) stay short.

# Every rule names this software environment (`conda: CONDA_ENV`); the path is relative to workflow/rules/.
CONDA_ENV = "../../environment.yml"

TARGETS = {"data": [], "tables": [], "figures": [], "notebooks": [], "paper": []}

RESULTS = "results"


logfile = lambda name: f"{RESULTS}/logs/{name}.log"
benchfile = lambda name: f"{RESULTS}/benchmarks/{name}.tsv"

# LaTeX macro fragments (one per topic, results/macros/<topic>.tex); rule `macros`
# concatenates them into results/tables/macros.tex, which the paper \input's.
MACRO_FRAGMENTS = []
