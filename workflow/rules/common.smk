# Shared helpers. Every topic file appends its final outputs to TARGETS so that the
# aggregate rules in the Snakefile (all, tables, figures, notebooks, paper) stay short.

# Tools the jobs call by name (papermill, nbconvert) come from the environment running Snakemake.
import os

from attnid.workflow_config import tools_on_path

tools_on_path()

# The software environment every job names (`conda` directive); the path is relative to workflow/rules/.
CONDA_ENV = "../../environment.yml"

TARGETS = {"data": [], "tables": [], "figures": [], "notebooks": [], "paper": []}

# Every output of a preset lands under its own folder (results/default, results/smoke, results/paper),
# so presets never overwrite each other's files.
RESULTS = config.get("results_dir", "results/default")


logfile = lambda name: f"{RESULTS}/logs/{name}.log"
benchfile = lambda name: f"{RESULTS}/benchmarks/{name}.tsv"

# LaTeX macro fragments (one per topic, results/macros/<topic>.tex); rule `macros`
# concatenates them into results/tables/macros.tex, which the paper \input's.
MACRO_FRAGMENTS = []


# Results follow the code: every rule that runs a script lists, as inputs, the script and every
# module it imports from this repository (the `attnid` package under src/ and the helper scripts
# next to it), transitively, found by reading the sources (no import, so no torch at parse time).
# Editing a module then reruns exactly the rules whose scripts use it. A package's __init__.py
# counts only where it is imported by name (`import attnid`, `from attnid import X`).
import ast
import functools

REPO = os.path.abspath(workflow.basedir)
PACKAGE_SRC = os.path.join(REPO, "src")
SCRIPTS = os.path.join(REPO, "workflow", "scripts")
NOTEBOOKS = os.path.join(REPO, "notebooks")


def _module_file(name):
    """'attnid.report.latex' -> its source file under src/ (None when it is not a module of ours)."""
    base = os.path.join(PACKAGE_SRC, *name.split("."))
    for path in (f"{base}.py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def _imported_names(path, module):
    """Absolute names of the modules (or module attributes) a source file imports."""
    if path.endswith(".ipynb"):
        import jupytext

        source = jupytext.writes(jupytext.read(path), fmt="py:percent")
    else:
        with open(path) as f:
            source = f.read()
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from .x import y inside the package
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module
            names.append(base)
            names += [
                f"{base}.{alias.name}" for alias in node.names
            ]  # `from pkg import submodule`
    return names


@functools.cache
def _direct_dependencies(path, module):
    """(file, module name) of each repository module `path` imports directly."""
    deps = []
    for name in _imported_names(path, module):
        if name.split(".")[0] == "attnid":
            dep = _module_file(name)
        elif "." not in name and os.path.isfile(os.path.join(SCRIPTS, f"{name}.py")):
            # a helper script next to the glue scripts
            dep = os.path.join(SCRIPTS, f"{name}.py")
        else:
            dep = None
        if dep is not None:
            deps.append((dep, name))
    return deps


def _code_closure(path, module):
    """The set of repository source files `path` (module name `module`) needs, itself included."""
    found, todo = {path}, [(path, module)]
    while todo:
        for dep, name in _direct_dependencies(*todo.pop()):
            if dep not in found:
                found.add(dep)
                todo.append((dep, name))
    return found


def script_inputs(script):
    """The inputs of a job that runs workflow/scripts/<script> (notebooks/<script> for a notebook),
    which are the file and every module of this repository it imports, transitively, sorted.
    """
    folder = NOTEBOOKS if script.endswith(".ipynb") else SCRIPTS
    path = os.path.join(folder, script)
    if not os.path.isfile(path):
        # Snakemake then names the missing script, for this rule only
        return [os.path.relpath(path)]
    return sorted(
        os.path.relpath(p) for p in _code_closure(path, script.rsplit(".", 1)[0])
    )


# The stored published configs are data the hf and architecture rules read: editing one reruns them.
HF_CONFIGS = sorted(
    os.path.relpath(os.path.join(PACKAGE_SRC, "attnid", "hf", "configs", f))
    for f in os.listdir(os.path.join(PACKAGE_SRC, "attnid", "hf", "configs"))
    if f.endswith(".json")
)

# The manuscript: main.tex and every section file it inputs.
PAPER_SOURCES = sorted(
    os.path.relpath(os.path.join(root, f))
    for root, _, files in os.walk(os.path.join(REPO, "paper"))
    for f in files
    if f.endswith(".tex")
)
