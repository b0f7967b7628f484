"""The modern attention variants on this project's layer: each count against the Jacobian, and refusals by field.

Counts (attnid.layer.counting_variants) at d_model 16, 4 heads, 2 KV groups, full RoPE on heads of 4:
per-head q/k RMSNorm 34 (+6 weakly identified: one scale per head and per group), across heads 36
(+2), sinks with all biases 40 (48 without: sinks make the value bias visible), a norm's eps = 0
turns the weak directions into unidentified ones.
"""

import pytest

from attnid.layer.counting import count
from attnid.jacobian import measure
from attnid.layer.spec import AttentionSpec, SpecError

BASE = {"d_model": 16, "n_heads": 4, "n_kv_heads": 2, "rope_dims": 4, "causal": True}


@pytest.mark.parametrize(
    ("fields", "unidentified", "weak"),
    [
        ({"qk_norm": "rms_head"}, 34, 6),
        ({"qk_norm": "rms_head", "norm_eps": 0.0}, 40, 0),
        ({"qk_norm": "rms_all"}, 36, 2),
        ({"biases": "qkvo", "sinks": True}, 40, 0),
        ({"biases": "qkvo"}, 48, 0),
        ({"rope_dims": 2, "biases": "qkvo", "softcap": 2.0}, 52, 0),  # the unrotated key bias becomes visible
        ({"rope_dims": 2, "biases": "qkvo", "sliding_window": 3}, 56, 0),  # count-neutral
        ({"rope_dims": 2, "biases": "qkvo"}, 56, 0),
        ({"rope_dims": 2, "biases": "qkvo", "qk_norm": "layernorm_head"}, 147, 6),
        ({"rope_dims": 0, "n_kv_heads": 4, "biases": "qkvo", "alibi": True}, 160, 0),  # count-neutral
        ({"n_kv_heads": 4, "d_head_qk": 6, "d_head_v": 4, "rope_dims": 2, "kv_lora_rank": 8, "q_lora_rank": 8}, 202, 2),
    ],
)
def test_variant_count_is_what_the_jacobian_measures(fields, unidentified, weak):
    spec = AttentionSpec(**{**BASE, **fields})
    c = count(spec)
    assert (c.unidentified, c.weakly_identified) == (unidentified, weak)
    assert sum(c.breakdown.values()) == c.unidentified
    result = measure(spec, seed=1)[0]
    assert result["measured"] == unidentified
    assert result["gap"] > 5  # weak directions sit near 1e-7, rounding near 1e-16


def test_weak_directions_become_unidentified_at_eps_zero():
    weak = AttentionSpec(**BASE, qk_norm="rms_all")
    exact = AttentionSpec(**BASE, qk_norm="rms_all", norm_eps=0.0)
    assert count(exact).unidentified == count(weak).unidentified + count(weak).weakly_identified
    assert measure(exact, seed=2)[0]["measured"] == count(exact).unidentified


def test_variants_round_trip_through_label_row_and_config():
    spec = AttentionSpec(**BASE, biases="qkvo", sinks=True, sliding_window=5, softcap=30.0, qk_norm="rms_head")
    assert AttentionSpec.from_row(spec.to_row()) == spec
    assert AttentionSpec.from_config(spec.to_config()) == spec
    assert spec.label != AttentionSpec(**BASE, biases="qkvo").label
    assert AttentionSpec(**BASE).variants() == {}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"sliding_window": 1}, "sliding_window"),
        ({"sliding_window": 4, "causal": False}, "sliding_window"),
        ({"alibi": True}, "alibi"),  # with RoPE
        ({"qk_norm": "l2"}, "qk_norm"),
        ({"qk_norm": "rms_head", "d_head_qk": 32, "rope_dims": 0}, "qk_norm"),  # head wider than d_model
        ({"softcap": -1.0}, "softcap"),
        ({"q_lora_rank": 4}, "q_lora_rank"),
        ({"kv_lora_rank": 8}, "n_kv_heads"),  # latent attention has a key/value per head
        ({"kv_lora_rank": 8, "n_kv_heads": 4, "biases": "q"}, "biases"),
    ],
)
def test_unmodelled_combinations_are_refused_by_field(fields, field):
    with pytest.raises(SpecError) as err:
        AttentionSpec(**{**BASE, **fields})
    assert err.value.field == field
