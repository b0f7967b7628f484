"""Atomic file output (temporary file beside the target, then rename), the one way a workflow
script logs, and reading an intermediate result with an error that says how to rebuild it.

An interrupted job leaves no file that looks finished (the rename is atomic on POSIX).
"""

from __future__ import annotations

import json
import logging
import os
import sys
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


def log_to(path: str | Path, name: str = "attnid") -> logging.Logger:
    """The one way a workflow script logs: stdout and stderr (warnings, tracebacks, progress bars)
    go to the rule's log file, and the returned logger writes there too. An uncaught error leaves
    its traceback in the log and one line naming it on the console.

    Used by every glue script: `log = log_to(snakemake.log[0])`.
    """
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    stream = open(path, "w", buffering=1)  # noqa: SIM115 - stays open for the life of the job
    sys.stdout = sys.stderr = stream
    log = logging.getLogger(name)
    log.handlers[:] = [logging.StreamHandler(stream)]
    log.setLevel(logging.INFO)
    log.propagate = False

    def report_error(kind, error, trace):  # the traceback to the log, one line to the console
        import traceback

        traceback.print_exception(kind, error, trace, file=stream)
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        print(f"{kind.__name__}: {first} (traceback in {path})", file=sys.__stderr__)

    sys.excepthook = report_error
    return log


class UnreadableResult(RuntimeError):
    """An intermediate result that exists but cannot be read (truncated, corrupt, wrong columns)."""


def read_result(path: str | Path, columns: list[str] | None = None, **kwargs):
    """Read an intermediate result (CSV, Parquet or JSON by suffix); a file that cannot be read,
    or lacks one of `columns`, raises one line naming the file and how to rebuild it.

    The rebuild command forces the rule that writes exactly this file (`snakemake -f FILE`).
    """
    import pandas as pd

    path = Path(path)
    try:
        if path.suffix == ".parquet":
            data = pd.read_parquet(path, **kwargs)
        elif path.suffix == ".json":
            data = json.loads(path.read_text())
        else:
            with open(path, "rb") as f:  # every CSV this workflow writes ends with a newline
                f.seek(max(path.stat().st_size - 1, 0))
                if f.read(1) != b"\n":
                    raise ValueError("it does not end with a newline: cut off while it was written or copied")
            data = pd.read_csv(path, **kwargs)
        missing = [c for c in columns or [] if c not in data.columns]
        if missing:
            raise ValueError(f"missing column(s) {', '.join(missing)}")
        if hasattr(data, "columns") and len(data.columns) == 0:
            raise ValueError("no columns")
    except FileNotFoundError:
        raise
    except Exception as err:  # noqa: BLE001 - every pandas/pyarrow/json parse error reads the same to a user
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        rule = producer(path)
        by = f" (rule {rule})" if rule else ""
        raise UnreadableResult(
            f"{path} is truncated or corrupt ({reason}); rebuild it{by} with: snakemake --cores 1 -f {path}"
        ) from None
    return data


def producer(path: str | Path) -> str | None:
    """The workflow rule that writes `path`, from the map the Snakefile exports to its jobs
    (environment variable ATTNID_PRODUCERS); None outside a workflow job."""
    import re

    table = json.loads(os.environ.get("ATTNID_PRODUCERS", "{}"))
    return next((rule for pattern, rule in table.items() if re.match(pattern, str(path))), None)
