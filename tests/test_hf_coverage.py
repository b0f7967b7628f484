"""`attnid coverage`: every model type of the installed transformers has a status and a true-looking reason.

What the reasons say was read from the modeling files (attnid.hf.refusals); here only their form is checked:
every type of the installed transformers is classified, none twice, every reason starts with its category
and names a type that exists, and the families' own refusals win over the table.
"""

import json
from types import SimpleNamespace

import pytest
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

from attnid.cli import main
from attnid.hf.coverage import (
    CATEGORIES,
    ENCODERS,
    OTHER,
    REASONS,
    category_of,
    classify,
    coverage,
    family_refusals,
    model_types,
    summary,
)
from attnid.hf.mapping import MAPPERS

COUNTED = {"whole model", "layers only", "default config refused"}


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
