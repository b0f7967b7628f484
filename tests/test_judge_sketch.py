"""The sketched whole-model judge (attnid.model.judge: each position's V logits sketched to r Gaussian
combinations): the same rank as the full Jacobian where r = sketch_rows, never a smaller unidentified count
with fewer rows (rank S J <= rank J), and the same on a real class (the self-check's default)."""

import pytest
import torch

from attnid.model.forward import logits
from attnid.model.grid import own_spec
from attnid.model.judge import gaussian_sketch, measure_function, model_sizing, random_tokens, sketch_rows
from attnid.model.layout import ModelLayout

CASES = {
    "gpt_like": {"attention": {"biases": "qkvo"}, "mlp_bias": True, "tied": True, "vocab_size": 40},
    "llama_like": {"attention": {"n_kv_heads": 1, "rope_dims": 4}, "positions": "rope", "norm": "rmsnorm",
                   "norm_bias": False, "mlp": "swiglu", "vocab_size": 48},
}  # fmt: skip


def _measure(spec, r=None):
    layout = ModelLayout(spec)
    gen = torch.Generator().manual_seed(0)
    theta = layout.init(gen)
    tokens = random_tokens(spec, model_sizing(spec), gen)
    S = None if r is None else gaussian_sketch(tokens, spec.vocab_size, r)
    return measure_function(lambda th, tok: logits(th, tok, spec, layout), theta, tokens, sketch=S)


@pytest.mark.parametrize(  # GPT-like's full Jacobian takes a minute (opt-in, -m long)
    "name", [pytest.param(n, marks=pytest.mark.long) if n == "gpt_like" else n for n in sorted(CASES)]
)
def test_the_sketch_measures_what_the_full_jacobian_does(name):
    spec = own_spec(CASES[name])
    r = sketch_rows(spec)
    assert r < spec.vocab_size  # the sketch saves rows here
    full, sketched = _measure(spec), _measure(spec, r)
    assert sketched["measured"] == full["measured"] and sketched["measured_half"] == full["measured_half"]
    assert sketched["gap"] > 5 and full["gap"] > 5


def test_too_few_sketch_rows_can_only_add_unidentified_directions():
    spec = own_spec(CASES["llama_like"])
    full, one = _measure(spec), _measure(spec, 1)
    assert one["measured"] > full["measured"]


def test_no_sketch_where_it_would_not_save_rows():
    tokens = torch.zeros(2, 3, dtype=torch.long)
    assert gaussian_sketch(tokens, 16, 16) is None and gaussian_sketch(tokens, 16, 17) is None
    assert gaussian_sketch(tokens, 16, 4).shape == (2, 3, 16, 4)


@pytest.mark.selfcheck  # minutes: `pytest -m selfcheck` (the own-model cases above run by default)
def test_the_self_check_sketches_and_agrees_with_the_full_jacobian():
    """qwen3's default config, shrunk (V 32, r 16): the whole model's numbers with and without the sketch."""
    pytest.importorskip("transformers")
    from attnid.hf.check import check_config
    from attnid.hf.coverage import default_config

    cfg = default_config("qwen3")
    sketched, full = (check_config(cfg, whole=True, sketch=s)[-1] for s in (True, False))
    assert sketched["sketch_rows"] < full["sketch_rows"] == 32
    for key in ("verdict", "P", "count", "measured", "measured_half", "weak_measured"):
        assert sketched[key] == full[key], key
    assert sketched["verdict"] == "agree"
