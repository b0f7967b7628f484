"""The Snakemake workflow: dry run of `all`, config validation, lint and formatting."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def snakemake(*args, cwd=ROOT):
    return subprocess.run([*SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, check=False)


@pytest.mark.parametrize("preset", ["config/config.yaml", "config/smoke.yaml", "config/paper.yaml", "config/large.yaml", "config/gpu.yaml"])
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
    assert "Error in the config" in text and needle in text


def test_lint_is_clean():
    out = snakemake("--lint")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Lints for" not in out.stdout + out.stderr


@pytest.mark.skipif(shutil.which("snakefmt") is None, reason="snakefmt not installed (pip install -e .[test])")
def test_snakefmt_is_clean():
    out = subprocess.run(
        ["snakefmt", "--check", "Snakefile", "workflow/"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_config_readme_has_every_key_with_its_schema_description():
    from attnid.report.config_doc import load_schema, render, rows

    schema = load_schema()
    readme = (ROOT / "config/README.md").read_text()
    assert readme == render(readme, schema), "config/README.md is stale: run python -m attnid.report.config_doc"
    undocumented = [key for key, _, _, description in rows(schema) if not description]
    assert not undocumented, f"schema keys without a description: {undocumented}"
    for preset in ROOT.glob("config/*.yaml"):  # every key a preset sets is in the table
        keys = {key for key, *_ in rows(schema)}
        assert set(yaml.safe_load(preset.read_text())) <= keys, preset


# a teacher-student task whose 3 heads do not divide d_model 16
BAD_TRAINING_HEADS = (
    "training={tasks: [{task: teacher_student, attention: {d_model: 16}, heads: [3], seq_len: 8,"
    " batch: 4, steps: 2, noise: 0.1, optimizers: [{name: sgd, algorithm: sgd, lr: 0.1}]}]}"
)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--config", "counting={d_model: 16, heads: [1, 2, 3]}"],
            "config counting.heads[2]: 3 heads do not divide d_model 16",
        ),
        (["--config", "device=tpu"], "config device: 'tpu' is not one of ['cpu', 'cuda']"),
        (
            ["--config", BAD_TRAINING_HEADS],
            "config training.tasks[0].heads[0] = 3 with training.tasks[0].attention: d_head_qk",
        ),
    ],
)
def test_a_config_error_is_one_line_naming_the_key(args, line):
    out = snakemake("counting_ratios", "-n", *args)
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert line in text
    assert "Failed validating" not in text and "properties" not in text  # no schema dump


def test_nested_config_values_are_typed_and_merged():
    out = snakemake("counting_ratios", "-n", "--quiet", "rules", "--config", "counting={d_model: 32}")
    assert out.returncode == 0, out.stdout + out.stderr  # heads etc. kept from the preset, '32' read as 32


@pytest.mark.slow
def test_d_builds_into_another_directory(tmp_path):
    """`-d DIR` (or running from elsewhere with -s): every path the rules name resolves from the repository."""
    out = snakemake(
        "table_counting", "--cores", "1", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path),
        f"--configfile={ROOT / 'config/smoke.yaml'}", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "results/smoke/tables/counting.tex").is_file()


@pytest.mark.parametrize("preset", ["config/config.yaml", "config/smoke.yaml", "config/paper.yaml", "config/large.yaml", "config/gpu.yaml"])
def test_presets_write_side_by_side(preset):
    """Each preset has its own results folder, so one preset's build never reschedules another's."""
    results = yaml.safe_load((ROOT / preset).read_text())["results_dir"]
    out = snakemake("-n", "--forceall", "all", f"--configfile={preset}")
    assert out.returncode == 0, out.stderr[-3000:]
    outputs = set(re.findall(r"output: (\S+)", out.stdout + out.stderr))
    assert outputs and all(o.rstrip(",").startswith(results + "/") for o in outputs), [
        o for o in outputs if not o.startswith(results)
    ][:5]


def test_every_rule_that_runs_code_lists_the_code_it_imports():
    """Results follow the code: a rule with `script:` or `notebook:` names script_inputs(...) among
    its inputs (the script and every attnid module it imports), so editing a module reruns it."""
    missing = []
    for smk in sorted((ROOT / "workflow/rules").glob("*.smk")):
        for block in re.split(r"\n(?=\s*rule \w+:)", smk.read_text()):
            name = re.match(r"\s*rule (\w+):", block)
            if name and re.search(r"^\s+(script|notebook):", block, re.MULTILINE) and "script_inputs(" not in block:
                missing.append(f"{smk.name}: {name.group(1)}")
    assert not missing, f"rules without script_inputs(...) among their inputs: {missing}"
