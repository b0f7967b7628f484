"""Provenance of a build: what code, config, software and machine produced the results folder.

A provenance record is two layers:

* the *fingerprint* (`fingerprint`): everything cheap to learn without importing torch that
  is the same on every machine of one installation (login and compute nodes alike): the
  pinned package versions as installed, the Python version, a sha256 of the code that results
  depend on (`CODE_PATHS`: the Snakefile, src/, workflow/, notebooks/, committed or not), the
  sha256 of the effective (validated, overridden) config and of each config file, the seeds found
  in the config and the device asked for. The workflow passes its short hash to rule
  `provenance` as a param, so Snakemake's params rerun trigger rebuilds the record exactly when
  any of these change; a README edit, a new commit that changes no code or an untracked note
  leaves it (and the paper downstream of it) alone;
* the *runtime* (`platform_info`, `torch_runtime`, `git_state`): the machine that runs the job
  (host, platform, cores), what torch sees there (torch build, CUDA/cuDNN, GPUs, threads) and
  the git commit of the build (with a dirty flag for uncommitted changes to the code).

`record(fingerprint, root, corpus)` joins them with the build time and, where the sweep trains on text, the
built corpus (`corpus_record`: the sha256 of its manifest, the package and version it came from, the text's and
the tokenizer's sha256; attnid.training.corpus): that dict is <results_dir>/provenance.json.

    python -c "import attnid.provenance as p, json; print(json.dumps(p.fingerprint({'device': 'cpu'}), indent=1))"
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import re
import subprocess
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path

PROJECT = "attnid"
# The files results depend on (paths relative to the repository root); everything else (README,
# tests, benchmarks, notes) can change without making the recorded code differ.
CODE_PATHS = ("Snakefile", "src", "workflow", "notebooks")
# Installed alongside the pins and worth recording (the executor the cluster runs used).
EXTRA_PACKAGES = ("snakemake-executor-plugin-slurm", "snakemake-executor-plugin-slurm-jobstep")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def config_sha256(config: Mapping) -> str:
    """sha256 of the canonical JSON of a config (sorted keys, no spaces): equal configs, equal hashes,
    whatever the key order or the YAML formatting they came from."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return sha256_bytes(text.encode())


def find_seeds(config, prefix: str = "") -> dict:
    """Every config entry whose key mentions 'seed' (seed, seeds, data_seed, ...), by dotted path.

    >>> find_seeds({"training": {"seeds": [0, 1], "lr": 0.1}, "jacobian": {"seed": 7}})
    {'jacobian.seed': 7, 'training.seeds': [0, 1]}
    """
    found = {}
    if isinstance(config, Mapping):
        for key in sorted(config, key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if "seed" in str(key).lower():
                found[path] = config[key]
            else:
                found.update(find_seeds(config[key], path))
    elif isinstance(config, (list, tuple)):
        for i, item in enumerate(config):
            found.update(find_seeds(item, f"{prefix}[{i}]"))
    return found


def _requirement_name(req: str) -> str:
    return re.split(r"[\s;<>=!~\[]", req, maxsplit=1)[0]


def project_packages(project: str = PROJECT) -> list[str]:
    """Names of the project's declared dependencies (all extras included), then EXTRA_PACKAGES."""
    try:
        reqs = metadata.distribution(project).requires or []
    except metadata.PackageNotFoundError:
        reqs = []
    names = [_requirement_name(r) for r in reqs]
    return list(dict.fromkeys([project, *names, *EXTRA_PACKAGES]))


def package_versions(names: Iterable[str] | None = None) -> dict:
    """name -> installed version (None where not installed), from package metadata (no imports)."""
    versions = {}
    for name in project_packages() if names is None else names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def platform_info() -> dict:
    """The machine that runs the job (under SLURM a compute node: not part of the fingerprint,
    which the login node computes too, so that it does not differ between the two)."""
    return {
        "hostname": platform.node(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),  # None outside SLURM
    }


def _git(root: Path, *args: str) -> bytes | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=True, timeout=30)
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    return out.stdout


