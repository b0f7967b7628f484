"""The package's house rules, from its sources: no module of 400 lines or more, no function of 80 lines or more;
each whole-model rule's count and generators under one name.

A long module holds more than one idea and a long function more than one step; split by idea, not by size.
"""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "attnid"
MAX_MODULE_LINES = 400  # a module has fewer lines than this
MAX_FUNCTION_LINES = 80  # a function (or method) has fewer lines than this, decorators and docstring included


def sizes() -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(module, lines) of every module under src/attnid and (module:line function, lines) of every function."""
    modules, functions = [], []
    for path in sorted(SRC.rglob("*.py")):
        source = path.read_text()
        name = str(path.relative_to(SRC.parent))
        modules.append((name, len(source.splitlines())))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                functions.append((f"{name}:{node.lineno} {node.name}", node.end_lineno - start + 1))
    return modules, functions


def test_no_module_of_400_lines_or_more():
    modules, _ = sizes()
    assert modules, "no module found under src/attnid"
    long = [f"{name}: {n} lines" for name, n in modules if n >= MAX_MODULE_LINES]
    assert not long, f"modules of {MAX_MODULE_LINES} lines or more (split them by idea):\n" + "\n".join(long)


def test_no_function_of_80_lines_or_more():
    _, functions = sizes()
    assert functions, "no function found under src/attnid"
    long = [f"{name}: {n} lines" for name, n in functions if n >= MAX_FUNCTION_LINES]
    assert not long, f"functions of {MAX_FUNCTION_LINES} lines or more (split them by step):\n" + "\n".join(long)


COUNTS, GENERATORS = SRC / "model" / "counting", SRC / "gauge" / "sources"
NOT_A_RULE = {"__init__", "limits"}  # limits refuses ranges; it counts nothing
PARTS = {"first_table": "token_points", "latent": "attention", "rotations": "residual", "writers": None}


def test_each_whole_model_rule_has_its_count_and_generators_under_one_name():
    """model/counting/<rule>.py counts a rule, gauge/sources/<rule>.py writes its generators: a reader finds the
    certificate's two sides by name. A generator module that is not a rule is a named part of one (or a helper
    of several, PARTS), and its docstring says whose."""
    counts = {p.stem for p in COUNTS.glob("*.py")} - NOT_A_RULE
    sources = {p.stem for p in GENERATORS.glob("*.py")} - {"__init__"}
    assert counts - sources == set(), "a counting rule without its generators' module of the same name"
    assert sources - counts == set(PARTS), "a generators module that is neither a rule nor a named part"
    for part, rule in PARTS.items():
        doc = ast.get_docstring(ast.parse((GENERATORS / f"{part}.py").read_text())) or ""
        assert rule is None or f".{rule}" in doc, f"gauge/sources/{part}.py does not say it is part of .{rule}"
    for rule in counts:
        doc = ast.get_docstring(ast.parse((GENERATORS / f"{rule}.py").read_text())) or ""
        assert f"attnid.model.counting.{rule}" in doc, f"gauge/sources/{rule}.py does not name its count"


# Packages whose modules may share a name: a whole-model rule's count and its generators (model.counting,
# gauge.sources: the pairing above), and a module and its whole-model form (layer -> model, the group on one layer
# -> on a whole model), whose docstring names the other.
SHARED_NAMES = {("model.counting", "gauge.sources"), ("layer", "model"), ("symmetry", "gauge")}


def test_two_modules_share_a_name_only_as_a_rule_and_its_generators_or_a_module_and_its_whole_model_form():
    by_name: dict[str, list[str]] = {}
    for path in SRC.rglob("*.py"):
        if path.name != "__init__.py":
            by_name.setdefault(path.stem, []).append(".".join(path.relative_to(SRC).parts[:-1]))
    wrong = []
    for name, packages in sorted(by_name.items()):
        for i, a in enumerate(packages):
            for b in packages[i + 1 :]:
                pair = next((p for p in SHARED_NAMES if {a, b} == set(p)), None)
                if pair is None:
                    wrong.append(f"{a}.{name} and {b}.{name}: rename one (no rule pairs these packages)")
                elif pair[0] != "model.counting":
                    lower, upper = pair
                    doc = ast.get_docstring(ast.parse((SRC / upper.replace(".", "/") / f"{name}.py").read_text())) or ""
                    if f"attnid.{lower}.{name}" not in doc:
                        wrong.append(f"attnid.{upper}.{name}: its docstring does not name attnid.{lower}.{name}")
    assert not wrong, "\n".join(wrong)
