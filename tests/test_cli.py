"""`python -m attnid count`: JSON for any valid spec, a one-line error naming the flag otherwise."""

import json
import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "attnid", *args], capture_output=True, text=True)


def test_count_json():
    out = run("count", "--d-model", "4096", "--heads", "32", "--kv-heads", "8", "--rope", "full", "--bias", "none", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert {"total", "unidentified", "identified", "ratio", "breakdown"} <= set(result)
    assert result["identified"] + result["unidentified"] == result["total"]
    assert set(result["breakdown"]) >= {"query_key", "value_output", "key_bias", "value_bias"}
    assert result["breakdown"]["query_key"] == 8 * 128  # one C* per rotated plane per KV group


def test_count_table():
    out = run("count", "--d-model", "8", "--heads", "2", "--bias", "qkvo", "--causal")
    assert out.returncode == 0 and "unidentified" in out.stdout


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--d-model", "8", "--heads", "2", "--rope", "3"], "--rope"),
        (["--d-model", "8", "--heads", "4", "--kv-heads", "3"], "--kv-heads"),
        (["--d-model", "0", "--heads", "2"], "--d-model"),
        (["--d-model", "8", "--heads", "2", "--d-head", "-1"], "--d-head"),
        (["--d-model", "8", "--heads", "2", "--rope", "6"], "--rope"),
        (["--d-model", "8", "--heads", "2", "--bias", "qz"], "--bias"),
        (["--d-model", "8", "--heads", "3"], "--d-head"),
    ],
)
def test_bad_flags(args, flag):
    out = run("count", *args)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0], out.stderr
    assert "Traceback" not in out.stderr
