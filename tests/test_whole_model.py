"""Whole-model counts (attnid.model): the layout, the symmetries the counts rest on, the judge."""

import math

import pytest
import torch

from attnid.hf import model_spec, stored_config
from attnid.hf.config_tables import shipped_row
from attnid.model.counting import count_model
from attnid.model.forward import logits
from attnid.model.grid import own_spec
from attnid.model.judge import measure_model, measure_model_weak
from attnid.model.layout import ModelLayout
from attnid.layer.spec import SpecError

SMALL = {"n_layers": 1}
CASES = {
    "layernorm_learned": {},
    "rmsnorm_swiglu_rope_gqa": {"attention": {"n_heads": 2, "n_kv_heads": 1, "rope_dims": 4}, "positions": "rope",
                                "norm": "rmsnorm", "norm_bias": False, "mlp": "swiglu"},
    "tied_biases_no_final_norm": {"attention": {"biases": "qkvo"}, "mlp_bias": True, "tied": True, "final_norm": False},
    "parallel_rope_vocab40": {"parallel": True, "vocab_size": 40, "positions": "rope", "attention": {"rope_dims": 2}},
    "post_ln_biases_one_block": {"norm_position": "post", "final_norm": False, "positions": "none",
                                 "attention": {"biases": "qkvo"}, "mlp_bias": True},
}  # fmt: skip


def _point(spec, seed=0):
    layout = ModelLayout(spec)
    theta = layout.init(torch.Generator().manual_seed(seed))
    tokens = torch.randint(spec.vocab_size, (3, spec.seq_len), generator=torch.Generator().manual_seed(seed + 1))
    return layout, theta, tokens


@pytest.mark.parametrize("name", sorted(CASES))
def test_count_agrees_with_jacobian(name):
    spec = own_spec({**SMALL, **CASES[name]})
    assert ModelLayout(spec).size == spec.n_params
    result = measure_model(spec, seed=0)
    counts = count_model(spec)
    assert sum(counts.breakdown.values()) == counts.unidentified
    assert result["measured"] == counts.unidentified == result["measured_half"]
    assert result["gap"] > 5


def test_too_few_positions_lose_rank():
    """The sizing rule matters: a tenth of the positions sees fewer directions than the count says."""
    spec = own_spec(SMALL)
    assert measure_model(spec, oversample=0.3, half=False)["measured"] > count_model(spec).unidentified


def test_weak_directions_move_with_eps():
    """With eps > 0 the residual scale is weakly identified: one direction, its singular value ~ eps."""
    spec = own_spec({**SMALL, "norm_eps": 1e-5})
    counts, row = count_model(spec), measure_model_weak(spec)
    assert (row["measured"], row["weak"]) == (counts.unidentified, counts.weakly_identified) == (counts.unidentified, 1)
    assert 5 < row["weak_move"] < 20  # ten times the eps, about ten times the singular value
    assert row["weak_sigma_max"] < 1e-3 * row["sigma_strong"]


def _stream_rotation(spec, theta, layout, seed=0):
    """theta with the residual stream rotated by a random orthogonal R (RMSNorm, untied, final norm)."""
    d = spec.d_model
    R = torch.linalg.qr(torch.randn(d, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))).Q
    out = theta.clone()
    w = layout.unflatten(out)
    a = layout.attention_layout
    for name in ("embed", "pos"):  # writers: rows -> rows R
        w[name].copy_(w[name] @ R)
    for layer in range(spec.n_layers):
        p = f"layers.{layer}"
        attn = a.unflatten(w[f"{p}.attn"])
        for name in ("W_Q", "W_K", "W_V"):  # readers: diag(g) W -> R^T diag(g) W, gains 1 after the change
            attn[name].copy_(torch.einsum("ed,hdk->hek", R.T @ torch.diag(w[f"{p}.norm_1.gain"]), attn[name]))
        attn["W_O"].copy_(attn["W_O"] @ R)
        w[f"{p}.norm_1.gain"].fill_(1.0)
        for name in ("up", "gate"):
            if f"{p}.mlp.{name}" in w:
                w[f"{p}.mlp.{name}"].copy_(R.T @ torch.diag(w[f"{p}.norm_2.gain"]) @ w[f"{p}.mlp.{name}"])
        w[f"{p}.norm_2.gain"].fill_(1.0)
        w[f"{p}.mlp.down"].copy_(w[f"{p}.mlp.down"] @ R)
    w["unembed"].copy_(R.T @ torch.diag(w["final_norm.gain"]) @ w["unembed"])
    w["final_norm.gain"].fill_(1.0)
    return out


