"""Differential attention (`diff_lambda_init`: attnid.layer.differential, count in attnid.layer.counting_gates; DiffLlama).

Each score map is an ordinary GQA query/key pair (plain query_key and key_bias); the two value groups c and c + G/2
form one value of width 2v read through a gain-free RMSNorm, which leaves O(2v) of GL(2v): (G/2) v (2v - 1), shows
the value bias, and scales each paired value (weakly for eps > 0: G/2); lambda = exp(l_q1 . l_k1) - exp(l_q2 . l_k2)
+ lambda_init leaves 4k - 1 of the four vectors free. Measured against the Jacobian of this project's layer at
random shapes (MHA and GQA, every bias subset, RoPE, k > d), with eps 0 and eps > 0; the layer computes what
DiffLlamaAttention computes; the real module's Jacobian agrees with the count.
"""

import pytest
import torch

from attnid.layer.forward import attention
from attnid.layer.counting import count
from attnid.errors import SpecError
from attnid.float64 import KeepFloat64
from attnid.hf.check import check_config
from attnid.hf.coverage import counted, default_config
from attnid.hf.mapping import MAPPERS, REFUSED, model_spec
from attnid.hf.mapping.names import rope_perm
from attnid.hf.refusals import REASONS
from attnid.jacobian import measure
from attnid.layer.layout import Layout
from attnid.model.counting import count_model
from attnid.layer.spec import AttentionSpec
from test_output_gate import random_shapes


