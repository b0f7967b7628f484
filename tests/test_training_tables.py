"""The training summary table's LaTeX (workflow/scripts/table_training.py), from a small synthetic table."""

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))

import table_training


def test_a_long_setting_name_is_set_down_its_rows():
    """'teacher-student, fixed head size' takes two of its six rows, one line each: no row carries it whole."""
    rows = [{"task": "teacher_student_fixed_head", "optimizer": opt, "overlap_none": 0.1, "overlap_balance": 0.1,
             "gauge_none": 0.2, "gauge_balance": 0.2, "loss_none": 1.0}
            for opt in ("sgd", "sgd_wd", "sgd_momentum", "adam", "adam_shared", "adamw")]  # fmt: skip
    tex = table_training.latex(pd.DataFrame(rows)).splitlines()
    body = tex[tex.index(r"\midrule") + 1 : tex.index(r"\bottomrule")]
    firsts = [line.split(" & ")[0] for line in body]
    assert firsts == ["teacher-student,", "fixed head size", "", "", "", ""]


def test_a_setting_with_fewer_rows_than_lines_keeps_its_whole_name():
    assert table_training.name_lines("teacher-student, fixed head size", 1) == ["teacher-student, fixed head size"]
    assert table_training.name_lines("recall", 6) == ["recall"]
