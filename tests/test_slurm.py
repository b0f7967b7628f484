"""A real single-node SLURM cluster runs a small sweep through the workflow's SLURM profile.

Opt-in (it installs packages and starts daemons as root): `pytest -m slurm tests/test_slurm.py`.
The work is in tests/slurm/run.sh (see its header); this test runs it and checks that it passed.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).parent / "slurm" / "run.sh"

pytestmark = pytest.mark.slurm


def test_sweep_through_slurm_equals_local_run():
    if os.geteuid() != 0:
        pytest.skip("needs root: installs slurm-wlm/munge and starts slurmctld/slurmd")
    if shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
        pytest.skip("needs Debian's slurm-wlm (apt-get) or an installed slurmctld")
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(RUN)], capture_output=True, text=True, env=env, timeout=1200)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "PASS:" in out
    assert "COMPLETED jobs by rule" in out
