"""The report layer: one number formatter, one macro namer, the citation check, byte-stable figures,
unreadable intermediates named with their rebuild command, and no torch in the LaTeX helpers."""

import ast
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from attnid.io import UnreadableResult, read_result
from attnid.report.latex import defined_names, macro_name, number, scientific
from attnid.report.macros import citation_mismatch, combine, paper_citations, paper_sources

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("x", "kwargs", "text"),
    [
        # running text (2 decimals from 1 up, 3 significant digits below, {,} for integers)
        (0.0625, {"decimals": 2}, "0.0625"),
        (1234, {"decimals": 2}, "1{,}234"),
        (3.5, {"decimals": 2}, "3.50"),
        (2.5e-9, {"decimals": 2}, r"\ensuremath{2.5\times10^{-9}}"),
        (2.0e6, {"decimals": 2}, r"\ensuremath{2.0\times10^{6}}"),  # a float count that large is shown as a magnitude
        (70_000_000_000, {}, "70{,}000{,}000{,}000"),  # an int count never is
        # symmetry tables: plain between 1e-2 and 1e3
        (0.123456, {"plain": (1e-2, 1e3)}, "0.123"),
        (3.1e-16, {"plain": (1e-2, 1e3)}, r"\ensuremath{3.1\times10^{-16}}"),
        (1000.0, {"plain": (1e-2, 1e3)}, r"\ensuremath{1.0\times10^{3}}"),
        (0.0, {"plain": (1e-2, 1e3)}, "0"),
        # training prose: two significant digits
        (0.153, {"digits": 2, "plain": (1e-2, 1e3)}, "0.15"),
        # a fixed layout
        (12.3456, {"fmt": ".3f"}, "12.346"),
        (12345, {"fmt": ","}, "12{,}345"),
        (math.nan, {}, "n/a"),
        (None, {}, "n/a"),
        (math.inf, {"missing": "--"}, "--"),
    ],
)
def test_one_number_formatter_covers_every_layout_the_paper_uses(x, kwargs, text):
    assert number(x, **kwargs) == text


def test_scientific_rounds_the_mantissa_to_one_decimal():
    assert scientific(9.96e-5) == r"\ensuremath{1.0\times10^{-4}}"


@pytest.mark.parametrize(
    ("parts", "name"),
    [
        (("Unidentified", "LLaMA-2-70B"), "UnidentifiedLLaMATwoSevenZeroB"),
        (("UnidentifiedPct", "GPT-2 small"), "UnidentifiedPctGPTTwoSmall"),
        (("AttnParams", "Pythia-1.4B"), "AttnParamsPythiaOneFourB"),
        (("PaperOverlapList", "teacher_student"), "PaperOverlapListTeacherStudent"),
        (("Overlap", "sgd_momentum"), "OverlapSgdMomentum"),
    ],
)
def test_one_macro_namer_spells_digits_and_keeps_letters(parts, name):
    assert macro_name(*parts) == name
    assert name.isalpha()


def test_macro_namer_refuses_a_name_without_letters():
    with pytest.raises(ValueError, match="no LaTeX macro name"):
        macro_name("--")


def test_macros_are_combined_and_a_duplicate_is_refused():
    a, b = "\\newcommand{\\Alpha}{1}\n", "\\newcommand{\\Beta}{2}\n"
    assert defined_names(combine({"a.tex": a, "b.tex": b})) == ["Alpha", "Beta"]
    with pytest.raises(ValueError, match=r"\\Alpha: a.tex, c.tex"):
        combine({"a.tex": a, "c.tex": a})


def test_citations_leave_out_latex_commands_local_definitions_and_comments():
    tex = r"""\newcommand{\R}{\mathbb{R}} \DeclareMathOperator{\Tr}{Tr}
    $\Delta \in \R$, \Tr, \section{A} \CountGridSpecs{} specs and \UnidentifiedPctGPTTwoSmall\%.
    % \NotCitedInAComment
    """
    assert paper_citations([tex]) == {"CountGridSpecs", "UnidentifiedPctGPTTwoSmall"}
    assert citation_mismatch(["CountGridSpecs", "Dead"], paper_citations([tex])) == (
        ["Dead"],
        ["UnidentifiedPctGPTTwoSmall"],
    )


def test_paper_sources_cover_the_sections():
    sources = {p.relative_to(ROOT).as_posix() for p in paper_sources(ROOT / "paper")}
    assert "paper/main.tex" in sources
    assert all(s.endswith(".tex") for s in sources)


@pytest.mark.parametrize("text", ["a,b\n1,2\n3,", "", "\x00\x01garbage"])
def test_an_unreadable_result_names_the_file_and_how_to_rebuild_it(tmp_path, text):
    path = tmp_path / "ratios.parquet" if text.startswith("\x00") else tmp_path / "ratios.csv"
    path.write_text(text)
    with pytest.raises(UnreadableResult) as err:
        read_result(path, columns=["a", "b", "c"])
    message = str(err.value)
    assert str(path) in message and f"snakemake --cores 1 -f {path}" in message
    assert "\n" not in message


def test_a_readable_result_is_returned(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame({"a": [1, 2]}).to_csv(path, index=False)
    assert read_result(path, columns=["a"])["a"].tolist() == [1, 2]


def test_figures_are_byte_stable(tmp_path):
    import matplotlib.pyplot as plt

    from attnid.report.style import save, use_style

    def draw(name):
        use_style()
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        save(fig, tmp_path / f"{name}.pdf", tmp_path / f"{name}.png")

    draw("a")
    draw("b")
    for kind in ("pdf", "png"):
        assert (tmp_path / f"a.{kind}").read_bytes() == (tmp_path / f"b.{kind}").read_bytes()
    assert b"CreationDate" not in (tmp_path / "a.pdf").read_bytes()


def test_the_latex_helpers_import_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from attnid.report.latex import number, macro_name\n"
        "from attnid.report.macros import paper_citations, training_macros\n"
        "from attnid.report.study import study_macros\n"
        "from attnid.report.tables import symmetry_table, training_table\n"
        "assert number(1234) == '1{,}234' and macro_name('a_b') == 'AB'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


def test_the_science_never_imports_the_report_layer():
    """attnid.report reads results and formats them; no module outside it imports it (one way only)."""
    package = ROOT / "src" / "attnid"
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if (package / "report") in path.parents:
            continue
        tree = ast.parse(path.read_text())
        depth = len(path.relative_to(package).parts) - 1  # how many dots reach attnid from this module
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:  # relative: resolve against attnid
                    module = "attnid." + module if node.level == depth + 1 else f"<{node.level}>{module}"
                names = [module, *(f"{module}.{alias.name}" for alias in node.names)]
            if any(n == "attnid.report" or n.startswith("attnid.report.") for n in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"science modules import attnid.report: {offenders}"


def test_an_unreadable_result_names_the_rule_that_writes_it(tmp_path, monkeypatch):
    import json

    path = tmp_path / "results/smoke/counting/ratios.csv"
    path.parent.mkdir(parents=True)
    path.write_text("")
    monkeypatch.setenv("ATTNID_PRODUCERS", json.dumps({r".*/counting/ratios\.csv$": "counting_ratios"}))
    with pytest.raises(UnreadableResult, match=r"rebuild it \(rule counting_ratios\) with: snakemake --cores 1 -f "):
        read_result(path)
