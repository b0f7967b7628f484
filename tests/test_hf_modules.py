"""Real `transformers` attention modules, shrunk from stored published configs, measured in float64.

Each module's parameter count must equal the mapped spec's P, and P - rank of its Jacobian must equal
the count (weakly identified directions measured against an eps = 0 twin at the same weights).
"""

import dataclasses

import pandas as pd
import pytest
import torch

from attnid.hf import model_spec, stored_config, verify
from attnid.hf.modules import build_module, shrink
from attnid.hf.verify import _rank, verify_module
from attnid.jacobian import input_sizing


@pytest.mark.parametrize(
    ("name", "overrides", "count", "weak"),
    [
        ("llama3_8b", {"attention_bias": True}, 48, 0),  # attention_bias also biases o_proj
        ("qwen3_8b", {}, 34, 6),  # per-head q/k RMSNorm, one gain for all heads
        ("gpt_oss_20b", {}, 84, 0),  # sinks and a sliding window (layer 0), all biases, head size 6 of d 16
        ("pythia_1.4b", {}, 192, 0),  # partial rotary via rotary_pct
    ],
)
def test_real_module_agrees_with_the_count(name, overrides, count, weak):
    row = verify_module(shrink({**stored_config(name), **overrides}), seed=0, name=name)
    assert row["P"] == row["P_spec"]
    assert (row["count"], row["weakly_count"]) == (count, weak)
    assert row["measured"] == count and row["weakly_measured"] == weak, row
    assert row["gap"] > 5
    if weak:  # the weak directions sit far above rounding and far below the genuine singular values
        assert 1e-10 < row["weak_sigma_min"] <= row["weak_sigma_max"] < 1e-5


def test_float32_casts_inside_the_library_spoil_the_rank():
    cfg = shrink({**stored_config("llama3_8b"), "attention_bias": True})
    real = build_module(cfg, seed=0)
    sizing = input_sizing(model_spec(cfg).layer_specs[0].attention)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(sizing.batch, sizing.seq_len, 16, dtype=torch.float64, generator=gen)
    honest = real.n_params - _rank(real, real.theta, x)[0]["rank"]
    real.keep_float64 = False
    cast = real.n_params - _rank(real, real.theta, x)[0]["rank"]
    assert honest == 48
    assert cast != honest  # softmax(dtype=float32) rounds the scores at 1e-7: the rank reads wrong


def test_shrink_keeps_the_flags():
    small = shrink(stored_config("gemma2_9b"))
    assert small["hidden_size"] == 16 and small["attn_logit_softcapping"] == 50.0
    assert small["head_dim"] != small["hidden_size"] // small["num_attention_heads"]  # Gemma's head size trap kept
    assert small["sliding_window"] == 3
    assert shrink(stored_config("falcon_7b"))["multi_query"] is True
    assert shrink(stored_config("mistral_7b"))["num_key_value_heads"] == 2  # GQA stays GQA


def test_a_mapping_that_misses_a_bias_is_caught_before_any_rank(monkeypatch):
    cfg = shrink(stored_config("qwen2_7b"))
    spec = model_spec(cfg)
    wrong = spec.replace(attention=dataclasses.replace(spec.attention, biases=""), layers=())  # Qwen2 "without" biases
    monkeypatch.setattr(verify, "model_spec", lambda _: wrong)
    row = verify.verify_module(cfg, name="qwen2 without biases")
    assert row["P"] != row["P_spec"] and not row["agree"] and row["error"] == "P"
    assert "qwen2 without biases" in verify.module_disagreements(pd.DataFrame([row]))


def test_keep_float64_turns_every_downcast_into_float64():
    from attnid.float64 import KeepFloat64

    x = torch.randn(3, 4, dtype=torch.float64)
    with KeepFloat64():
        outs = [
            torch.nn.functional.softmax(x, dim=-1, dtype=torch.float32),
            x.to(torch.float32),
            x.float(),
            x.to("cpu", torch.bfloat16),
            x.type(torch.float16),
        ]
    assert all(o.dtype == torch.float64 for o in outs)
    assert torch.equal(outs[1], x)  # no rounding on the way


def test_every_family_names_a_real_attention_class_of_a_mapped_type():
    """REAL_ATTENTION (one entry per type, in its family's module): the class and rotary exist in the installed
    `transformers`, the type is mapped, and a type without one is refused by name rather than built wrongly."""
    import importlib

    from attnid.hf.mapping import MAPPERS, REAL_ATTENTION

    assert len(REAL_ATTENTION) >= 21
    for mt, real in REAL_ATTENTION.items():
        assert mt in MAPPERS, mt
        lib = importlib.import_module(f"transformers.models.{real.package}.modeling_{real.package}")
        assert hasattr(lib, real.attention) and (real.rotary is None or hasattr(lib, real.rotary)), mt
    with pytest.raises(ValueError, match="no real module known for 'opt'"):
        build_module({**stored_config("llama3_8b"), "model_type": "opt"})
