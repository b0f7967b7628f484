"""The `attnid` command line: counts as JSON or `key: value` lines, one-line errors naming the flag, --version."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import attnid


def run(*args, console=False):
    """`python -m attnid ARGS`, or the installed `attnid` console script when console=True."""
    if console:
        script = shutil.which("attnid") or str(Path(sys.executable).with_name("attnid"))
        if not Path(script).exists():
            pytest.skip("the attnid console script is not installed")
        command = [script, *args]
    else:
        command = [sys.executable, "-m", "attnid", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def one_line_error(out, flag):
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], out.stderr
    assert "Traceback" not in out.stderr
    return lines[0]


def test_count_json():
    out = run(
        "count", "--d-model", "4096", "--heads", "32", "--kv-heads", "8", "--rope", "full", "--bias", "none", "--json"
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert {"total", "unidentified", "identified", "ratio", "breakdown", "conditions", "spec"} <= set(result)
    assert result["identified"] + result["unidentified"] == result["total"]
    assert set(result["breakdown"]) >= {"query_key", "value_output", "key_bias", "value_bias"}
    assert result["breakdown"]["query_key"] == 8 * 128  # one C* per rotated plane per KV group
    assert attnid.AttentionSpec.from_config(result["spec"]).label == result["label"]


def test_count_key_value_lines():
    """Text output: every line is `key: value` (or a `key:` heading / `- item` under one), never run together."""
    out = run("count", "--d-model", "8", "--heads", "2", "--bias", "qkvo", "--causal", "--rope", "half")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    expected = attnid.count(attnid.AttentionSpec(8, 2, biases="qkvo", causal=True, rope_dims="half"))
    assert f"unidentified: {expected.unidentified}" in lines and f"total: {expected.total}" in lines
    for line in lines:
        text = line.strip()
        assert text.startswith("- ") or ": " in text or text.endswith(":"), line


def test_version():
    for console in (False, True):
        out = run("--version", console=console)
        assert out.returncode == 0 and out.stdout.strip() == f"attnid {attnid.__version__}"


def test_usage_names_the_program():
    assert run("count", console=True).stderr.startswith("attnid count: error:")
    assert run("count").stderr.startswith("python -m attnid count: error:")
    assert "usage: attnid" in run("--help", console=True).stdout


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--d-model", "8", "--heads", "2", "--rope", "3"], "--rope"),
        (["--d-model", "8", "--heads", "2", "--rope", "quarter"], "--rope"),
        (["--d-model", "8", "--heads", "4", "--kv-heads", "3"], "--kv-heads"),
        (["--d-model", "0", "--heads", "2"], "--d-model"),
        (["--d-model", "eight", "--heads", "2"], "--d-model"),
        (["--d-model", "8", "--heads", "2", "--d-head", "-1"], "--d-head"),
        (["--d-model", "8", "--heads", "2", "--rope", "6"], "--rope"),
        (["--d-model", "8", "--heads", "2", "--bias", "qz"], "--bias"),
        (["--d-model", "8", "--heads", "3"], "--d-head"),
        (["--d-model", "8", "--heads", "2", "--rope-base", "1"], "--rope-base"),
        (["--d-model", "8", "--heads", "2", "--seq-len", "0"], "--seq-len"),
        (["--d-model", "8", "--heads", "2", "--unknown", "1"], "--unknown"),
        (["--heads", "2"], "--d-model"),
    ],
)
def test_bad_flags(args, flag):
    one_line_error(run("count", *args), flag)


def test_seq_len_boundary():
    """Four rotary planes, d_k = d, causal: T_min = 3; T = 2 is refused naming --seq-len."""
    spec = ["--d-model", "8", "--heads", "1", "--rope", "full", "--causal"]
    line = one_line_error(run("count", *spec, "--seq-len", "2"), "--seq-len")
    assert "T_min = 3" in line
    out = run("count", *spec, "--seq-len", "3", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["unidentified"] == attnid.count(attnid.AttentionSpec(8, 1, rope_dims=8)).unidentified


def test_repeated_frequency_refused():
    line = one_line_error(
        run("count", "--d-model", "8", "--heads", "2", "--rope", "4", "--rope-base", "1.0000000000001"), "--rope-base"
    )
    assert "same frequency" in line


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--oversample", "0.1"], "--oversample"),
        (["--oversample", "-1"], "--oversample"),
        (["--threads", "-3"], "--threads"),
        (["--device", "tpu"], "--device"),
        (["--max-memory-gb", "0"], "--max-memory-gb"),
        (["--heads", "1", "--seq-len", "2", "--causal", "--rope", "full"], "--seq-len"),
    ],
)
def test_verify_bad_options(args, flag):
    pytest.importorskip("torch")
    one_line_error(run("verify", "--d-model", "8", "--heads", "2", *args), flag)


def test_verify_refuses_a_spec_too_large():
    pytest.importorskip("torch")
    line = one_line_error(run("verify", "--d-model", "4096", "--heads", "32"), "--max-memory-gb")
    assert "GiB" in line


def test_verify_small_spec():
    pytest.importorskip("torch")
    out = run("verify", "--d-model", "4", "--heads", "2", "--bias", "qkvo", "--json")
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)
    assert row["measured"] == row["predicted"] == attnid.count(attnid.AttentionSpec(4, 2, biases="qkvo")).unidentified
    text = run("verify", "--d-model", "4", "--heads", "2", "--no-invariance").stdout.splitlines()
    assert any(line.startswith("measured: ") for line in text)


def test_verify_outside_the_hypotheses():
    """Below T_min verify refuses; --outside-hypotheses measures it: 22 unidentified where the count says 20."""
    pytest.importorskip("torch")
    spec = [
        "--d-model",
        "4",
        "--heads",
        "1",
        "--rope",
        "full",
        "--causal",
        "--seq-len",
        "2",
        "--positions",
        "contiguous",
    ]
    one_line_error(run("verify", *spec), "--seq-len")
    out = run("verify", *spec, "--outside-hypotheses", "--no-invariance", "--json")
    assert out.returncode == 1, out.stderr
    row = json.loads(out.stdout)
    assert (row["predicted"], row["measured"], row["status"]) == (20, 22, "failed")


def test_python_api():
    """`from attnid import AttentionSpec, count, verify`: verify is the Jacobian judge, loaded on first use."""
    pytest.importorskip("torch")
    from attnid import AttentionSpec, count, verify

    spec = AttentionSpec(d_model=4, n_heads=2, rope_dims="full", biases="qkvo")
    row = verify(spec, other_seeds=(), half_batch=False)
    assert row["status"] == "passed" and row["measured"] == row["predicted"] == count(spec).unidentified


def test_one_flag_table_covers_every_spec_field():
    """SPEC_FLAGS is the one place a spec flag is written: every AttentionSpec field has exactly one flag, and the
    parser's options are generated from it (count and verify alike)."""
    from attnid.cli import SPEC_FLAGS, build_parser

    assert sorted(f.dest for f in SPEC_FLAGS) == sorted(attnid.AttentionSpec.field_names())
    parser = build_parser("attnid")
    for command in ("count", "verify"):
        sub = parser._subparsers._group_actions[0].choices[command]
        options = {opt for action in sub._actions for opt in action.option_strings}
        assert {f.flag for f in SPEC_FLAGS} <= options


def test_flags_are_never_abbreviated():
    """`--head 4` is not `--heads 4` (argparse's prefix matching is off)."""
    out = run("count", "--d-model", "8", "--head", "2")
    assert out.returncode == 2 and "--head" in out.stderr and "Traceback" not in out.stderr
    assert run("count", "--d-model", "8", "--heads", "2").returncode == 0


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("num_attention_heads", "eight", "must be an integer, got 'eight'"),
        ("num_attention_heads", 8.5, "must be an integer, got 8.5"),
        ("num_attention_heads", "8", "must be an integer, got '8'"),  # a string is not silently taken as 8
        ("rope_theta", "abc", "must be a finite number, got 'abc'"),
    ],
)
def test_a_config_field_of_the_wrong_type_is_one_line_naming_file_key_and_value(tmp_path, key, value, said):
    from attnid.hf import stored_config

    cfg = stored_config("llama3_8b")
    cfg[key] = value
    if key == "rope_theta" and isinstance(cfg.get("rope_parameters"), dict):
        cfg["rope_parameters"] = {**cfg["rope_parameters"], key: value}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    for command in ("count", "check"):
        line = one_line_error(run(command, "--hf-config", str(path)), key)
        assert str(path) in line and f"{key}: {said}" in line, line
