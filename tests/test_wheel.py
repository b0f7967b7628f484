"""The package as a wheel: built from a clean copy of the tree, installed (not editable) into a fresh venv
with nothing else in it, and `attnid count --model llama3_8b --whole-model` answers from the installed
files alone (the stored configs are package data; counting needs only the standard library)."""

import json
import subprocess
import sys

from worktree import copy_tree


def run(*args, **kwargs):
    out = subprocess.run(list(map(str, args)), capture_output=True, text=True, check=False, **kwargs)
    assert out.returncode == 0, (args, out.stdout[-2000:], out.stderr[-3000:])
    return out


def test_wheel_installs_into_a_fresh_venv_and_counts(tmp_path):
    tree = copy_tree(tmp_path / "tree")
    wheels = tmp_path / "wheels"
    # no build isolation: the build backend (setuptools) comes from this environment, nothing is downloaded
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", wheels, tree)
    (wheel,) = wheels.glob("attnid-*.whl")
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel)
    # the installed copy, not the source tree: run from elsewhere, with nothing on the path
    out = run(venv / "bin" / "attnid", "count", "--model", "llama3_8b", "--whole-model", "--json", cwd=tmp_path)
    result = json.loads(out.stdout)
    assert result["whole_model"]["total"] == 8_030_261_248  # LLaMA-3-8B's published parameter count
    assert result["attention_layers"]["n_layers"] == 32 and result["whole_model"]["unidentified"] > 0
    where = run(python, "-c", "import attnid; print(attnid.__file__)", cwd=tmp_path).stdout
    assert str(venv) in where and str(tree) not in where
    configs = run(python, "-c", "from attnid.hf import STORED; print(len(STORED))", cwd=tmp_path).stdout
    assert int(configs) >= 20
