"""Atomic file output: write to a temporary file beside the target, then rename.

An interrupted job leaves no file that looks finished (the rename is atomic on POSIX).
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | Path):
    """Yield a temporary path in the target's folder; rename it to `path` only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def atomic_write_json(path: str | Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def atomic_write_csv(path: str | Path, df) -> None:
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)


def atomic_write_parquet(path: str | Path, df) -> None:
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, index=False)


def log_to(path: str | Path) -> None:
    """Send this process's stdout and stderr (warnings, tracebacks, progress bars) to a log file.

    Used by the workflow's glue scripts: `log_to(snakemake.log[0])`.
    """
    import sys

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    stream = open(path, "w", buffering=1)
    sys.stdout = sys.stderr = stream
