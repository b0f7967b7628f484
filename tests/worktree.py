"""Copy the working tree into a temporary folder, as git sees it, for tests that run the workflow there."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def copy_tree(dest: Path, root: Path = ROOT) -> Path:
    """Tracked and untracked files of `root` (ignored ones such as results/, .venv, .git left out) -> dest."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root, capture_output=True, check=True
    ).stdout.decode()
    for rel in filter(None, out.split("\0")):
        if (root / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, dest / rel)
    return dest
