"""One self-attention layer built from an :class:`AttentionSpec`.

Two faces of the same computation:

* :func:`attention` — a pure function ``Y = f(theta, X)`` of one flat parameter vector
  (layout in :mod:`attnid.layer.layout`), which `torch.func` can differentiate and batch;
* :class:`AttentionLayer` — a ``torch.nn.Module`` holding that vector as one parameter.

Maths (row convention), for query head h in KV group g = h // (H/G):

    Q_h = X W_Q^h + b_Q^h,  K_g = X W_K^g + b_K^g,  V_g = X W_V^g + b_V^g
    S_h = rope(Q_h) rope(K_g)^T / sqrt(d_k)           (masked above the diagonal if causal)
    Y   = sum_h softmax(S_h) V_g W_O^h + b_O

Cross-attention (spec.d_cross > 0): K_g and V_g read the encoder's states C (S, d_cross), given as `context`, in
place of X; no mask, no positions.

RoPE rotates the first p dims of each query/key in planes (0,1), (2,3), ... by angle
t * omega_i, omega_i = base^(-2i/p), at position t (Su et al. 2021, "RoFormer", eq. 34,
interleaved form). Positions default to 0..T-1; any position ids may be given (the scores depend
on the differences t_query - t_key only), and explicit frequencies may replace base^(-2i/p)
(to test what happens when the frequency hypotheses fail).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .differential import differential_heads
from .layout import Layout
from .spec import AttentionSpec
from .spec_variants import QK_NORMS_AFTER_ROPE
from .variants import (
    adjust_scores,
    attention_weights,
    gate_heads,
    latent_qkv,
    normalize_heads,
    normalize_qk,
    normalize_values,
    temper_queries,
)


def rope_frequencies(spec: AttentionSpec) -> torch.Tensor:
    """omega_i = base^(-2i/p), i = 0..p/2-1: (p/2,) float64."""
    p = spec.rope_dims
    return spec.rope_base ** (-torch.arange(0, p, 2, dtype=torch.float64) / p)


def rope_angles(spec: AttentionSpec, positions, dtype, device, frequencies=None) -> torch.Tensor:
    """Angles t * omega_i of the p/2 rotation planes: (..., T, p/2).

    positions: an int T (positions 0..T-1) or position ids (..., T); frequencies: (p/2,) or None
    for base^(-2i/p). Computed in float64, then cast.
    """
    if isinstance(positions, int):
        positions = torch.arange(positions, dtype=torch.float64)
    freqs = rope_frequencies(spec) if frequencies is None else torch.as_tensor(frequencies, dtype=torch.float64)
    freqs = freqs.to(positions.device)
    angles = positions.to(torch.float64)[..., :, None] * freqs  # (..., T, p/2)
    return angles.to(dtype=dtype, device=device)


def apply_rope(z: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate the first 2*angles.shape[-1] dims of z (..., T, k) pairwise by angles (..., T, p/2)."""
    p = 2 * angles.shape[-1]
    if p == 0:
        return z
    cos, sin = angles.cos(), angles.sin()  # (T, p/2)
    a, b = z[..., 0:p:2], z[..., 1:p:2]  # (..., T, p/2)
    rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)  # (..., T, p)
    return torch.cat((rotated, z[..., p:]), dim=-1)


