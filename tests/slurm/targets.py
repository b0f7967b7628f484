"""The small sweep tests/slurm/run.sh submits: `python tests/slurm/targets.py CONFIGFILE` (run in the repo copy).

A few training runs of the preset's cheapest task (teacher-student; the first runs in path order)
when the training rules exist, otherwise the counting outputs; and the provenance record. Found from `snakemake --summary`, so the
choice follows the config and the rules instead of repeating their path patterns here.
"""

import subprocess
import sys

RUN_RULE = "train_job"
FALLBACK_RULES = ("counting_ratios", "counting_architectures")
ALWAYS_RULES = ("provenance",)  # runs as a SLURM job too (it records the compute node's torch/GPU)
RUN_TASK = "teacher_student"  # the cheapest task: a single attention layer
N_RUNS = 4


def summary(configfile: str) -> list[tuple[str, str]]:
    out = subprocess.run(
        ["snakemake", "--configfile", configfile, "--summary", "--cores", "1", "all"],
        capture_output=True, text=True, check=True,
    ).stdout
    rows = [line.split("\t") for line in out.splitlines()[1:] if "\t" in line]
    return [(r[0], r[2]) for r in rows]  # (output file, rule)


def main(configfile: str) -> None:
    outputs = summary(configfile)
    runs = [f for f, rule in outputs if rule == RUN_RULE and f.endswith("metrics.parquet")]
    cheap = [f for f in runs if f"/{RUN_TASK}/" in f]
    if runs:
        targets = sorted(cheap or runs)[:N_RUNS]
    else:
        targets = [f for f, rule in outputs if rule in FALLBACK_RULES]
    targets += [f for f, rule in outputs if rule in ALWAYS_RULES and f.endswith(".json")]
    print("\n".join(targets))


if __name__ == "__main__":
    main(sys.argv[1])
