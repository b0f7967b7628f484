"""End to end: the whole DAG on the smoke preset in a temporary copy of the repository.

Checks that every target of `all` is built, that a second run has nothing to do, and that
touching one figure script reruns only that figure (and what depends on it).
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def tracked_files():
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if (ROOT / line).is_file()]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    work = tmp_path_factory.mktemp("repo")
    for rel in tracked_files():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, work / rel)
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", "all", "--configfile", "config/smoke.yaml"]
    out = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-6000:]
    return work


def snakemake_dry(work, *targets):
    cmd = [sys.executable, "-m", "snakemake", "-n", "--configfile", "config/smoke.yaml", "--quiet", "rules", *targets]
    out = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def test_every_artifact_exists(built):
    results = built / "results"
    for rel in [
        "counting/ratios.csv",
        "counting/architectures.csv",
        "tables/counting.tex",
        "tables/architectures.tex",
        "tables/macros.tex",
        "jacobian/verification.csv",
        "figures/ratio.pdf",
        "figures/jacobian_spectrum.pdf",
        "paper/main.pdf",
        "provenance.json",
    ]:
        path = results / rel
        assert path.is_file() and path.stat().st_size > 0, rel
    assert list((results / "notebooks").glob("*.ipynb")), "no executed notebooks"
    assert list((results / "figures").glob("*.png")), "no PNG figures"


def test_verification_grid_agrees(built):
    df = pd.read_csv(built / "results/jacobian/verification.csv")
    assert len(df) > 0 and df.passed.all()
    assert (df.predicted == df.measured).all()


def test_second_run_has_nothing_to_do(built):
    assert "Nothing to be done" in snakemake_dry(built, "all")


def test_touching_a_figure_script_reruns_only_that_figure(built):
    script = built / "workflow/scripts/fig_architectures.py"
    script.write_text(script.read_text() + "\n# touched\n")
    plan = snakemake_dry(built, "all")
    assert "fig_architectures" in plan
    for upstream in ["counting_ratios", "counting_architectures", "jacobian", "train_run"]:
        assert f"{upstream} " not in plan and f"{upstream}\n" not in plan, plan
