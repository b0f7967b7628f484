"""Rule `paper`: build results/paper/main.pdf from paper/main.tex with latexmk.

TeX is a system dependency. Without latexmk the rule stops at once with the install
instruction (not with a LaTeX traceback). latexmk runs in a staging folder where `paper/` is the
manuscript and `results/` the preset's results folder (results_dir), so the paper \\input's
results/tables/*.tex and includes results/figures/*.pdf of the preset being built; auxiliary
files go to <results_dir>/paper/build/, and the PDF is moved into place atomically.
A failed build names the LaTeX errors (undefined macros, missing files) from the log.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

INSTALL = (
    "latexmk not found: the paper needs a TeX installation. On Debian/Ubuntu:\n"
    "  sudo apt-get install -y --no-install-recommends latexmk texlive-latex-recommended poppler-utils\n"
    "(macOS: brew install --cask mactex-no-gui; conda: conda install -c conda-forge texlive-core latexmk)"
)


def require_latexmk() -> str:
    """Path of latexmk, or SystemExit with the install instruction."""
    path = shutil.which("latexmk")
    if path is None:
        raise SystemExit(INSTALL)
    return path


def latex_errors(log_text: str) -> list[str]:
    """The error lines of a LaTeX log ('! ...' or 'file:line: ...') with the source line that
    follows ('l.42 ... \\Undefined'), which names an undefined macro or a missing file."""
    lines = log_text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.startswith("!") or re.match(r"^\S+\.tex:\d+: ", line):
            context = next((ln for ln in lines[i + 1 : i + 8] if ln.startswith("l.")), "")
            found.append(f"{line} {context}".strip())
    return found


def stage(paper_dir: str | Path, results_dir: str | Path, where: str | Path) -> Path:
    """A folder in which `paper/` is the manuscript and `results/` this preset's results (two
    symbolic links), so the paper's `results/...` paths read the preset being built."""
    where = Path(where)
    where.mkdir(parents=True, exist_ok=True)
    for name, target in (("paper", paper_dir), ("results", results_dir)):
        link = where / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(Path(target).resolve(), target_is_directory=True)
    return where


def build(tex: str | Path, outdir: str | Path, log, cwd: str | Path = ".") -> Path:
    """Run latexmk on `tex` (relative to `cwd`) into `outdir`; return the PDF path."""
    latexmk = require_latexmk()
    tex, outdir = Path(tex), Path(outdir).resolve()
    cmd = [
        latexmk,
        "-pdf",
        "-interaction=nonstopmode",
        "-halt-on-error",
        "-file-line-error",
        f"-outdir={outdir}",
        str(tex),
    ]
    # a fixed date makes the PDF byte-stable (pdfTeX reads SOURCE_DATE_EPOCH for /CreationDate and /ID)
    env = os.environ | {"SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", "0"), "FORCE_SOURCE_DATE": "1"}
    done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False, env=env, cwd=cwd)
    pdf = outdir / f"{tex.stem}.pdf"
    if done.returncode != 0 or not pdf.exists():
        tex_log = outdir / f"{tex.stem}.log"
        errors = latex_errors(tex_log.read_text(errors="replace")) if tex_log.exists() else []
        raise SystemExit(
            f"latexmk failed ({done.returncode}) on {tex}:\n  " + "\n  ".join(errors[:20] or ["see the log"])
        )
    return pdf


if __name__ == "__main__" and "snakemake" in globals():
    from attnid.io import atomic_path, log_to

    log_to(snakemake.log[0], "paper")
    out = Path(snakemake.output.pdf)
    main_tex = Path(next(t for t in snakemake.input.tex if Path(t).name == "main.tex"))
    results = out.parent.parent  # <results_dir>/paper/main.pdf
    where = stage(main_tex.parent, results, out.parent / "stage")
    try:
        pdf = build(Path("paper") / main_tex.name, out.parent / "build", sys.stdout, cwd=where)
    except SystemExit as stop:
        print(stop, file=sys.__stderr__)  # the console, not only the log
        raise
    with atomic_path(out) as tmp:
        shutil.copyfile(pdf, tmp)
    warnings = [
        ln
        for ln in (out.parent / "build" / "main.log").read_text(errors="replace").splitlines()
        if re.search(r"Warning.*(undefined|Citation)", ln)
    ]
    print("\n".join(warnings) or "no undefined references or citations")
