"""The modern attention variants as tensor code, called by :func:`attnid.layer.forward.attention`.

Each function implements one spec field (counts in `attnid.layer.counting_variants`), in the order the
layer applies them, with H query heads, G key/value groups, k = d_head_qk, v = d_head_v:

    latent_qkv        multi-head latent attention (DeepSeek-V2/V3), instead of W_Q, W_K, W_V:
                      c_Q = rms(X W_DQ) * gain_DQ, Q_h = c_Q W_UQ^h (or X W_Q^h without q_lora_rank);
                      c_KV = rms(X W_DKV) * gain_DKV, K_h = [X W_KR, c_KV W_UK^h], V_h = c_KV W_UV^h.
                      The RoPE dims come first in Q_h and K_h, so the layer's RoPE rotates them;
                      X W_KR is one key shared by all heads (Kimi's: shared_key_dims, which RoPE leaves alone).
                      An indexer's blocks (W_IQ, W_IK, ...) are not read: on T <= index_topk it keeps every key.
                      shared_key_norm (Dots3-Note): X W_KR -> rms(X W_KR) * gain_KR before RoPE.
                      raw_latent_query (A.X-K2): Q_h = [c_Q, X W_DQ] W_UQ^h, and the output gate reads [c_Q, X W_DQ].
    normalize_qk      q/k norms (before RoPE; rms_head_rotated and rms_plain after it):
                      rms(z) = z / sqrt(mean(z^2) + eps);
                      rms_head, rms_head_rotated: rms over each head's k dims, one gain (k,) shared by all heads;
                      rms_all: rms over all H k (G k) dims, gains (H, k) and (G, k);
                      layernorm_head: (z - mean) / sqrt(var + eps) * gain + shift per head;
                      layernorm_heads: (z - mean) / sqrt(var + eps) * gain, gains (H, k) and (G, k);
                      rms_plain: rms over each head's k dims, no gain.
    normalize_values  v_norm: rms over each value head's v dims, no gain (Gemma-4).
    temper_queries    the query at index i times 1 + s log(1 + floor((i + 1) / f)), f = temperature_floor,
                      s = temperature_scale (Llama-4's attn_temperature_tuning in its NoPE layers).
    adjust_scores     scores -> softcap * tanh(scores / softcap); + ALiBi -m_h (i - j) with
                      slopes m_h = 2^(-8 (h + 1) / H); keys outside the sliding window masked; with
                      attention_chunk c, keys outside the query's chunk (floor(j / c) != floor(i / c)) masked.
    attention_weights softmax over keys, with a sink: one logit per head that joins every row
                      and is dropped afterwards, so the rows sum to less than one.
    normalize_heads   sub_norm: rms over all H v dims of a token's head outputs, times gain_O (H, v),
                      before W_O (BitNet's attn_sub_norm).
    gate_heads        output_gate: each head's output times sigmoid(X W_G^h) per element (element, W_G (H, d, v):
                      Qwen3-Next's gate rows of q_proj) or times sigmoid(X w_G^h), one per head (head, W_G (H, d):
                      LFM3's g_proj), before W_O; softplus in place of sigmoid (gate_fn, Laguna), a bias per head
                      inside it (gate_bias, Beam). Differential attention: attnid.layer.differential.
"""

from __future__ import annotations

import torch

from ..softmax import softmax_last


def _rms(z: torch.Tensor, eps: float) -> torch.Tensor:
    return z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + eps)


def latent_qkv(x: torch.Tensor, w: dict, spec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q (B, H, T, k), K (B, H, T, k), V (B, H, T, v) of multi-head latent attention (RoPE dims first), and what an
    output gate reads: X (B, T, d), or the query latents [c_Q, X W_DQ] (B, T, 2 r_q) with raw_latent_query."""
    eps, p = spec.norm_eps, spec.rope_dims + spec.shared_key_dims  # the shared key's dims, rotated or not
    gate_input = x
    if "W_DQ" in w:
        raw = x @ w["W_DQ"]  # (B, T, r_q)
        c_q = _rms(raw, eps) * w["gain_DQ"]  # (B, T, r_q)
        if spec.raw_latent_query:  # A.X-K2: the normed and the raw latent side by side
            c_q = gate_input = torch.cat((c_q, raw), dim=-1)  # (B, T, 2 r_q)
        q = torch.einsum("btr,hrk->bhtk", c_q, w["W_UQ"])  # (B, H, T, k)
    else:
        q = torch.einsum("btd,hdk->bhtk", x, w["W_Q"])
    c_kv = _rms(x @ w["W_DKV"], eps) * w["gain_DKV"]  # (B, T, r_kv)
    k_nope = torch.einsum("btr,hru->bhtu", c_kv, w["W_UK"])  # (B, H, T, k - p)
    k_rope = x @ w["W_KR"]  # (B, T, p or s)
    if spec.shared_key_norm:  # Dots3-Note: an RMSNorm with a gain on it, before RoPE
        k_rope = _rms(k_rope, eps) * w["gain_KR"]
    k_rope = k_rope[:, None].expand(-1, spec.n_heads, -1, -1)  # (B, H, T, p or s): shared by the heads
    v = torch.einsum("btr,hrv->bhtv", c_kv, w["W_UV"])  # (B, H, T, v)
    q = torch.cat((q[..., k_nope.shape[-1] :], q[..., : k_nope.shape[-1]]), dim=-1) if p else q
    return q, torch.cat((k_rope, k_nope), dim=-1), v, gate_input


def normalize_qk(q: torch.Tensor, k: torch.Tensor, w: dict, spec) -> tuple[torch.Tensor, torch.Tensor]:
    """q (B, H, T, k) and k (B, G, T, k) after the spec's q/k norm (identity for qk_norm 'none')."""
    eps = spec.norm_eps
    if spec.qk_norm in ("rms_head", "rms_head_rotated"):
        return _rms(q, eps) * w["gain_Q"], _rms(k, eps) * w["gain_K"]
    if spec.qk_norm == "rms_plain":
        return _rms(q, eps), _rms(k, eps)
    if spec.qk_norm == "rms_all":

        def across_heads(z, gain):  # z (B, n, T, k), gain (n, k): one rms over all n k dims of a token
            scale = torch.rsqrt(z.pow(2).mean(dim=(1, 3), keepdim=True) + eps)
            return z * scale * gain[:, None, :]

        return across_heads(q, w["gain_Q"]), across_heads(k, w["gain_K"])
    if spec.qk_norm == "layernorm_head":

        def layer_norm(z, gain, shift):
            z = z - z.mean(-1, keepdim=True)
            return z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + eps) * gain + shift

        return layer_norm(q, w["gain_Q"], w["shift_Q"]), layer_norm(k, w["gain_K"], w["shift_K"])
    if spec.qk_norm == "layernorm_heads":

        def centred(z, gain):  # z (B, n, T, k), gain (n, k): each head its own gain
            z = z - z.mean(-1, keepdim=True)
            return z * torch.rsqrt(z.pow(2).mean(-1, keepdim=True) + eps) * gain[:, None, :]

        return centred(q, w["gain_Q"]), centred(k, w["gain_K"])
    return q, k


