"""Checks of tests/slurm/run.sh: the sweep really ran through SLURM, and its results equal a local run.

    python tests/slurm/check.py SACCT_TXT NJOBS SLURM_RESULTS LOCAL_RESULTS PROFILE [JOBCOMP_TXT]

SACCT_TXT: `sacct -X -n -P --format=JobIDRaw,JobName,State,ExitCode,Comment,Timelimit,ReqMem`.
Every one of the NJOBS Snakemake jobs must be a COMPLETED SLURM job with exit code 0:0; the job
comments (rule_<rule>_wildcards_<...>, written by snakemake-executor-plugin-slurm) name the rules,
and each job's time limit and memory are the ones the profile (PROFILE, its config.yaml) sets for
its rule (set-resources, else default-resources): the profile's resources reached sbatch.
Result files are compared byte for byte; tables (CSV/Parquet) and JSON that differ in bytes
are compared as data with the timing columns/keys (TIMING_COLUMNS) dropped. Logs, benchmarks
and provenance.json (host, time) are not results of the computation and are skipped.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import yaml

SKIP_DIRS = {"logs", "benchmarks"}  # at any depth: results/<preset>/logs, ...
SKIP_FILES = {"provenance.json"}
TIMING_COLUMNS = {"seconds", "wall_s", "time_s", "elapsed", "steps_per_second"}


def expected_resources(profile: dict, rule: str) -> tuple[str, str]:
    """(sacct Timelimit, sacct ReqMem) that the profile asks for a job of `rule`."""
    res = profile.get("default-resources", {}) | profile.get("set-resources", {}).get(rule, {})
    minutes = int(res["runtime"])
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00", f"{int(res['mem_mb'])}M"


def check_sacct(sacct_txt: Path, njobs: int, profile: dict, jobcomp: Path | None) -> Counter:
    rows = [line.split("|") for line in sacct_txt.read_text().splitlines() if line.strip()]
    assert len(rows) == njobs, f"sacct lists {len(rows)} jobs, Snakemake ran {njobs}"
    bad = [r for r in rows if r[2] != "COMPLETED" or r[3] != "0:0"]
    assert not bad, f"jobs not COMPLETED with 0:0: {bad}"
    rules = Counter(r[4].split("_wildcards_")[0].removeprefix("rule_") for r in rows)
    assert all(rules), f"a job without the plugin's rule comment: {rows}"
    for r in rows:
        rule = r[4].split("_wildcards_")[0].removeprefix("rule_")
        assert (r[5], r[6]) == expected_resources(profile, rule), f"{rule}: sacct has {r[5:7]}, profile asks {expected_resources(profile, rule)}"
    if jobcomp is not None and jobcomp.exists():
        done = [line for line in jobcomp.read_text().splitlines() if "JobState=COMPLETED" in line]
        assert len(done) == njobs, f"jobcomp log has {len(done)} COMPLETED jobs, expected {njobs}"
    return rules


def same_table(a: Path, b: Path) -> bool:
    read = pd.read_parquet if a.suffix == ".parquet" else pd.read_csv
    da, db = read(a), read(b)
    da = da.drop(columns=[c for c in da.columns if c in TIMING_COLUMNS])
    db = db.drop(columns=[c for c in db.columns if c in TIMING_COLUMNS])
    try:
        pd.testing.assert_frame_equal(da, db, check_exact=True)
    except AssertionError:
        return False
    return True


def same_json(a: Path, b: Path) -> bool:
    """Equal JSON documents once the timing keys are dropped (NaN equals NaN)."""

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in TIMING_COLUMNS}
        if isinstance(x, list):
            return [strip(v) for v in x]
        if isinstance(x, float) and math.isnan(x):
            return "NaN"
        return x

    return strip(json.loads(a.read_text())) == strip(json.loads(b.read_text()))


def compare(slurm: Path, local: Path) -> int:
    def files(root: Path) -> set[Path]:
        return {
            p.relative_to(root)
            for p in root.rglob("*")
            if p.is_file() and not SKIP_DIRS & set(p.relative_to(root).parts[:-1]) and p.name not in SKIP_FILES
        }

    fs, fl = files(slurm), files(local)
    assert fs == fl, f"different files: only SLURM {sorted(fs - fl)}, only local {sorted(fl - fs)}"
    differ = []
    for rel in sorted(fs):
        a, b = slurm / rel, local / rel
        if a.read_bytes() == b.read_bytes():
            continue
        if a.suffix in {".parquet", ".csv"} and same_table(a, b):
            continue
        if a.suffix == ".json" and same_json(a, b):
            continue
        differ.append(str(rel))
    assert not differ, f"results differ between the SLURM and the local run: {differ}"
    return len(fs)


def main(argv: list[str]) -> None:
    sacct_txt, njobs, slurm, local = Path(argv[0]), int(argv[1]), Path(argv[2]), Path(argv[3])
    profile = yaml.safe_load(Path(argv[4]).read_text())
    jobcomp = Path(argv[5]) if len(argv) > 5 else None
    rules = check_sacct(sacct_txt, njobs, profile, jobcomp)
    print(f"sacct: {njobs} COMPLETED jobs by rule: {dict(rules)}, time limits and memory as in the profile", file=sys.stderr)
    n = compare(slurm, local)
    print(f"results: {n} files equal between the SLURM and the local run", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
