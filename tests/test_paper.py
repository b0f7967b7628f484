"""The paper: every number in the built PDF equals the results it comes from.

Checks the PDF of the smoke-preset build of the whole DAG in a temporary copy of the repository
(the session fixture `smoke_build` in conftest.py, shared with the end-to-end test). Needs latexmk (TeX) and
pdftotext (poppler-utils); the PDF checks are skipped, with that reason, only when they are absent.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))

import paper  # noqa: E402

MACRO = re.compile(r"\\newcommand\{\\([A-Za-z]+)\}\{(.*)\}\s*$")
NEEDS_TEX = pytest.mark.skipif(
    shutil.which("latexmk") is None or shutil.which("pdftotext") is None,
    reason="latexmk or pdftotext missing: apt-get install latexmk texlive-latex-recommended poppler-utils",
)


def test_paper_rule_stops_at_once_without_latexmk(monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(SystemExit, match="apt-get install -y --no-install-recommends latexmk"):
        paper.require_latexmk()


def test_latex_errors_name_the_undefined_macro():
    log = "./paper/main.tex:42: Undefined control sequence.\nl.42 ...a grid of \\VerifiedSpecs\n"
    assert paper.latex_errors(log) == ["./paper/main.tex:42: Undefined control sequence. l.42 ...a grid of \\VerifiedSpecs"]


def paper_source(root: Path) -> str:
    """The LaTeX of the paper: main.tex and every section file it inputs."""
    return "\n".join(p.read_text() for p in sorted((root / "paper").glob("**/*.tex")))


def read_macros(path: Path) -> dict[str, str]:
    return {m.group(1): m.group(2) for line in path.read_text().splitlines() if (m := MACRO.match(line))}


def as_text(value: str) -> str | None:
    """How a numeric macro value reads in pdftotext output; None if it is not a number.

    '1{,}234' -> '1,234'; '\\ensuremath{1.6\\times10^{-15}}' -> '1.6×10-15' (the PDF text is
    normalised: '-' for the minus sign, no spaces around '×')."""
    sci = re.fullmatch(r"\\ensuremath\{(-?[\d.]+)\\times10\^\{(-?\d+)\}\}", value)
    if sci:
        return f"{sci.group(1)}×10{sci.group(2)}"
    text = value.replace("{,}", ",").replace("\\,", "").replace("$", "")
    return text if re.fullmatch(r"-?[\d,]*\.?\d+", text) else None


@pytest.fixture(scope="module")
def built(smoke_build):
    """(repository root whose results/ holds the paper built on the smoke preset, PDF text with whitespace collapsed)."""
    text = subprocess.run(["pdftotext", str(smoke_build / "results/paper/main.pdf"), "-"], capture_output=True, text=True, check=True).stdout
    text = re.sub(r"\s*×\s*", "×", text.replace("\u2212", "-"))
    return smoke_build, " ".join(text.split())


@NEEDS_TEX
@pytest.mark.slow
def test_every_macro_the_paper_uses_is_generated(built):
    root, _ = built
    used = set(re.findall(r"\\([A-Za-z]+)", paper_source(root)))
    defined = read_macros(root / "results/tables/macros.tex")
    generated_style = {n for n in used if re.match(r"(Paper|Count|Ratio|Unidentified|AttnParams|Num|Provenance|Verif|Sym|Train)", n)}
    assert generated_style <= set(defined), sorted(generated_style - set(defined))


@NEEDS_TEX
@pytest.mark.slow
def test_numbers_in_the_text_are_the_macro_values(built):
    root, text = built
    tex = paper_source(root)
    checked = 0
    for name, value in read_macros(root / "results/tables/macros.tex").items():
        expected = as_text(value)
        if expected is not None and re.search(rf"\\{name}(?![A-Za-z])", tex):
            assert expected in text, f"\\{name} = {expected} not in the PDF"
            checked += 1
    assert checked >= 10


@NEEDS_TEX
@pytest.mark.slow
def test_numbers_in_the_pdf_match_the_results(built):
    """Independent of the macros: recompute a few numbers from the aggregated results."""
    root, text = built
    res = root / "results"
    ratios = pd.read_csv(res / "counting/ratios.csv")
    assert f"grid of {len(ratios)} configurations of width d = {ratios.d_model.iloc[0]}" in text
    arch = pd.read_csv(res / "counting/architectures.csv")
    for row in arch.itertuples():  # whole-model counts as in the architectures table
        assert f"{row.model_unidentified:,}" in text, row.model
    verification = pd.read_csv(res / "jacobian/verification.csv")
    passed = int(verification["passed"].astype(bool).sum())
    assert f"Of its {len(verification)} configurations, {passed} agree" in text
    summary = pd.read_parquet(res / "training/summary.parquet")
    assert f"The sweep has {len(summary)} runs" in text


@NEEDS_TEX
@pytest.mark.slow
def test_no_unresolved_references_or_missing_pieces(built):
    _, text = built
    assert "??" not in text and "[?]" not in text
    assert "nan" not in text.lower().split(), "a generated table or macro prints nan (see results/tables/*.tex)"
