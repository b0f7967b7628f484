"""Ctrl-C at any point leaves a rule's finished outputs or nothing, and the next plain `all` rebuilds what is missing.

In a copy of the smoke build (results and Snakemake's metadata included), a rule is forced to run again and
the Snakemake process gets SIGINT (what Ctrl-C sends) while the rule's job is running:

* a notebook rule: the executed notebook under results/<preset>/notebooks/ must be absent or a notebook
  whose every code cell ran (the copy being executed is the rule's log, elsewhere);
* a training job: its outputs must be absent or complete (readable);

and afterwards `snakemake -n all` must plan the interrupted rule again (not "Nothing to be done").
"""

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow
CONFIG = "--configfile=config/smoke.yaml"
RESULTS = Path("results/smoke")


def interrupt_while_running(work: Path, rule: str, target: str, running: Path, timeout: float = 300) -> None:
    """Force `rule` for `target`, wait until `running` (a file the job writes) exists, then SIGINT Snakemake."""
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", target, "--forcerun", rule, CONFIG]
    proc = subprocess.Popen(cmd, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    start = time.monotonic()
    while not (work / running).exists():
        assert proc.poll() is None, f"{rule} ended before it could be interrupted: {proc.stderr.read()[-2000:]}"
        assert time.monotonic() - start < timeout, f"{rule} did not start writing {running}"
        time.sleep(0.2)
    time.sleep(1.0)  # well inside the job
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=120)


def planned(work: Path) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "all", CONFIG],
        cwd=work, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return {line.split()[1] for line in out.stdout.splitlines() if line.startswith("rule ")}


@pytest.fixture
def built(smoke_build, tmp_path):
    work = tmp_path / "repo"
    shutil.copytree(smoke_build, work, symlinks=True)
    return work


def test_interrupted_notebook_leaves_no_unexecuted_notebook(built):
    published = RESULTS / "notebooks" / "01_counting.ipynb"
    log = RESULTS / "logs" / "notebooks" / "01_counting.ipynb"
    (built / log).unlink(missing_ok=True)
    interrupt_while_running(built, "nb_counting", str(published), log)
    target = built / published
    if target.exists():  # a published notebook is a finished one
        cells = [c for c in json.loads(target.read_text())["cells"] if c["cell_type"] == "code"]
        assert cells and all(c.get("execution_count") is not None for c in cells)
    assert {"nb_counting", "nb_publish"} <= planned(built) or target.exists()


def test_interrupted_training_job_leaves_complete_outputs_or_none(built):
    job = RESULTS / "training" / "jobs" / "recall" / "own" / "h2"
    log = RESULTS / "logs" / "training" / "recall" / "own" / "h2.log"
    (built / log).unlink(missing_ok=True)
    interrupt_while_running(built, "train_job", str(job / "summary.parquet"), log)
    outputs = [built / job / "metrics.parquet", built / job / "summary.parquet"]
    for path in outputs:
        if path.exists():
            assert len(pd.read_parquet(path)) > 0
    assert not any(p.name.endswith(".tmp") for p in (built / job).glob("*")) if (built / job).exists() else True
    if not all(p.exists() for p in outputs):
        assert "train_job" in planned(built), "an interrupted training job must be planned again"
