"""Whole real `transformers` language models against the whole-model count (attnid.model.real, .grid)."""

import pytest

pytest.importorskip("transformers")

from attnid.gauge.cases import real_case, tiny_spec
from attnid.model.real import TINY, build_real


@pytest.mark.parametrize("name", sorted(TINY))
def test_parameters_match_the_spec(name):
    """The mapped spec has exactly the real model's parameters (a missed bias or gain fails here);
    tied weights appear once, and no embedding keeps a padding row."""
    real = build_real(name)
    assert real.theta.numel() == tiny_spec(name).n_params
    assert all(getattr(m, "padding_idx", None) is None for m in real.module.modules())


@pytest.mark.parametrize("name", ["gpt2", "llama_tied"])
def test_real_model_agrees(name):
    """Measured at the config's eps, on half the sequences, and at eps = 0 for the weak directions."""
    row = real_case(name, other_seed=False)
    assert row["agree"], row
    assert row["weak_count"] == row["weak_measured"] == 1  # the residual stream's scale
