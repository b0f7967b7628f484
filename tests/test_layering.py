"""The package's layers, from its sources: every import goes down (or sideways), no import cycle, and every
torch-free module imports and works with torch made unimportable.

The import graph is read from the sources (every `import` and `from ... import`, also those inside a
function, which is where a cycle hides), so a module moved to a lower layer that reaches up, or a cycle
broken only at run time, fails here. Every module of `attnid` must sit in exactly one layer and every
pattern of LAYERS must match a module, so a rename or a new module that nobody placed fails too.
"""

import ast
import fnmatch
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

# Lowest first. A module may import from its own layer and the layers before it, never from a later one.
LAYERS = (
    ("foundation", True, ["attnid.errors", "attnid.io", "attnid.layer", "attnid.layer.spec_gates", "attnid.layer.spec_latent", "attnid.layer.spec_words", "attnid.layer.spec_variants", "attnid.layer.spec",
                          "attnid.layer.counting_gates", "attnid.layer.counting_variants", "attnid.layer.counting", "attnid.layer.symbolic"]),
    ("model vocabulary and counts", True, ["attnid.model", "attnid.model.blocks", "attnid.model.spec",
                                           "attnid.model.counting", "attnid.model.counting.*"]),
    ("configs and run lists", True, ["attnid.hf", "attnid.hf.mapping", "attnid.hf.mapping.*", "attnid.hf.config_tables", "attnid.hf.refusals",
                                     "attnid.training.runs", "attnid.workflow_config"]),
    ("tensors", False, ["attnid.flat", "attnid.float64", "attnid.softmax", "attnid.device", "attnid.layer.layout", "attnid.layer.variants", "attnid.layer.differential",
                        "attnid.layer.forward", "attnid.symmetry", "attnid.symmetry.*", "attnid.jacobian",
                        "attnid.jacobian.*", "attnid.model.layout", "attnid.model.forward", "attnid.model.judge",
                        "attnid.model.real", "attnid.model.grid", "attnid.hf.modules", "attnid.hf.verify", "attnid.hf.check",
                        "attnid.hf.tiny", "attnid.hf.coverage", "attnid.training", "attnid.training.*", "attnid.gauge",
                        "attnid.gauge.*"]),
    ("report", True, ["attnid.report", "attnid.report.*"]),
    ("entry points", False, ["attnid", "attnid.__main__", "attnid.cli", "attnid.cli_flags", "attnid.provenance"]),
)  # fmt: skip


def source_modules() -> dict[str, Path]:
    """Every module of the package under src/, by dotted name (a package by its __init__.py)."""
    out = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = source_modules()


def layer_of(module: str) -> int:
    """The index of the most specific LAYERS pattern matching `module` (an exact name beats a wildcard)."""
    exact = [i for i, (_, _, patterns) in enumerate(LAYERS) if module in patterns]
    if exact:
        return exact[0]
    matches = [i for i, (_, _, patterns) in enumerate(LAYERS) if any(fnmatch.fnmatch(module, p) for p in patterns)]
    assert len(matches) == 1, f"{module} is in {len(matches)} layers: place it in exactly one of LAYERS"
    return matches[0]


def imports_of(module: str) -> set[str]:
    """The package modules `module` imports (anywhere in its source), and 'torch' when it imports torch."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "torch":
                found.add("torch")
            while name not in MODULES and "." in name:
                name = name.rpartition(".")[0]
            if name in MODULES and name != module:
                found.add(name)
    return found


GRAPH = {m: imports_of(m) for m in MODULES}


def test_every_module_has_a_layer_and_every_pattern_a_module():
    for module in MODULES:
        layer_of(module)
    for name, _, patterns in LAYERS:
        for pattern in patterns:
            assert any(fnmatch.fnmatch(m, pattern) for m in MODULES), f"layer {name!r}: no module matches {pattern!r}"


def test_imports_never_go_up_a_layer():
    upward = [
        f"{m} ({LAYERS[layer_of(m)][0]}) imports {d} ({LAYERS[layer_of(d)][0]})"
        for m, deps in GRAPH.items()
        for d in deps
        if d != "torch" and layer_of(d) > layer_of(m)
    ]
    assert not upward, "\n".join(upward)


# The levels of the tree, lowest first: one attention layer (`attnid.layer`: spec, count, layout, function), a
# whole model (`attnid.model`), real `transformers` configs and classes (`attnid.hf`), the group acting on a whole
# model (`attnid.gauge`), training (`attnid.training`), the report. A level imports none of the levels after it,
# anywhere (also inside a function): a rule's count and its check are read without the config mapping, the
# generators, the trainer or the report.
LEVELS = ("attnid.layer", "attnid.model", "attnid.hf", "attnid.gauge", "attnid.training", "attnid.report")


def in_level(module: str, level: str) -> bool:
    return module == level or module.startswith(level + ".")


@pytest.mark.parametrize("level", LEVELS[:-1])
def test_each_level_imports_nothing_above_it(level):
    members = [m for m in MODULES if in_level(m, level)]
    assert members, f"no {level} module found"
    above = LEVELS[LEVELS.index(level) + 1 :]
    upward = [f"{m} imports {d}" for m in members for d in sorted(GRAPH[m]) if any(in_level(d, top) for top in above)]
    assert not upward, "\n".join(upward)


def test_no_import_cycle():
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(GRAPH[m] - {"torch"}):
            if state.get(d) == "open":
                cycles.append(" -> ".join(stack[stack.index(d) :] + [d]))
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = "done"

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)
    assert not cycles, "\n".join(cycles)


def test_the_graph_sees_imports_inside_functions():
    """The harness itself: a function-level import is an edge (attnid.layer.spec_variants once hid a cycle there)."""
    assert "attnid.jacobian" in GRAPH["attnid"]  # `verify` imports it on first use
    assert "torch" in GRAPH["attnid.provenance"]  # only inside a function


TORCH_FREE = sorted(m for m in MODULES if LAYERS[layer_of(m)][1])

BLOCK_TORCH = """
import sys

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"torch is blocked in this interpreter ({name})")
        return None