def differential(shape: dict) -> dict:
    """A shape of tests/test_output_gate.py made one for differential attention: twice its groups (G even), two
    more model dims, value heads with 2 v <= d."""
    d, G, r = shape["d_model"] + 2, 2 * shape["n_kv_heads"], shape["n_heads"] // shape["n_kv_heads"]
    return {**shape, "d_model": d, "n_heads": G * r, "n_kv_heads": G, "d_head_v": min(shape["d_head_v"], d // 2)}


SHAPES = [
    {"d_model": 8, "n_heads": 4, "n_kv_heads": 2, "d_head_qk": 2, "rope_dims": 2, "biases": "qkvo", "causal": True},
    {"d_model": 6, "n_heads": 4, "n_kv_heads": 4, "d_head_qk": 7, "d_head_v": 2, "rope_dims": 2, "biases": "vo",
     "causal": True},
] + [differential(s) for s in random_shapes(seed=5, n=3)]  # fmt: skip


# eps > 0 at 1e-3: the weak scale directions' singular values scale with eps (at 1e-6 one sits 2.3 decades above
# the rank tolerance, d8_h2_g2_k3_v4_bqv); every count is the same for any eps > 0
@pytest.mark.parametrize("eps", [0.0, 1e-3])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: AttentionSpec(**s).label)
def test_the_differential_count_is_the_measured_rank_deficiency(shape, eps):
    spec = AttentionSpec(**shape, diff_lambda_init=0.2, norm_eps=eps)
    c = count(spec)
    G, v, k = spec.n_kv_heads, spec.d_head_v, spec.d_head_qk
    assert c.breakdown["value_output"] == G // 2 * v * (2 * v - 1) and c.breakdown["lambda"] == 4 * k - 1
    assert (c.breakdown.get("norm_scale", 0), c.weakly_identified) == ((G // 2, 0) if eps == 0 else (0, G // 2))
    result = measure(spec, seed=1)[0]
    assert result["gap"] > 6 and result["margin"] > 3, result  # decided: far from the tolerance
    assert result["measured"] == c.unidentified, (spec.label, c.breakdown)


def test_the_plain_rule_would_be_wrong():
    """Measured: plain GQA's value-output fibre G v^2 and free value bias are not differential attention's."""
    shape = {"d_model": 8, "n_heads": 4, "n_kv_heads": 2, "d_head_qk": 2, "rope_dims": 2, "biases": "vo",
             "causal": True}  # fmt: skip
    spec = AttentionSpec(**shape, diff_lambda_init=0.5)
    measured = measure(spec, seed=0)[0]["measured"]
    plain = count(AttentionSpec(**shape)).breakdown  # query_key 4, value_output 8, value_bias 4
    assert measured == count(spec).unidentified == 4 + 6 + 7 != sum(plain.values()) + 7


def test_the_layer_computes_diffllama_attention():
    """DiffLlamaAttention (GQA, biases, RoPE) at its own weights, written onto the layout, gives the layer's output."""
    from transformers import DiffLlamaConfig
    from transformers.models.diffllama.modeling_diffllama import DiffLlamaAttention, DiffLlamaRotaryEmbedding

    config = DiffLlamaConfig(hidden_size=8, num_attention_heads=4, num_key_value_heads=2, head_dim=2,
                             attention_bias=True, rms_norm_eps=1e-5)  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    real = DiffLlamaAttention(config, layer_idx=3).to(torch.float64)
    for p in real.parameters():
        torch.nn.init.normal_(p, std=0.5)
    spec = model_spec({**config.to_dict(), "num_hidden_layers": 4}).layer_specs[3].attention
    H, G, k, d = spec.n_heads, spec.n_kv_heads, spec.d_head_qk, spec.d_model
    perm = list(rope_perm(k, spec.rope_dims))
    wt = {n: p.detach() for n, p in real.named_parameters()}
    w = {
        "W_Q": wt["q_proj.weight"].T.reshape(d, H, k)[..., perm].transpose(0, 1),
        "b_Q": wt["q_proj.bias"].reshape(H, k)[:, perm],
        "W_K": wt["k_proj.weight"].T.reshape(d, G, k)[..., perm].transpose(0, 1),
        "b_K": wt["k_proj.bias"].reshape(G, k)[:, perm],
        "W_V": wt["v_proj.weight"].T.reshape(d, G, k).transpose(0, 1), "b_V": wt["v_proj.bias"].reshape(G, k),
        "W_O": wt["o_proj.weight"].T.reshape(H, k, d), "b_O": wt["o_proj.bias"],
        "lambda": torch.stack([wt[f"lambda_{n}"] for n in ("q1", "k1", "q2", "k2")]),
    }  # fmt: skip
    x = torch.randn(2, 5, d, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    mask = torch.full((5, 5), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    with KeepFloat64():
        rotary = DiffLlamaRotaryEmbedding(config).to(torch.float64)
        out = real(x, rotary(x, torch.arange(5)[None].expand(2, -1)), attention_mask=mask)[0]
    assert torch.allclose(attention(Layout(spec).flatten(w), x, spec), out, atol=1e-12)


def test_bad_differential_specs_are_refused_by_field():
    with pytest.raises(SpecError, match="^n_kv_heads:"):
        AttentionSpec(d_model=8, n_heads=3, n_kv_heads=3, d_head_qk=2, diff_lambda_init=0.2)
    with pytest.raises(SpecError, match="^d_head_v:"):
        AttentionSpec(d_model=4, n_heads=2, d_head_v=3, diff_lambda_init=0.2)
    with pytest.raises(SpecError, match="^diff_lambda_init:"):
        AttentionSpec(d_model=4, n_heads=2, diff_lambda_init=1.0)
    with pytest.raises(SpecError, match="^sinks:"):
        AttentionSpec(d_model=4, n_heads=2, diff_lambda_init=0.2, sinks=True)
    spec = AttentionSpec(d_model=4, n_heads=2, diff_lambda_init=0.2)
    assert spec.label.endswith("_diff0.2") and AttentionSpec.from_row(spec.to_row()) == spec
    assert spec.block_shapes()["lambda"] == (4, 2) and spec.has_norm


def test_diffllama_is_mapped_layers_only():
    assert "diffllama" in MAPPERS and "diffllama" not in REFUSED and "diffllama" not in REASONS
    spec = model_spec(default_config("diffllama"))
    assert [round(x.attention.diff_lambda_init, 4) for x in spec.layer_specs[:2]] == [0.2, 0.3555]
    with pytest.raises(SpecError, match="^model_type:"):
        count_model(spec)
    assert counted("diffllama")[0] == "layers only"


@pytest.mark.slow  # about 5 s
def test_the_real_diffllama_module_agrees_with_the_count():
    """The tiny DiffLlama of two layers, GQA and biases: each layer's Jacobian against the count."""
    torch.set_num_threads(1)
    cfg = {**default_config("diffllama"), "num_hidden_layers": 2, "num_key_value_heads": 8, "attention_bias": True}
    rows = check_config(cfg, whole=False)
    assert len(rows) == 2
    for row in rows:
        assert row["verdict"] == "agree" and row["measured"] == row["count"] and row["P"] == row["P_spec"], row
