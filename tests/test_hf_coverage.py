"""`attnid coverage`: every model type of the installed transformers has a status and a true-looking reason.

What the reasons say was read from the modeling files (attnid.hf.refusals); here only their form is checked:
every type of the installed transformers is classified, none twice, every reason starts with its category
and names a type that exists, and the families' own refusals win over the table.
"""

import json
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from attnid.cli import main
from attnid.hf.check import ENCODERS
from attnid.hf.coverage import (
    CATEGORIES,
    CHECK_COLUMNS,
    COUNTED,
    OTHER,
    REASONS,
    category_of,
    check_failures,
    classify,
    coverage,
    coverage_by_category,
    family_refusals,
    model_types,
    summary,
)
from attnid.hf.mapping import MAPPERS
from attnid.workflow_config import semantic_errors

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def rows():
    return coverage()


def test_every_model_type_has_a_status_and_a_reason(rows, capsys):
    assert {r["model_type"] for r in rows} == set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(ENCODERS)
    assert len(rows) == len({r["model_type"] for r in rows})  # each type once
    for r in rows:
        assert r["status"] in ("mapped", "refused"), r
        assert r["reason"].strip() and "\n" not in r["reason"], r
        if r["status"] == "mapped":
            assert r["model_type"] in MAPPERS and r["counted"] in COUNTED, r
        else:
            assert r["model_type"] not in MAPPERS and r["category"] in (*CATEGORIES, OTHER), r
            assert r["category"] != "not examined", f"{r['model_type']}: nobody has examined it"
    assert main(["coverage"]) == 0
    out = capsys.readouterr().out
    totals = summary(rows)
    assert f"{totals['types']} model types: {totals['mapped']} mapped" in out.splitlines()[-1]
    print(out.splitlines()[-1])  # the coverage at this state of the mapping (pytest -s shows it)


def test_no_type_is_both_mapped_and_refused(rows):
    mapped = {r["model_type"] for r in rows if r["status"] == "mapped"}
    refused = {r["model_type"] for r in rows if r["status"] == "refused"}
    assert not mapped & refused and not mapped & set(family_refusals())
    assert mapped == set(MAPPERS) & set(model_types())


def test_a_family_refusing_a_mapped_type_or_refusing_twice_stops_the_coverage():
    mapped = next(iter(MAPPERS))
    with pytest.raises(RuntimeError, match=f"'{mapped}' is both mapped and refused"):
        family_refusals([("fake", SimpleNamespace(REFUSED={mapped: "hybrid: a reason"}))])
    twice = [("a", SimpleNamespace(REFUSED={"mamba": "x: y"})), ("b", SimpleNamespace(REFUSED={"mamba": "x: y"}))]
    with pytest.raises(RuntimeError, match="refused by two families"):
        family_refusals(twice)
    with pytest.raises(RuntimeError, match="without a reason"):
        family_refusals([("fake", SimpleNamespace(REFUSED={"mamba": " "}))])


def test_a_family_reason_wins_over_the_table_and_keeps_its_category():
    families = [("fake", SimpleNamespace(REFUSED={"mamba": "hybrid: examined by a family"}))]
    row = classify("mamba", family_refusals(families))
    assert (row["status"], row["category"], row["reason"]) == ("refused", "hybrid", "hybrid: examined by a family")
    assert category_of("a reason with no category") == OTHER


def test_every_family_refusal_starts_with_a_category():
    """A mapping family's REFUSED reason wins over the table's, so it must carry a category too (none is `other`)."""
    for mt, reason in family_refusals().items():
        assert category_of(reason) in CATEGORIES and category_of(reason) != "not examined", (mt, reason)


def test_every_table_reason_names_a_type_and_starts_with_a_category():
    installed = set(model_types())
    assert set(REASONS) <= installed, sorted(set(REASONS) - installed)
    for mt, reason in REASONS.items():
        assert category_of(reason) in CATEGORIES and category_of(reason) != "not examined", (mt, reason)
        assert reason.split(":", 1)[1].strip(), mt


def test_json_lists_every_type_and_the_summary(rows, capsys):
    assert main(["coverage", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["model_type"] for r in out["types"]] == [r["model_type"] for r in rows]
    assert out["summary"] == summary(rows)
    assert out["summary"]["mapped"] + out["summary"]["refused"] == out["summary"]["types"]
    assert sum(out["summary"]["refused_by_category"].values()) == out["summary"]["refused"]


def _row(verdict, **fields):
    return {**dict.fromkeys(CHECK_COLUMNS), "model_type": "gpt2", "config": "default", "part": "whole model",
            "verdict": verdict, "P": 10, "P_spec": 10, "count": 3, "measured": 2, **fields}  # fmt: skip


def test_check_failures_name_every_part_that_does_not_agree():
    assert check_failures([_row("agree"), _row("refused", reason="count_model refuses it")]) == ""
    message = check_failures([_row("agree"), _row("disagree"), _row("undecided"), _row("error", reason="boom")])
    lines = message.splitlines()
    assert len(lines) == 3 and lines[0] == "gpt2 (default) whole model: disagree; P=10 (spec 10) count=3 measured=2"
    assert lines[2].endswith("error; boom")


def test_the_coverage_rule_fails_and_writes_nothing_when_a_part_disagrees(tmp_path):
    """hf_coverage.py gathers the per-type checks (hf_check.py's CSVs) and names every failing row."""
    import pandas as pd

    checks = []
    for i, rows in enumerate([[_row("agree")], [_row("disagree")]]):
        checks.append(str(tmp_path / f"type{i}.csv"))
        pd.DataFrame(rows, columns=CHECK_COLUMNS).to_csv(checks[-1], index=False)
    fake = SimpleNamespace(
        log=[str(tmp_path / "hf_coverage.log")], threads=1, output=[str(tmp_path / "coverage.csv")],
        input=SimpleNamespace(checks=checks),
    )  # fmt: skip
    streams = sys.stdout, sys.stderr, sys.excepthook
    try:
        with pytest.raises(SystemExit, match="gpt2 \\(default\\) whole model: disagree"):
            runpy.run_path(str(ROOT / "workflow/scripts/hf_coverage.py"), init_globals={"snakemake": fake},
                           run_name="__main__")  # fmt: skip
    finally:
        sys.stdout.close()
        sys.stdout, sys.stderr, sys.excepthook = streams
    assert not Path(fake.output[0]).exists()
    assert "disagree" in Path(fake.log[0]).read_text()


def test_the_table_counts_every_type_once(rows):
    table = coverage_by_category(rows)
    assert table["count"].sum() == len(rows)
    listed = [t for types in table["types"] for t in types.split(", ")]
    assert sorted(listed) == sorted(r["model_type"] for r in rows)
    assert table["class"].iloc[0] == "mapped: whole model"


def test_the_config_names_a_self_checked_type_that_is_not_mapped():
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["hf"]["coverage"] = ["gpt2", "mamba"]
    assert semantic_errors(config) == [
        "config hf.coverage[1]: 'mamba' is not a mapped model type (attnid coverage lists them)"
    ]
    config["hf"]["coverage"] = "mapped"
    assert semantic_errors(config) == []
