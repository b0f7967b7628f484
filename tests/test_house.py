"""The package's house rules, from its sources: no module of 400 lines or more, no function of 80 lines or more.

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