def test_residual_rotation_and_centring_leave_logits_unchanged():
    """Two of the counted symmetries, applied exactly: a rotation of an RMSNorm model's stream (with the
    gains moved into the readers), and a LayerNorm model's writers shifted along the ones vector."""
    spec = own_spec({"norm": "rmsnorm", "norm_bias": False, "mlp": "swiglu"})
    layout, theta, tokens = _point(spec)
    moved = _stream_rotation(spec, theta, layout)
    assert (moved - theta).norm() > 1
    torch.testing.assert_close(
        logits(moved, tokens, spec, layout), logits(theta, tokens, spec, layout), rtol=0, atol=1e-10
    )
    spec = own_spec({})
    layout, theta, tokens = _point(spec)
    shifted = theta.clone()
    w = layout.unflatten(shifted)
    for name in ("embed", "pos", "layers.0.mlp.down", "layers.1.mlp.down"):
        w[name].add_(torch.randn(w[name].shape[0], 1, dtype=torch.float64))  # each row + c 1^T
    torch.testing.assert_close(
        logits(shifted, tokens, spec, layout), logits(theta, tokens, spec, layout), rtol=0, atol=1e-10
    )


def test_refused_by_name():
    with pytest.raises(SpecError, match="final_norm"):  # a post-LN model ends with its last block's norm
        count_model(own_spec({"norm_position": "post", "final_norm": True}))
    with pytest.raises(SpecError, match="final_norm"):  # layer 0's free MLP table and a raw-stream head
        count_model(own_spec({"parallel": True, "positions": "none", "final_norm": False}))
    with pytest.raises(SpecError, match="position_embedding_type"):  # relative positions: scores with parameters
        model_spec({**stored_config("bert_base"), "position_embedding_type": "relative_key"})
    with pytest.raises(SpecError, match="mlp_only_layers"):  # not a list of layer indices
        model_spec({**stored_config("qwen3_30b_a3b"), "mlp_only_layers": "0"})


def test_shipped_models():
    """Parameter totals match the published ones; the attention layers alone are a lower bound."""
    assert model_spec(stored_config("llama3_8b")).n_params == 8_030_261_248
    assert model_spec(stored_config("gpt2")).n_params == 124_439_808
    for name in ("gpt2", "llama3_8b", "qwen3_8b", "pythia_1.4b"):
        row = shipped_row(name)
        assert row["status"] == "ok" and row["attention_unidentified"] <= row["unidentified"]
    counts = count_model(model_spec(stored_config("qwen3_8b")))
    assert counts.weakly_identified > 0 and math.isclose(counts.ratio, counts.unidentified / counts.total)
    assert sum(counts.breakdown.values()) == counts.unidentified


def test_cli_whole_model_json(tmp_path):
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "attnid", "count", "--model", "gpt2", "--whole-model", "--json"],
        check=False,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    spec = model_spec(stored_config("gpt2"))
    assert result["whole_model"] == {**count_model(spec).to_dict(), "seq_len": 1024}
    assert result["attention_layers"]["total"] == 28_348_416 and result["whole_model"]["total"] == 124_439_808
    relative = tmp_path / "config.json"
    relative.write_text(json.dumps({**stored_config("bert_base"), "position_embedding_type": "relative_key"}))
    refused = subprocess.run(
        [sys.executable, "-m", "attnid", "count", "--hf-config", str(relative), "--whole-model"],
        check=False,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "position_embedding_type" in refused.stderr
    assert "Traceback" not in refused.stderr
