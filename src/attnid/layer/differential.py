"""Differential attention (Ye et al. 2024, "Differential Transformer"; `transformers`' DiffLlamaAttention) as
tensor code, called by :func:`attnid.layer.forward.attention` when the spec's diff_lambda_init is set (fields in
`attnid.layer.spec_gates`, count in `attnid.layer.counting_gates`).

Query heads h and h + H/2 (key groups c = h // r and c + G/2) form differential head h < H/2:

    D_h    = A_h - lambda A_{h+H/2}                   (T, T), A = softmax of each query head's scores
    lambda = exp(l_q1 . l_k1) - exp(l_q2 . l_k2) + lambda_init       (one per layer)
    z_h    = D_h [V_c, V_{c+G/2}]                      (T, 2v): the two value groups side by side
    o_h    = (1 - lambda_init) z_h / sqrt(mean(z_h^2) + eps)     (RMSNorm over 2v dims, no gain)

and o_h is read by [W_O^{2h}; W_O^{2h+1}] (DiffLlama's o_proj columns 2hv..2(h+1)v).
"""

from __future__ import annotations

import torch


def differential_lambda(w: dict, spec) -> torch.Tensor:
    """lambda = exp(l_q1 . l_k1) - exp(l_q2 . l_k2) + lambda_init: a 0-dim tensor."""
    lam = w["lambda"]  # (4, k): l_q1, l_k1, l_q2, l_k2
    return torch.exp(lam[0] @ lam[1]) - torch.exp(lam[2] @ lam[3]) + spec.diff_lambda_init


def differential_heads(weights: torch.Tensor, v: torch.Tensor, w: dict, spec) -> torch.Tensor:
    """The heads' outputs (B, H, T, v) from the attention weights (B, H, T or 1, T) and each query head's value
    (B, H, T, v) (its group's, as the layer expands them; MHA: the values themselves): head 2h + i holds half i of
    differential head h's normalised output, so that W_O (H, v, d) reads it as DiffLlama's o_proj does."""
    B, H, T, _ = weights.shape
    half = H // 2
    diff = weights[:, :half] - differential_lambda(w, spec) * weights[:, half:]  # (B, H/2, T, T)
    values = torch.cat((v[:, :half], v[:, half:]), dim=-1)  # (B, H/2, T_k, 2v): [V_c, V_{c+G/2}]
    z = diff @ values  # (B, H/2, T, 2v)
    z = z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + spec.norm_eps) * (1 - spec.diff_lambda_init)
    return z.reshape(B, half, T, 2, -1).transpose(2, 3).reshape(B, H, T, -1)  # (B, H, T, v)
