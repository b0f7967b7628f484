"""End to end: the whole DAG on the smoke preset in a temporary copy of the repository.

Checks that every target of `all` is built, that a second run has nothing to do, that results
follow the code (touching a figure script or a library module reruns exactly the rules that use
it, and what reads their outputs), that files no result depends on rerun nothing, and that a
forced figure rerun writes the same bytes, so the paper stays as it is.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = "results/smoke"  # results_dir of config/smoke.yaml
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(smoke_build):
    return smoke_build


def snakemake_dry(work, *targets):
    cmd = [sys.executable, "-m", "snakemake", "-n", "--configfile", "config/smoke.yaml", "--quiet", "rules", *targets]
    out = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def test_every_artifact_exists(built):
    results = built / RESULTS
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
    df = pd.read_csv(built / RESULTS / "jacobian/verification.csv")
    assert len(df) > 0 and df.passed.all()
    assert (df.predicted == df.measured).all()


def test_second_run_has_nothing_to_do(built):
    assert "Nothing to be done" in snakemake_dry(built, "all")


def planned_rules(plan: str) -> set[str]:
    """Rule names from the job-stats table of a dry run ('rule  count' lines)."""
    rules = set()
    for line in plan.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit() and parts[0] not in ("total", "job"):
            rules.add(parts[0])
    return rules


def test_touching_a_figure_script_reruns_only_that_figure(built):
    script = built / "workflow/scripts/fig_architectures.py"
    original, stat = script.read_text(), script.stat()
    script.write_text(original + "\n# touched\n")
    try:
        plan = planned_rules(snakemake_dry(built, "all"))
    finally:  # content and time as they were: Snakemake reruns a script rule whose script is newer
        script.write_text(original)
        os.utime(script, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert "fig_architectures" in plan
    # only the figure and what reads it (its notebook, the paper) may rerun
    # (provenance records a hash of the uncommitted changes, so its record and the macros the paper cites follow)
    assert plan <= {"fig_architectures", "nb_counting", "nb_publish", "paper", "all", "provenance", "macros"}, plan
    assert not plan & {"counting_ratios", "jacobian_verification", "train_run", "training_aggregate", "fig_ratio"}


def planned_with_reasons(work, *targets) -> dict[str, str]:
    """rule -> the reason Snakemake gives for running it, from a dry run."""
    cmd = [sys.executable, "-m", "snakemake", "-n", "--configfile=config/smoke.yaml", *targets]
    out = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    plan, rule = {}, None
    for line in (out.stdout + out.stderr).splitlines():
        if line.startswith(("rule ", "localrule ")):
            rule = line.split()[1].rstrip(":")
        elif rule and line.strip().startswith("reason:"):
            plan.setdefault(rule, line.strip())
    return plan


@pytest.fixture
def scratch(built, tmp_path):
    """A copy of the built tree (results and Snakemake's metadata included) that a test may edit."""
    return shutil.copytree(built, tmp_path / "work", symlinks=True)


FIGURE_RULES = {"fig_ratio", "fig_architectures", "fig_overlap", "fig_loss", "fig_conserved"}
COMPUTE_RULES = {"counting_ratios", "counting_architectures", "jacobian_verification", "training_aggregate"}


def test_editing_the_figure_style_reruns_the_figures_and_only_what_reads_them(scratch):
    module = scratch / "src/attnid/report/style.py"
    module.write_text(module.read_text() + "\n# edited\n")
    plan = planned_with_reasons(scratch, "all")
    direct = {rule for rule, reason in plan.items() if "src/attnid/report/style.py" in reason}
    assert FIGURE_RULES <= direct, plan
    assert not set(plan) & COMPUTE_RULES, plan
    for rule, reason in plan.items():  # everything else reruns only because an input was rebuilt
        assert rule in direct or rule == "provenance" or "updated by another job" in reason.lower(), (rule, reason)


def test_editing_the_closed_forms_reruns_exactly_the_rules_that_import_them(scratch):
    module = scratch / "src/attnid/layer/symbolic.py"
    module.write_text(module.read_text() + "\n# edited\n")
    plan = planned_with_reasons(scratch, "all")
    direct = {rule for rule, reason in plan.items() if "src/attnid/layer/symbolic.py" in reason}
    assert direct == {"counting_closed_forms", "macros_counting"}, plan
    assert not {r for r in plan if r.startswith(("train", "jacobian", "symmetry", "fig_"))}, plan


def test_files_no_result_depends_on_rerun_nothing(scratch):
    (scratch / "README.md").write_text((scratch / "README.md").read_text() + "\nedited\n")
    (scratch / "notes.txt").write_text("an untracked note\n")
    (scratch / "tests" / "test_extra.py").write_text("# a new test\n")
    assert planned_with_reasons(scratch, "all") == {}


def test_a_forced_figure_rerun_writes_the_same_bytes_and_leaves_the_paper(scratch):
    figure = scratch / RESULTS / "figures/ratio.pdf"
    before = figure.read_bytes(), (scratch / RESULTS / "figures/ratio.png").read_bytes()
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--configfile=config/smoke.yaml", "-f", "fig_ratio"]
    out = subprocess.run(cmd, cwd=scratch, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (figure.read_bytes(), (scratch / RESULTS / "figures/ratio.png").read_bytes()) == before
    assert not set(planned_with_reasons(scratch, "paper")), "an unchanged figure rebuilt the paper"


def test_the_report_holds_tables_checks_notebooks_and_the_paper(built, tmp_path):
    """`snakemake --report`: figures with captions, the result tables, the checks, the executed
    notebooks (HTML) and the paper PDF, in one self-contained file."""
    report = tmp_path / "report.zip"
    cmd = [sys.executable, "-m", "snakemake", "--configfile=config/smoke.yaml", "--report", str(report)]
    out = subprocess.run(cmd, cwd=built, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    import zipfile

    names = zipfile.ZipFile(report).namelist()
    for part in ("/counting.csv", "/checks.csv", "/verification.csv", "/01_counting.html", "/main.pdf"):
        assert any(n.endswith(part) for n in names), (part, names)


def test_a_truncated_intermediate_is_named_with_the_rule_that_rebuilds_it(scratch):
    ratios = scratch / RESULTS / "counting/ratios.csv"
    ratios.write_text(ratios.read_text()[:200])  # cut mid-row
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--configfile=config/smoke.yaml", "-f", "fig_ratio"]
    out = subprocess.run(cmd, cwd=scratch, capture_output=True, text=True, check=False)
    assert out.returncode != 0
    line = f"{RESULTS}/counting/ratios.csv is truncated or corrupt"
    console = [ln for ln in (out.stdout + out.stderr).splitlines() if line in ln]
    assert console, "the console does not name the file"
    assert (
        "(rule counting_ratios)" in console[0] and f"snakemake --cores 1 -f {RESULTS}/counting/ratios.csv" in console[0]
    )
