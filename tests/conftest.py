"""Shared fixtures: one build of the whole DAG on the smoke preset, reused by the end-to-end and paper tests."""

import shutil
import subprocess
import sys

import pytest
from worktree import copy_tree

TEX_MISSING = "latexmk or pdftotext missing: apt-get install latexmk texlive-latex-recommended poppler-utils"


@pytest.fixture(scope="session")
def smoke_build(tmp_path_factory):
    """A temporary copy of the repository (as git sees it) after `snakemake --cores 2 all` on config/smoke.yaml."""
    if shutil.which("latexmk") is None or shutil.which("pdftotext") is None:
        pytest.skip(TEX_MISSING)
    work = copy_tree(tmp_path_factory.mktemp("smoke"))
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "all", "--configfile", "config/smoke.yaml"]
    out = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)  # the assert names the failure
    assert out.returncode == 0, out.stderr[-6000:]
    return work
