"""The attention layer against a loop-per-head reference and against torch's scaled_dot_product_attention."""

import math

import pytest
import torch
import torch.nn.functional as F

from attnid import AttentionSpec, Layout
from attnid.layer.forward import AttentionLayer, attention


def reference(theta, x, spec):
    """Straightforward per-sequence, per-head loops (row convention, see attnid.layer.spec)."""
    w = Layout(spec).unflatten(theta)
    d, k, p = spec.d_model, spec.d_head_qk, spec.rope_dims
    B, T, _ = x.shape
    out = torch.zeros(B, T, d, dtype=x.dtype)
    for b in range(B):
        X = x[b]
        y = torch.zeros(T, d, dtype=x.dtype)
        for h in range(spec.n_heads):
            g = h // (spec.n_heads // spec.n_kv_heads)
            Q = X @ w["W_Q"][h] + (w["b_Q"][h] if "b_Q" in w else 0)
            K = X @ w["W_K"][g] + (w["b_K"][g] if "b_K" in w else 0)
            V = X @ w["W_V"][g] + (w["b_V"][g] if "b_V" in w else 0)
            Q, K = Q.clone(), K.clone()
            for t in range(T):  # rotate plane i of position t by t * base^(-2i/p)
                for i in range(p // 2):
                    angle = t * spec.rope_base ** (-2 * i / p)
                    c, s = math.cos(angle), math.sin(angle)
                    rot = torch.tensor([[c, s], [-s, c]], dtype=x.dtype)  # row vector times R^T
                    Q[t, 2 * i : 2 * i + 2] = Q[t, 2 * i : 2 * i + 2] @ rot
                    K[t, 2 * i : 2 * i + 2] = K[t, 2 * i : 2 * i + 2] @ rot
            scores = Q @ K.T / math.sqrt(k)
            for t in range(T):
                for s in range(T):
                    if spec.causal and s > t:
                        scores[t, s] = -math.inf
            y = y + torch.softmax(scores, dim=-1) @ V @ w["W_O"][h]
        out[b] = y + w.get("b_O", 0)
    return out


SPECS = [
    AttentionSpec(8, 2),  # MHA
    AttentionSpec(8, 4, n_kv_heads=2, biases="qkvo"),  # GQA, every bias
    AttentionSpec(8, 4, n_kv_heads=1, rope_dims=2, causal=True),  # MQA, partial RoPE, causal
    AttentionSpec(6, 3, d_head_qk=4, d_head_v=5, rope_dims=4, biases="kv"),  # d_k != d_v, full RoPE, H d_k != d
    AttentionSpec(3, 1, d_head_qk=6, d_head_v=4, rope_dims=2, biases="qo", causal=True, rope_base=100.0),  # heads above d_model
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.label)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matches_reference(spec, dtype):
    gen = torch.Generator().manual_seed(0)
    theta = Layout(spec).init(gen, dtype=dtype)
    x = torch.randn(2, 5, spec.d_model, generator=gen, dtype=dtype)
    got, want = attention(theta, x, spec), reference(theta, x, spec)
    assert got.dtype == dtype and got.shape == x.shape
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    torch.testing.assert_close(attention(theta, x[1], spec), got[1], rtol=tol, atol=tol)  # unbatched (T, d)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("groups", [4, 2, 1])
def test_matches_sdpa(causal, groups):
    """No RoPE: Q, K, V per head through torch's fused attention, then W_O and b_O."""
    spec = AttentionSpec(8, 4, n_kv_heads=groups, d_head_v=3, biases="qkvo", causal=causal)
    gen = torch.Generator().manual_seed(1)
    theta = Layout(spec).init(gen, dtype=torch.float64)
    w = Layout(spec).unflatten(theta)
    x = torch.randn(3, 6, 8, generator=gen, dtype=torch.float64)
    q = torch.einsum("btd,hdk->bhtk", x, w["W_Q"]) + w["b_Q"][:, None]
    k = torch.einsum("btd,gdk->bgtk", x, w["W_K"]) + w["b_K"][:, None]
    v = torch.einsum("btd,gdv->bgtv", x, w["W_V"]) + w["b_V"][:, None]
    heads = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=groups < 4)  # (B, H, T, v)
    want = torch.einsum("bhtv,hvd->btd", heads, w["W_O"]) + w["b_O"]
    torch.testing.assert_close(attention(theta, x, spec), want, rtol=1e-12, atol=1e-12)


def test_rope_is_relative():
    """RoPE scores depend on positions only through their difference: shifting every position is a no-op."""
    from attnid.layer.forward import apply_rope, rope_angles

    spec = AttentionSpec(4, 1, rope_dims=4)
    gen = torch.Generator().manual_seed(2)
    q, k = torch.randn(5, 4, generator=gen, dtype=torch.float64), torch.randn(5, 4, generator=gen, dtype=torch.float64)
    angles = rope_angles(spec, 8, torch.float64, "cpu")  # (8, 2)
    at = lambda a: apply_rope(q, a) @ apply_rope(k, a).T
    torch.testing.assert_close(at(angles[3:]), at(angles[:5]))
    assert not torch.allclose(at(angles[:5]), q @ k.T)  # and it does rotate


def test_module_and_gradients():
    spec = AttentionSpec(8, 2, n_kv_heads=1, rope_dims=2, biases="qkvo")
    layer = AttentionLayer(spec, torch.Generator().manual_seed(3), dtype=torch.float64)
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    layer(x).square().sum().backward()
    assert layer.theta.grad is not None and layer.theta.grad.shape == (Layout(spec).size,)
    assert set(layer.blocks()) == {"W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O"}
    assert torch.autograd.gradcheck(lambda t: attention(t, x[:1, :3], spec), (layer.theta.detach().clone().requires_grad_(),))


def test_bad_input_width():
    spec = AttentionSpec(8, 2)
    with pytest.raises(ValueError, match="d_model=8"):
        attention(Layout(spec).init(), torch.zeros(1, 3, 5, dtype=torch.float64), spec)
