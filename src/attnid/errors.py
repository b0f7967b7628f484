"""The one error of bad input: :class:`SpecError`, a ValueError whose message starts with the field it names.

Every module that checks a value (a spec field, a config key, a command-line flag) raises it, so a
caller can say what to change: ``SpecError("n_kv_heads", "n_heads=8 is not divisible by 3")`` reads
``n_kv_heads: n_heads=8 is not divisible by 3`` and carries ``.field == "n_kv_heads"``.
"""

from __future__ import annotations


class SpecError(ValueError):
    """A spec field (or config key) has a bad value; the message names the field."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