def normalize_values(v: torch.Tensor, spec) -> torch.Tensor:
    """v (B, G, T, v) after the spec's gain-free value norm (identity without v_norm)."""
    return _rms(v, spec.norm_eps) if spec.v_norm else v


def temper_queries(q: torch.Tensor, spec, T: int) -> torch.Tensor:
    """q (B, H, T_q, k), the last T_q of T positions, times the spec's temperature per query index (identity
    without temperature_floor)."""
    if not spec.temperature_floor:
        return q
    i = torch.arange(T - q.shape[2], T, device=q.device, dtype=torch.float64)  # (T_q,) query indices
    scale = 1.0 + spec.temperature_scale * torch.log1p(torch.floor((i + 1.0) / spec.temperature_floor))
    return q * scale.to(q.dtype)[:, None]


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """m_h = 2^(-8 (h + 1) / H), h = 0..H-1 (Press et al. 2022, ALiBi): (H,) float64."""
    return 2.0 ** (-8.0 * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads)


def adjust_scores(scores: torch.Tensor, spec) -> torch.Tensor:
    """Softcapping, ALiBi and the sliding window on scores (B, H, T, T) (query i, key j)."""
    T = scores.shape[-1]
    if spec.softcap:
        scores = spec.softcap * torch.tanh(scores / spec.softcap)
    if spec.alibi:
        pos = torch.arange(T, device=scores.device, dtype=scores.dtype)
        distance = pos[:, None] - pos[None, :]  # (T, T): i - j
        slopes = alibi_slopes(spec.n_heads).to(device=scores.device, dtype=scores.dtype)
        scores = scores - slopes[:, None, None] * distance
    if spec.sliding_window:
        i = torch.arange(T, device=scores.device)
        too_old = (i[:, None] - i[None, :]) >= spec.sliding_window  # (T, T)
        scores = scores.masked_fill(too_old, float("-inf"))
    if spec.attention_chunk:  # the queries are the last scores.shape[-2] of the T positions
        i, j = torch.arange(T - scores.shape[-2], T, device=scores.device), torch.arange(T, device=scores.device)
        other_chunk = (i[:, None] // spec.attention_chunk) != (j[None, :] // spec.attention_chunk)  # (T_q, T)
        scores = scores.masked_fill(other_chunk, float("-inf"))
    return scores


def attention_weights(scores: torch.Tensor, w: dict, spec) -> torch.Tensor:
    """softmax over keys of scores (B, H, T, T); with sinks a per-head logit joins each row and is dropped."""
    if not spec.sinks:
        return softmax_last(scores)
    B, H, T, _ = scores.shape
    sink = w["sink"].to(scores.dtype)[None, :, None, None].expand(B, H, T, 1)
    return softmax_last(torch.cat((scores, sink), dim=-1))[..., :T]


def normalize_heads(heads: torch.Tensor, w: dict, spec) -> torch.Tensor:
    """The heads' outputs (B, H, T, v) after the spec's sub_norm (identity without it)."""
    if not spec.sub_norm:
        return heads
    scale = torch.rsqrt(heads.pow(2).mean(dim=(1, 3), keepdim=True) + spec.norm_eps)  # (B, 1, T, 1)
    return heads * scale * w["gain_O"][:, None, :]


def gate_heads(heads: torch.Tensor, x: torch.Tensor, w: dict, spec) -> torch.Tensor:
    """The heads' outputs (B, H, T, v) times the spec's output gate of x (B, T, d) (identity without it): its
    gate_fn (sigmoid or softplus) of x W_G^h, plus b_G^h with a gate bias."""
    if spec.output_gate == "none":
        return heads
    x = x[:, -heads.shape[2] :]
    if spec.output_gate == "element":
        logits = torch.einsum("btd,hdv->bhtv", x, w["W_G"])  # (B, H, T, v)
    else:
        logits = torch.einsum("btd,hd->bht", x, w["W_G"])[..., None]  # (B, H, T, 1)
    if "b_G" in w:
        logits = logits + w["b_G"][:, None, None]
    gate = torch.nn.functional.softplus(logits) if spec.gate_fn == "softplus" else torch.sigmoid(logits)
    return heads * gate
