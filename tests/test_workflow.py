"""The Snakemake workflow: dry run of `all`, config validation, lint and formatting."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args, cwd=ROOT):
    return subprocess.run([*SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.parametrize("preset", ["config/config.yaml", "config/smoke.yaml", "config/paper.yaml"])
def test_dry_run_all(preset):
    out = snakemake("-n", "--forceall", "all", "--configfile", preset, "--quiet", "rules")
    assert out.returncode == 0, out.stdout + out.stderr
    for rule in ["counting_ratios", "table_counting", "table_architectures"]:
        assert rule in out.stdout + out.stderr


def _config_with(tmp_path, edit):
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    edit(config)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda c: c["counting"].update(bogus_key=1), "bogus_key"),
        (lambda c: c.update(unknown_section={}), "unknown_section"),
        (lambda c: c["counting"].update(d_model="sixteen"), "sixteen"),
        (lambda c: c["counting"].update(rope=["quarter"]), "quarter"),
        (lambda c: c.update(device="tpu"), "tpu"),
    ],
)
def test_bad_config_stops_with_the_key(tmp_path, edit, needle):
    bad = _config_with(tmp_path, edit)
    out = snakemake("-n", "all", "--configfile", str(bad))
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "Error validating config file" in text and needle in text


def test_lint_is_clean():
    out = snakemake("--lint")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Lints for" not in out.stdout + out.stderr


@pytest.mark.skipif(shutil.which("snakefmt") is None, reason="snakefmt not installed (pip install -e .[test])")
def test_snakefmt_is_clean():
    out = subprocess.run(["snakefmt", "--check", "Snakefile", "workflow/"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
