"""Display names of the training sweep's categorical values, and the order they are shown in.

Shared by figures, tables and macros (so a legend and a sentence of the paper name an optimizer
the same way); no matplotlib here, so the macro writers stay light.
"""

from __future__ import annotations

# Unknown values are shown as they are.
OPTIMIZER_NAMES = {
    "sgd": "SGD",
    "sgd_wd": "SGD + weight decay",
    "sgd_momentum": "SGD + momentum",
    "adam": "Adam",
    "adam_shared": "Adam (shared second moment)",
    "adamw": "AdamW",
}
REBALANCE_NAMES = {"none": "no rebalancing", "project": "project out", "balance": "balance"}
TASK_NAMES = {"teacher_student": "teacher-student", "teacher-student": "teacher-student"}


def ordered(values, order) -> list:
    """The distinct `values`, those named in `order` first (in that order), the rest sorted."""
    present = list(dict.fromkeys(values))
    return [v for v in order if v in present] + sorted(v for v in present if v not in order)
