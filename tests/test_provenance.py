"""Provenance record (attnid.provenance), device selection (attnid.device), and rule `provenance`:
rebuilt when code, config or software change, and then without rerunning anything else."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch
from worktree import copy_tree

from attnid import provenance
from attnid.device import DeviceError, resolve_device
from attnid.report.macros import provenance_macros

CONFIG = "config/smoke.yaml"
RESULTS = "results/smoke"  # results_dir of the smoke preset


def git(cwd, *args):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True
    )


# --- attnid.provenance -----------------------------------------------------------------------


def test_find_seeds_walks_nested_config():
    config = {
        "device": "cpu",
        "training": {"seeds": [0, 1], "tasks": [{"task": "a", "data_seed": 3}, {"task": "b"}]},
        "jacobian": {"seed": 7, "points": 2},
    }
    assert provenance.find_seeds(config) == {
        "jacobian.seed": 7,
        "training.seeds": [0, 1],
        "training.tasks[0].data_seed": 3,
    }


def test_config_hash_ignores_key_order_and_sees_values():
    a = {"x": 1, "y": {"p": [1, 2], "q": "s"}}
    b = {"y": {"q": "s", "p": [1, 2]}, "x": 1}
    assert provenance.config_sha256(a) == provenance.config_sha256(b)
    assert provenance.config_sha256(a) != provenance.config_sha256({**a, "x": 2})
    assert re.fullmatch(r"[0-9a-f]{64}", provenance.config_sha256(a))


def test_git_state_commit_dirty_and_changes_to_the_code(tmp_path):
    assert provenance.git_state(tmp_path) == {"commit": None, "dirty": None, "changes_sha256": None}
    git(tmp_path, "init", "-q")
    code = tmp_path / "src" / "f.py"
    code.parent.mkdir()
    code.write_text("one\n")
    git(tmp_path, "add", "src/f.py")
    git(tmp_path, "commit", "-q", "-m", "c")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert provenance.git_state(tmp_path) == {"commit": head, "dirty": False, "changes_sha256": None}
    (tmp_path / "README.md").write_text("not code\n")  # outside CODE_PATHS: still clean
    assert provenance.git_state(tmp_path)["dirty"] is False
    code.write_text("two\n")
    first = provenance.git_state(tmp_path)
    assert first["commit"] == head and first["dirty"] is True
    code.write_text("three\n")
    assert provenance.git_state(tmp_path)["changes_sha256"] != first["changes_sha256"]
    code.write_text("one\n")
    (tmp_path / "src" / "new.py").write_text("untracked\n")  # a new code file counts as a change too
    assert provenance.git_state(tmp_path)["dirty"] is True


def test_code_hash_sees_code_content_not_other_files(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("x = 1\n")
    before = provenance.code_sha256(tmp_path)
    (tmp_path / "README.md").write_text("docs\n")
    assert provenance.code_sha256(tmp_path) == before
    (tmp_path / "src" / "m.py").write_text("x = 2\n")
    assert provenance.code_sha256(tmp_path) != before


def test_fingerprint_is_stable_and_complete(tmp_path, monkeypatch):
    (tmp_path / "c.yaml").write_text("device: cpu\n")
    monkeypatch.chdir(tmp_path)
    config = {"device": "cpu", "training": {"seeds": [0, 1]}}
    fp = provenance.fingerprint(config, tmp_path, ["c.yaml"])
    assert fp == provenance.fingerprint(config, tmp_path, ["c.yaml"])
    assert fp["seeds"] == {"training.seeds": [0, 1]} and fp["device"] == "cpu"
    assert fp["configfiles"] == {"c.yaml": provenance.file_sha256(tmp_path / "c.yaml")}
    assert fp["packages"]["torch"] == torch.__version__
    for name in ("snakemake", "numpy", "pandas", "attnid"):
        assert fp["packages"][name], name
    assert fp["python"] == sys.version.split()[0]
    rec = provenance.record(fp, tmp_path)
    assert rec["platform"]["cpu_count"] == os.cpu_count()
    assert rec["torch"]["cuda_available"] == torch.cuda.is_available()
    assert set(provenance_macros(rec)) == {
        "ProvenanceCommit",
        "ProvenanceConfigHash",
        "ProvenanceTorch",
        "ProvenancePython",
        "ProvenanceDevice",
        "ProvenanceCommand",
    }
    default = dict(rec, configfiles={"config/config.yaml": "a"})
    assert provenance_macros(default)["ProvenanceCommand"] == "snakemake --cores 2 all"  # no preset over the default
    paper = dict(rec, configfiles={"config/config.yaml": "a", "config/paper.yaml": "b"})
    assert provenance_macros(paper)["ProvenanceCommand"] == "snakemake --cores 2 --configfile=config/paper.yaml all"


# --- attnid.device ---------------------------------------------------------------------------


def test_resolve_device_cpu_and_bad_names():
    assert resolve_device("cpu") == torch.device("cpu")
    for bad in ("gpu", "mps", ""):
        with pytest.raises(DeviceError):
            resolve_device(bad)


def test_cuda_without_gpu_fails_with_a_clear_message(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError) as err:
        resolve_device("cuda")
    message = str(err.value)
    assert "torch.cuda.is_available() is False" in message and "device: cpu" in message


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU here")
def test_cuda_resolves_on_a_gpu_machine():
    assert resolve_device("cuda").type == "cuda"
    with pytest.raises(DeviceError):
        resolve_device(f"cuda:{torch.cuda.device_count()}")


# --- rule provenance -------------------------------------------------------------------------


def snakemake(work, *args):
    cmd = [sys.executable, "-m", "snakemake", *args, "--cores", "1", "--configfile", CONFIG]
    out = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout + out.stderr


def planned(work, *targets):
    """Rules that a dry run would execute."""
    text = snakemake(work, *targets, "-n", "--quiet", "rules")
    return set(re.findall(r"^(\w+)\s+\d+$", text, flags=re.MULTILINE)) - {"total"}


@pytest.mark.slow
def test_provenance_follows_the_code_and_ignores_everything_else(tmp_path):
    work = copy_tree(tmp_path / "repo")
    git(work, "init", "-q")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "snapshot")
    targets = (f"{RESULTS}/provenance.json", f"{RESULTS}/counting/ratios.csv")
    snakemake(work, *targets)

    rec = json.loads((work / RESULTS / "provenance.json").read_text())
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=work, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert rec["git"] == {"commit": head, "dirty": False, "changes_sha256": None}
    assert rec["code_sha256"] == provenance.code_sha256(work)
    assert set(rec["configfiles"]) == {"config/config.yaml", CONFIG}
    assert rec["device"] == "cpu" and rec["torch"]["version"] == torch.__version__
    tex = (work / RESULTS / "macros/provenance.tex").read_text()
    assert f"\\newcommand{{\\ProvenanceCommit}}{{{head[:12]}}}" in tex
    assert planned(work, *targets) == set(), "a build that changed nothing rebuilt something"

    # files no result depends on: a README edit (committed), an untracked note, a new test
    (work / "README.md").write_text((work / "README.md").read_text() + "\nedited\n")
    git(work, "commit", "-q", "-am", "README")
    (work / "notes.txt").write_text("a note\n")
    (work / "tests/test_new.py").write_text("# new\n")
    assert planned(work, *targets) == set()

    # the code (uncommitted): provenance is rebuilt, the counting output is not (it does not use the module)
    module = work / "src/attnid/provenance.py"
    module.write_text(module.read_text() + "\n# edited\n")
    assert planned(work, *targets) == {"provenance"}
    snakemake(work, *targets)
    assert json.loads((work / RESULTS / "provenance.json").read_text())["git"]["dirty"] is True
    assert "-dirty" in (work / RESULTS / "macros/provenance.tex").read_text()

    # a config file edit (here only a comment: the effective config is unchanged) changes the
    # file's hash: provenance again, and only it
    config = work / CONFIG
    config.write_text(config.read_text() + "# edited\n")
    assert planned(work, *targets) == {"provenance"}


def test_the_rerun_reason_is_one_short_line(tmp_path):
    fp = provenance.fingerprint({"device": "cpu"}, tmp_path)
    assert re.fullmatch(r"[0-9a-f]{16}", provenance.fingerprint_sha256(fp))