def attention(
    theta: torch.Tensor,
    x: torch.Tensor,
    spec: AttentionSpec,
    layout: Layout | None = None,
    positions: torch.Tensor | None = None,
    frequencies: torch.Tensor | None = None,
    last_only: bool = False,
    context: torch.Tensor | None = None,
) -> torch.Tensor:
    """Y = f(theta, X) for flat parameters theta (P,) and inputs x (B, T, d) or (T, d); returns x's shape.
    context: the encoder's states C (B, S, d_cross) or (S, d_cross) that a cross-attention spec's keys and values read.

    positions: RoPE position ids (T,) or (B, T) (default 0..T-1); frequencies: (p/2,) RoPE
    frequencies replacing base^(-2i/p). Both are ignored without RoPE. last_only: Y[..., -1:, :] only,
    computing the last query's row alone (it sees every key, causal or not); specs whose scores need
    positions (ALiBi, a sliding window), sinks or latent attention compute every row and keep the last.
    """
    if last_only and (spec.alibi or spec.sliding_window or spec.sinks or spec.kv_lora_rank):
        return attention(theta, x, spec, layout, positions, frequencies)[..., -1:, :]
    layout = layout or Layout(spec)
    w = layout.unflatten(theta)
    squeeze = x.dim() == 2
    if squeeze:
        x = x[None]
    if x.shape[-1] != spec.d_model:
        raise ValueError(f"input has last dimension {x.shape[-1]}, spec {spec.label} needs d_model={spec.d_model}")
    T = x.shape[1]
    if spec.index_topk and T > spec.index_topk:  # the indexer would drop keys: not modelled (attnid.layer.spec_latent)
        raise ValueError(f"{T} positions: the layer models sequences of at most index_topk = {spec.index_topk}")
    kv_in = _keys_input(x, context[None] if squeeze and context is not None else context, spec)  # (B, S, c)

    gate_input = x  # what an output gate reads
    if spec.kv_lora_rank:  # multi-head latent attention: its own projections, one key/value per head
        q, k, v, gate_input = latent_qkv(x, w, spec)
    else:
        q = torch.einsum("btd,hdk->bhtk", x[:, -1:] if last_only else x, w["W_Q"])  # (B, H, T or 1, k)
        k = torch.einsum("bsd,gdk->bgsk", kv_in, w["W_K"])  # (B, G, S, k); S = T for self-attention
        v = torch.einsum("bsd,gdv->bgsv", kv_in, w["W_V"])  # (B, G, S, v)
    if "b_Q" in w:
        q = q + w["b_Q"][:, None, :]
    if "b_K" in w:
        k = k + w["b_K"][:, None, :]
    if "b_V" in w:
        v = v + w["b_V"][:, None, :]
    after_rope = spec.qk_norm in QK_NORMS_AFTER_ROPE
    if not after_rope:
        q, k = normalize_qk(q, k, w, spec)  # q/k norms (attnid.layer.variants), before RoPE
    if spec.rope_dims:
        angles = rope_angles(spec, T if positions is None else positions, x.dtype, x.device, frequencies)
        if angles.dim() == 3:  # per-sequence positions (B, T, p/2): broadcast over the heads
            angles = angles[:, None]
        q, k = apply_rope(q, angles[..., -1:, :] if last_only else angles), apply_rope(k, angles)
    if after_rope:
        q, k = normalize_qk(q, k, w, spec)
    q, v = temper_queries(q, spec, T), normalize_values(v, spec)  # Llama-4's query temperature, Gemma-4's v_norm
    groups = torch.arange(spec.n_heads, device=x.device) // spec.group_size  # (H,) KV group of each head
    # share each group's key/value; also under MHA, where the gather is a copy: skipping it changes the strides the
    # score product sees and moves rounding-level results (the symmetry checks' plain-gradient overlaps)
    k, v = k[:, groups], v[:, groups]  # (B, H, T, k), (B, H, T, v)

    scores = q @ k.transpose(-1, -2) / math.sqrt(spec.d_head_qk)  # (B, H, T or 1, S)
    scores = adjust_scores(scores, spec)  # softcapping, ALiBi, sliding window
    if spec.causal and not last_only:
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    weights = attention_weights(scores, w, spec)  # (B, H, T, S): softmax, with sinks if any
    heads = differential_heads(weights, v, w, spec) if spec.diff_lambda_init else weights @ v  # (B, H, T, v)
    heads = normalize_heads(heads, w, spec)  # BitNet's norm across the heads' outputs
    heads = gate_heads(heads, gate_input, w, spec)  # a sigmoid gate of x on the heads' outputs (Qwen3-Next, LFM3)
    y = torch.einsum("bhtv,hvd->btd", heads, w["W_O"])  # (B, T, d)
    if "b_O" in w:
        y = y + w["b_O"]
    return y[0] if squeeze else y


def _keys_input(x: torch.Tensor, context: torch.Tensor | None, spec: AttentionSpec) -> torch.Tensor:
    """What the keys and values read: x (B, T, d), or for cross-attention the encoder's states (B, S, d_cross)."""
    if not spec.d_cross:
        if context is not None:
            raise ValueError(f"spec {spec.label} is self-attention: its keys and values read x, not a context")
        return x
    if context is None or context.dim() != 3 or context.shape[0] != x.shape[0] or context.shape[-1] != spec.d_cross:
        shape = None if context is None else tuple(context.shape)
        raise ValueError(f"spec {spec.label} is cross-attention: give context (B, S, {spec.d_cross}), got {shape}")
    return context


class AttentionLayer(nn.Module):
    """`attention` as a module: one flat parameter `theta` laid out by `Layout(spec)`."""

    def __init__(self, spec: AttentionSpec, generator: torch.Generator | None = None, dtype=torch.float32, device=None):
        super().__init__()
        self.spec = spec
        self.layout = Layout(spec)
        self.theta = nn.Parameter(self.layout.init(generator, dtype=dtype, device=device))

    def blocks(self) -> dict[str, torch.Tensor]:
        """Named views of the parameters (W_Q, b_Q, ...), shapes as in `attnid.layer.layout`."""
        return self.layout.unflatten(self.theta)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None) -> torch.Tensor:
        return attention(self.theta, x, self.spec, self.layout, context=context)

    def extra_repr(self) -> str:
        return f"{self.spec.label}, P={self.layout.size}"
