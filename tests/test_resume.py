"""Resumability: a sweep killed in the middle and restarted redoes nothing it had finished.

In a temporary copy of the repository, `snakemake` builds the teacher-student training jobs of the
smoke preset (one job per optimizer, its runs batched); once some jobs are finished and another one is running, the whole process group (Snakemake
and its jobs) gets SIGTERM (what SLURM, `kill` or a shutdown send: Snakemake cleans up) or SIGKILL
(no handler runs, as after a power cut or an out-of-memory kill: the lock stays, so the restart
begins with `snakemake --unlock`). The restart with --rerun-incomplete must
  * plan only the runs that were not finished (the killed one included),
  * leave the finished outputs untouched (same mtime, same bytes),
  * end with every output complete and readable, and nothing that looks finished but is not
    (outputs are written to a temporary name and renamed: attnid.io.atomic_path).
"""

import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from worktree import copy_tree

CONFIG = "config/smoke.yaml"
N_RUNS = 4  # the first training jobs in path order: 2 finish, 1 is killed, 1 has not started
pytestmark = pytest.mark.slow


def snakemake(work: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", *args, "--configfile", CONFIG]


def run_targets(work: Path) -> list[str]:
    """metrics.parquet of the first N_RUNS training jobs of the preset, from `snakemake --summary` (the rules
    decide)."""
    out = subprocess.run(
        snakemake(work, "--summary", "--cores", "1", "all"), cwd=work, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [line.split("\t") for line in out.stdout.splitlines()[1:]]
    runs = sorted(r[0] for r in rows if len(r) > 2 and r[2] == "train_job" and r[0].endswith("metrics.parquet"))
    assert len(runs) >= N_RUNS, f"expected at least {N_RUNS} training jobs in {CONFIG}, got {runs}"
    return runs[:N_RUNS]


def planned_runs(text: str) -> int:
    """The train_job count of Snakemake's job-stats table (0 when there is nothing to do)."""
    counts = re.findall(r"^train_job\s+(\d+)\s*$", text, flags=re.MULTILINE)
    return int(counts[-1]) if counts else 0


def finished(log_text: str) -> list[str]:
    """metrics.parquet of the jobs Snakemake reported finished: job blocks ("output: a, b" ... "jobid: N")
    matched with "Finished jobid: N" lines of its log."""
    outputs = {
        jobid: out.split(",")[0].strip()
        for out, jobid in re.findall(
            r"^\s+output: (.+?)$.*?^\s+jobid: (\d+)$", log_text, flags=re.MULTILINE | re.DOTALL
        )
    }
    return [outputs[j] for j in re.findall(r"^Finished jobid: (\d+)", log_text, flags=re.MULTILINE) if j in outputs]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A copy of the working tree and the runs to build in it (copied again for each test)."""
    work = tmp_path_factory.mktemp("template")
    copy_tree(work)
    return work, run_targets(work)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killed_sweep_resumes_without_redoing_finished_runs(tmp_path, template, sig):
    work = tmp_path / "repo"
    shutil.copytree(template[0], work)
    targets = template[1]

    # 1. start the sweep (one job at a time, so runs finish one by one) and kill it mid-way
    first = tmp_path / "first.log"
    log = open(first, "w")  # noqa: SIM115 - closed in the finally below, after the kill
    proc = subprocess.Popen(
        snakemake(work, *targets, "--cores", "1"),
        cwd=work,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: SIGKILL reaches the jobs too
    )
    deadline = time.monotonic() + 150
    try:
        while len(finished(first.read_text())) < 2:
            assert proc.poll() is None, first.read_text()[-3000:]
            assert time.monotonic() < deadline, "sweep too slow to reach 2 finished runs"
            time.sleep(0.2)
        time.sleep(1.0)  # let the next run start
    finally:
        os.killpg(proc.pid, sig)
        proc.wait()
        log.close()
    done = finished(first.read_text())
    assert set(done) <= set(targets)
    assert 2 <= len(done) < len(targets), f"kill came too late: {len(done)} of {len(targets)} finished"
    before = {t: ((work / t).stat().st_mtime_ns, (work / t).read_bytes()) for t in done}

    if sig == signal.SIGKILL:
        # Snakemake had no chance to remove its lock: the documented first step after a hard kill
        unlock = subprocess.run(
            snakemake(work, *targets, "--unlock"), cwd=work, capture_output=True, text=True, check=False
        )
        assert unlock.returncode == 0, unlock.stderr[-3000:]

    # 2. the restart plans exactly the unfinished runs
    plan = subprocess.run(
        snakemake(work, *targets, "--cores", "1", "--rerun-incomplete", "-n", "--quiet", "rules"),
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    assert plan.returncode == 0, plan.stderr[-3000:]
    todo = len(targets) - len(done)
    assert planned_runs(plan.stdout + plan.stderr) == todo, plan.stdout + plan.stderr

    # 3. restart and finish
    rest = subprocess.run(
        snakemake(work, *targets, "--cores", "2", "--rerun-incomplete"),
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    assert rest.returncode == 0, rest.stderr[-3000:]
    assert f"{todo} of {todo} steps (100%) done" in rest.stderr, rest.stderr[-3000:]

    # 4. finished runs untouched; every run complete and readable; nothing half-written looks finished
    for t, (mtime, data) in before.items():
        assert (work / t).stat().st_mtime_ns == mtime and (work / t).read_bytes() == data, f"{t} was redone"
    for t in targets:
        metrics = pd.read_parquet(work / t)  # raises on a truncated file
        summary = pd.read_parquet((work / t).with_name("summary.parquet"))
        assert len(metrics) > 0 and summary["final_loss"].map(math.isfinite).all(), t
    final = subprocess.run(
        snakemake(work, *targets, "--cores", "1", "-n"), cwd=work, capture_output=True, text=True, check=False
    )
    assert "Nothing to be done" in final.stdout + final.stderr
    # a killed job may leave its temporary file (.metrics.parquet.XXXX.tmp), never a final name
    finals = {p.relative_to(work).as_posix() for p in (work / "results").rglob("metrics.parquet")}
    assert finals == set(targets)