sys.meta_path.insert(0, NoTorch())
"""

# What each torch-free part computes without torch (beyond importing).
WORKS = {
    "attnid": """
        import attnid
        assert attnid.count(attnid.AttentionSpec(16, 4)).unidentified == 4 * (16 + 16)  # GL(4) twice per head
        assert attnid.__version__
    """,
    "attnid.layer.spec": """
        from attnid.layer.spec import AttentionSpec
        spec = AttentionSpec(12, 4, 2, rope_dims="full", biases="qkvo", causal=True)
        assert AttentionSpec.from_row(spec.to_row()) == spec and spec.n_params > 0
    """,
    "attnid.layer.counting": """
        from attnid.layer.counting import count, min_seq_len, ratio_grid
        from attnid.layer.spec import AttentionSpec
        assert count(AttentionSpec(4096, 32, rope_dims=128)).unidentified == 32 * (128 + 128**2)
        assert min_seq_len(AttentionSpec(8, 1, rope_dims=8, causal=True)) == 3
        assert len(ratio_grid(16, [1, 2, 4], [1, 2], ["none", "full"], ["none", "qkvo"])) > 0
    """,
    "attnid.layer.symbolic": """
        from attnid.layer.symbolic import check_against_counts, latex_table
        assert check_against_counts() == [] and "tabular" in latex_table()
    """,
    "attnid.model.counting": """
        from attnid.hf import model_spec, stored_config
        from attnid.model import count_attention_layers, count_model
        spec = model_spec(stored_config("llama3_8b"))
        assert count_model(spec).unidentified > count_attention_layers(spec).unidentified > 0
    """,
    "attnid.hf.config_tables": """
        from attnid.hf.config_tables import architecture_table, shipped_table
        assert (architecture_table().unidentified > 0).all()
        assert (shipped_table(["gpt2", "deepseek_v3"])["status"] == "ok").all()
    """,
    "attnid.cli": """
        from attnid.cli import main
        assert main(["count", "--d-model", "8", "--heads", "2", "--rope", "full", "--json"]) == 0
        assert main(["count", "--model", "llama3_8b", "--whole-model"]) == 0
    """,
    "attnid.training.runs": f"""
        import yaml
        from attnid.training.runs import jobs
        config = yaml.safe_load(open({str(ROOT / "config" / "config.yaml")!r}))
        assert len(jobs(config["training"])) > 0
    """,
    "attnid.report.latex": """
        from attnid.report.latex import macro_name, number
        assert macro_name("Unidentified", "LLaMA-2-70B") == "UnidentifiedLLaMATwoSevenZeroB"
        assert number(1234) == "1{,}234"
    """,
}


def run_blocked(code: str):
    code = BLOCK_TORCH + textwrap.dedent(code) + "\nassert 'torch' not in sys.modules\n"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)


def test_every_torch_free_module_imports_without_torch():
    assert not [m for m in TORCH_FREE if "torch" in GRAPH[m]], "a torch-free module imports torch"
    out = run_blocked("\n".join(f"import {m}" for m in TORCH_FREE))
    assert out.returncode == 0, f"a torch-free module needs torch:\n{out.stderr[-3000:]}"


@pytest.mark.parametrize("module", list(WORKS))
def test_torch_free_parts_work_without_torch(module):
    assert module in MODULES, f"{module} no longer exists: update WORKS"
    assert module == "attnid" or module in TORCH_FREE or module == "attnid.cli", module
    out = run_blocked(WORKS[module])
    assert out.returncode == 0, f"{module} needs torch or fails without it:\n{out.stderr[-3000:]}"


def test_the_blocker_blocks():
    """The harness itself: importing torch under it fails."""
    out = subprocess.run(
        [sys.executable, "-c", BLOCK_TORCH + "import torch"], capture_output=True, text=True, check=False
    )
    assert out.returncode != 0 and "torch is blocked" in out.stderr
