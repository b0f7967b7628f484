"""The README's commands, run as a reader types them: each shell command runs from a fresh shell (no
activated environment), and every `attnid` command shown does what its comment says."""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# the first word of a command that runs from a fresh shell in the repository root
RUNNERS = ("./setup", ".venv/bin/", "make", "sudo tests/slurm/run.sh")
STORED_CONFIG = ROOT / "src" / "attnid" / "hf" / "configs" / "llama3_8b.json"


def blocks(lang: str) -> list[list[str]]:
    """The lines of every fenced block opened by ```lang (lang "": a bare fence)."""
    out, current, opened = [], None, None
    for line in README.splitlines():
        if line.startswith("```"):
            if current is None:
                current, opened = [], line[3:].strip()
            else:
                if opened == lang:
                    out.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return out


def commands() -> list[tuple[str, str]]:
    """(command, comment) of every line of every bash block."""
    out = []
    for block in blocks("bash"):
        for line in block:
            command, _, comment = line.partition("#")
            if command.strip():
                out.append((command.strip(), comment.strip()))
    return out


def attnid_commands() -> list[tuple[str, str]]:
    return [(c, comment) for c, comment in commands() if c.startswith(".venv/bin/attnid")]


def test_every_shell_command_runs_from_a_fresh_shell():
    """No bare `snakemake`, `python`, `attnid` or `pip`: a fresh shell has none of them on its PATH."""
    bare = [c for c, _ in commands() if not c.startswith(RUNNERS)]
    assert not bare, bare
    inline = re.findall(r"`((?:snakemake|python|pytest|pip) [^`]*)`", README)
    assert not inline, inline


def test_the_readme_shows_the_attnid_commands():
    assert len(attnid_commands()) >= 8


@pytest.mark.slow
@pytest.mark.parametrize("command, comment", attnid_commands(), ids=[c for c, _ in attnid_commands()])
def test_every_attnid_command_does_what_its_comment_says(command, comment):
    argv = shlex.split(command.replace("path/to/config.json", str(STORED_CONFIG)))[1:]
    code = f"import sys; from attnid.cli import main; sys.exit(main({argv!r}))"
    if "no torch" in comment:  # the comment promises the command never imports torch
        code = "import sys; sys.modules['torch'] = None; " + code
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT)
    if comment.startswith("refused"):
        assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
        said = re.search(r"T_min = \d+", comment)
        assert said is None or said.group(0) in out.stderr, (comment, out.stderr)
        return
    assert out.returncode == 0, out.stderr
    if "--json" in argv:
        json.loads(out.stdout)
    if argv[0] == "check":
        assert out.stdout.strip().splitlines()[-1] == "verdict: agree", out.stdout
    if "--whole-model" in argv:
        assert "whole_model" in out.stdout or "every parameter" in out.stdout or "total" in out.stdout, out.stdout


def test_the_coverage_output_shown_is_the_output():
    """The README's `attnid coverage` excerpt: each line shown is a line of the real output, the totals too."""
    block = next(b for b in blocks("") if b and b[0] == "$ .venv/bin/attnid coverage")
    out = subprocess.run([sys.executable, "-m", "attnid", "coverage"], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    for shown in block[1:]:
        if shown != "...":
            assert shown in lines, shown
    assert block[-1] == lines[-1]


def layout_entries() -> list[tuple[Path, str]]:
    """(folder, name) of every entry of the README's layout tree: a name's folder is the last folder named two
    columns to its left (the repository at column 0); a description's continuation lines are skipped."""
    block = README.split("## Layout", 1)[1].split("```")[1]
    folders, out = {}, []
    for line in block.splitlines()[1:]:
        indent = len(line) - len(line.lstrip())
        if not line.strip() or indent >= 20:
            continue
        base = ROOT if indent == 0 else folders[indent - 2]
        for name in re.split(r"\s{2,}", line.strip())[0].split(", "):
            out.append((base, name))
            if name.endswith("/"):
                folders[indent] = base / name
    return out


def _exists(base: Path, name: str) -> bool:
    if "*" in name:
        return any(base.glob(name))
    return (base / name).exists() or (base / f"{name}.py").exists()


def test_the_layout_tree_is_the_tree():
    """Every entry of the README's layout exists, and every module and package of src/attnid and of
    src/attnid/model is in it: a rename or a new module leaves the front door wrong otherwise."""
    entries = layout_entries()
    assert [f"{b.relative_to(ROOT)}/{n}" for b, n in entries if not _exists(b, n)] == []
    for folder in (ROOT / "src" / "attnid", ROOT / "src" / "attnid" / "model"):
        named = {n.rstrip("/").removesuffix(".py") for b, n in entries if b == folder}
        real = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if (p / "__init__.py").exists()}
        assert sorted(real - named - {"__init__", "__main__"}) == [], f"{folder.relative_to(ROOT)}: not in the README"
