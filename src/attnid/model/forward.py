"""The whole model as a pure float64 function: logits = f(theta, tokens) (maths in `attnid.model.spec`).

Embedding rows are read by indexing (a gather), so every row's gradient is exact; there is no
padding row whose gradient is zeroed. `torch.func` can differentiate and batch `logits`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..attention import attention
from .embeddings import add_token_type, mlm_transform
from .layers import MLPSpec
from .layout import ModelLayout
from .moe import MoESpec, moe_forward
from .spec import ModelSpec


def norm(x: torch.Tensor, w: dict, name: str, spec: ModelSpec, eps: float | None = None) -> torch.Tensor:
    """LayerNorm or RMSNorm of x (..., d) over its last dim, with the gain (and bias) block `name`."""
    eps = spec.norm_eps if eps is None else eps
    if spec.norm == "layernorm":
        x = x - x.mean(-1, keepdim=True)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    gain = w[f"{name}.gain"]
    y = y * (1.0 + gain if spec.gemma_gain else gain)
    if f"{name}.bias" in w:
        y = y + w[f"{name}.bias"]
    return y


def mlp(x: torch.Tensor, w: dict, prefix: str, spec: MLPSpec) -> torch.Tensor:
    """act(x W_up + b) W_down + b, or the gated (act(x W_gate) * x W_up) W_down: (..., d) -> (..., d)."""
    if isinstance(spec, MoESpec):
        return moe_forward(x, w, prefix, spec)

    def linear(z, name):
        out = z @ w[f"{prefix}.{name}"]
        bias = w.get(f"{prefix}.{name}_bias")
        return out if bias is None else out + bias

    up = linear(x, "up")  # (..., m)
    if spec.kind == "relu":
        hidden = torch.relu(up)
    elif spec.kind == "gelu":
        hidden = F.gelu(up)
    else:
        gate = linear(x, "gate")
        hidden = (F.silu(gate) if spec.kind == "swiglu" else F.gelu(gate, approximate="tanh")) * up
    return linear(hidden, "down")


def logits(
    theta: torch.Tensor, tokens: torch.Tensor, spec: ModelSpec, layout: ModelLayout | None = None
) -> torch.Tensor:
    """Logits (B, T, V) of token ids (B, T) (or (T,) -> (T, V)) for flat parameters theta (P,)."""
    layout = layout or ModelLayout(spec)
    w = layout.unflatten(theta)
    squeeze = tokens.dim() == 1
    if squeeze:
        tokens = tokens[None]
    T = tokens.shape[1]
    if T > spec.seq_len:
        raise ValueError(f"sequence length {T} exceeds seq_len={spec.seq_len}")
    h = w["embed"][tokens] * spec.embed_scale  # (B, T, d)
    if "pos" in w:
        h = h + w["pos"][:T]
    h = add_token_type(h, w)  # token_type_ids all 0
    if spec.embedding_norm:
        h = norm(h, w, "embed_norm", spec)
    for i, layer in enumerate(spec.layer_specs):
        p = f"layers.{i}"

        def attn(x, p=p, a=layer.attention, a_layout=layout.attention_layouts[i]):
            return attention(w[f"{p}.attn"], x, a, a_layout)

        def ff(x, p=p, m=layer.mlp):
            return mlp(x, w, f"{p}.mlp", m)

        if spec.norm_position == "post":
            h = norm(h + attn(h), w, f"{p}.norm_1", spec)
            h = norm(h + ff(h), w, f"{p}.norm_2", spec)
        elif spec.parallel:
            a = norm(h, w, f"{p}.norm_1", spec)
            m = a if spec.shared_norm else norm(h, w, f"{p}.norm_2", spec)
            h = h + attn(a) + ff(m)
        elif spec.output_norms:  # Gemma-2/3: each sublayer's output normed before the residual add
            h = h + norm(attn(norm(h, w, f"{p}.norm_1", spec)), w, f"{p}.out_norm_1", spec)
            h = h + norm(ff(norm(h, w, f"{p}.norm_2", spec)), w, f"{p}.out_norm_2", spec)
        else:
            h = h + attn(norm(h, w, f"{p}.norm_1", spec))
            h = h + ff(norm(h, w, f"{p}.norm_2", spec))
    if spec.final_norm:
        h = norm(h, w, "final_norm", spec)
    h = mlm_transform(h, w, spec, norm)
    out = h @ (w["embed"].T if spec.tied else w["unembed"])  # (B, T, V)
    if "unembed_bias" in w:
        out = out + w["unembed_bias"]
    return out[0] if squeeze else out