def code_files(root: str | Path = ".", paths: Iterable[str] = CODE_PATHS) -> list[str]:
    """The files under `paths` (relative to `root`), as git sees them (tracked and untracked, not
    ignored); without git, every file below them except caches."""
    root = Path(root)
    listed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *paths)
    if listed is not None:
        names = [n for n in listed.decode().split("\0") if n]
    else:
        names = [
            p.relative_to(root).as_posix()
            for top in paths
            for p in ([root / top] if (root / top).is_file() else (root / top).rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and ".egg-info" not in str(p)
        ]
    return sorted(n for n in set(names) if (root / n).is_file())


def code_sha256(root: str | Path = ".", paths: Iterable[str] = CODE_PATHS) -> str:
    """sha256 over the path and content of every code file: equal code, equal hash, whatever the commit."""
    h = hashlib.sha256()
    for name in code_files(root, paths):
        h.update(name.encode() + b"\0" + file_sha256(Path(root) / name).encode() + b"\n")
    return h.hexdigest()


def git_state(root: str | Path = ".", paths: Iterable[str] = CODE_PATHS) -> dict:
    """Commit, dirty flag and a sha256 of the uncommitted changes to the code (`paths`: tracked diff
    plus the status list, so new untracked files count). All None outside a git work tree."""
    root = Path(root)
    commit = _git(root, "rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None, "changes_sha256": None}
    status = _git(root, "status", "--porcelain", "--untracked-files=normal", "--", *paths) or b""
    diff = _git(root, "diff", "HEAD", "--binary", "--", *paths) or b""
    dirty = bool(status.strip())
    return {
        "commit": commit.decode().strip(),
        "dirty": dirty,
        "changes_sha256": sha256_bytes(status + b"\0" + diff) if dirty else None,
    }


def _relative(path: str | Path) -> str:
    """`path` relative to the working directory when it lies below it (records stay machine-free)."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def fingerprint(config: Mapping, root: str | Path = ".", configfiles: Iterable[str | Path] = ()) -> dict:
    """The cheap part of the record (no torch import): a pure function of code, config and software.

    `config` is the effective config (after --config overrides and schema defaults), `root` the
    repository (for the code), `configfiles` the YAML files it was read from (relative to the
    working directory, as Snakemake gives them).
    """
    return {
        "project": PROJECT,
        "code_sha256": code_sha256(root),
        "config_sha256": config_sha256(config),
        "configfiles": {_relative(p): file_sha256(p) for p in configfiles},
        "seeds": find_seeds(config),
        "device": config.get("device", "cpu"),
        "packages": package_versions(),
        "python": platform.python_version(),
    }


def fingerprint_sha256(fp: Mapping) -> str:
    """A short name for a fingerprint (the rule's rerun-triggering param: one line in `snakemake -n`)."""
    return config_sha256(fp)[:16]


def torch_runtime() -> dict:
    """What torch sees here: build, CUDA/cuDNN, visible GPUs (name, capability, memory), threads."""
    import torch

    cuda = torch.cuda.is_available()
    gpus = []
    for i in range(torch.cuda.device_count() if cuda else 0):
        prop = torch.cuda.get_device_properties(i)
        gpus.append(
            {"name": prop.name, "capability": f"{prop.major}.{prop.minor}", "memory_gib": prop.total_memory / 2**30}
        )
    return {
        "version": torch.__version__,
        "cuda_build": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "cuda_available": cuda,
        "gpus": gpus,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "num_threads": torch.get_num_threads(),
    }


def corpus_record(manifest: str | Path) -> dict:
    """The built text corpus (attnid.training.corpus): its manifest's path and sha256 and what it pins."""
    facts = json.loads(Path(manifest).read_text())
    keep = ("package", "version", "tokenizers", "text_sha256", "tokenizer_sha256", "vocab_size", "tokens")
    return {"manifest": _relative(manifest), "manifest_sha256": file_sha256(manifest), **{k: facts[k] for k in keep}}


def record(fp: Mapping, root: str | Path = ".", corpus: Mapping | None = None) -> dict:
    """provenance.json: the fingerprint, the git commit, torch's view of this machine, the build time (UTC), and
    the text corpus (`corpus_record`; None when no task trains on text)."""
    return {
        **fp,
        "corpus": corpus,
        "git": git_state(root),
        "platform": platform_info(),
        "torch": torch_runtime(),
        "built_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
