"""The SLURM profile: a real single-node SLURM cluster runs a small sweep through it (opt-in), and
`device: cuda` turns into a GPU request in the sbatch call (always; no cluster needed).

Opt-in (installs packages and starts daemons as root): `pytest -m slurm tests/test_slurm.py`.
The work is in tests/slurm/run.sh (see its header); the test runs it and checks that it passed.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "tests" / "slurm" / "run.sh"
RUN_TARGET = "results/smoke/training/jobs/teacher_student/own/h1/metrics.parquet"


@pytest.mark.slurm
def test_sweep_through_slurm_equals_local_run():
    if os.geteuid() != 0:
        pytest.skip("needs root: installs slurm-wlm/munge and starts slurmctld/slurmd")
    if shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
        pytest.skip("needs Debian's slurm-wlm (apt-get) or an installed slurmctld")
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(RUN)], capture_output=True, text=True, env=env, timeout=1200, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "PASS:" in out
    assert "COMPLETED jobs by rule" in out


def planned_resources(device: str) -> dict:
    """Resources of one training job, as Snakemake plans it under the SLURM profile (dry run)."""
    cmd = [sys.executable, "-m", "snakemake", RUN_TARGET, "-n", "--cores", "4", "--profile", "workflow/profiles/slurm",
           "--configfile", "config/smoke.yaml", "--config", f"device={device}", "--forcerun", "train_job"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    line = re.search(r"^\s+resources: (.+)$", out.stdout + out.stderr, flags=re.MULTILINE).group(1)
    res = dict(item.split("=", 1) for item in line.split(", "))
    threads = re.search(r"^\s+threads: (\d+)$", out.stdout + out.stderr, flags=re.MULTILINE)
    return {k: int(v) if v.isdigit() else v for k, v in res.items()} | {"threads": int(threads.group(1)) if threads else 1}


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_profile_resources_reach_the_sbatch_call(device):
    plugin = pytest.importorskip("snakemake_executor_plugin_slurm")
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    res = planned_resources(device)
    assert res["gpu"] == (1 if device == "cuda" else 0)
    assert (res["runtime"], res["mem_mb"]) == (240, 8000)  # the profile's set-resources for train_job

    class Resources(dict):
        __getattr__ = dict.__getitem__

    job = SimpleNamespace(resources=Resources(res), threads=res["threads"], name="train_job")
    params = {"run_uuid": "u", "slurm_logfile": "l", "comment_str": "rule_train_job", "account": "",
              "partition": "", "workdir": "."}
    call = get_submit_command(job, params) + set_gres_string(job)
    assert "-t 240" in call and "--mem 8000" in call, call
    assert ("--gpus=1" in call) == (device == "cuda"), call
    assert f"--cpus-per-task={res['threads']}" in call, call  # the rule's threads, GPU job or not
    assert plugin.__name__  # the pinned plugin is importable
