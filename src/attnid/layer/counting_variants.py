"""What the modern attention variants do to the count (torch-free; used by `attnid.layer.counting.count`).

`attnid.layer.counting` counts plain attention; each variant field of the spec changes that breakdown as
follows (u = k - p unrotated dims per head, r = H / G, m_q = d + [b_Q]; derivations in one line):

  * softcapping or sinks: softmax no longer ignores a constant along keys, so the unrotated key
    bias is seen except on the kernel of the stacked [W_Q^h; b_Q^h]_u: G max(0, u - r m_q).
  * sinks: the rows of A_h sum to s_h(i) < 1, a different function of the query for every head,
    so each b_V^g W_O^h is seen: b_V^g is seen except on the left kernel of the stacked W_O^h (h in g),
    G max(0, v - r d), and the group shows the products [W_V^g; b_V^g] W_O^h, a (d + 1) x (r d) matrix of inner
    size v, whose fibre less that kernel is value_output (the plain one for v <= d; for v > d the bias fixes
    more: d4 h3 g1 k2 v6 b_vo, causal, measured 46 = 4 + 42, where the plain rule said 52). Sink logits are seen.
  * sliding windows and ALiBi change nothing: R_n = R_1^n, so commuting with the offsets 0 and 1
    that every window >= 2 shows already forces the RoPE commutant; ALiBi adds a fixed bias, and
    a constant along keys stays invisible. Softcapping keeps every symmetry that leaves the
    scores unchanged (GL(u), C^* per plane), so without a key bias it is count-neutral too.
  * q/k RMSNorm per head, one gain shared by all heads (Qwen3, Gemma-3; k <= d): n(z) = z/rms(z)
    is only O(k)-equivariant and generic diagonal gains admit no rotation, so of GL(u) x (C^*)^(p/2)
    per group only one scaling per unrotated dim and per plane between the q and k gains is left:
    u + p/2 in all. b_Q, b_K sit inside the norm: seen. Scaling W_Q^h (one per head) or W_K^g
    (one per group) is exact for eps = 0 and weakly identified for eps > 0: H + G.
  * q/k RMSNorm across all heads (OLMo-2): gains per (group, dim) pair up: G (u + p/2); scales: 2.
  * q/k LayerNorm per head (Phi `qk_layernorm`): as per-head RMSNorm, plus the centring (a change
    along the ones vector of each row of [W_Q^h; b_Q^h] and [W_K^g; b_K^g]): H m_q + G (d + [b_K]),
    plus the key shift on unrotated dims, constant along keys: u (0 with sinks or softcapping).
  * q/k LayerNorm per head with every head's own gain, no shift (StableLM, Cohere): the gains of query
    head h and of its key group pair up per group as across heads, G (u + p/2); the centring as above;
    the scale of every W_Q^h and W_K^g: H + G.
  * q/k RMSNorm per head after RoPE, one gain each (HunYuan): n(R_i q) = R_i n(q), so the scores are
    n(q)^T R_i^T diag(g_Q g_K) R_j n(k): only the product of the two gains is seen (k), and an orthogonal
    O keeping R_i^T D R_j for generic diagonal D is +-1 (none): k; scales H + G.
  * q/k RMSNorm per head without a gain (NanoChat, Llama-4's L2 norm; before or after RoPE alike): n(q O) = n(q) O for
    orthogonal O, which must commute with every rotation: SO(2) per plane and O(u) per group,
    G (p/2 + u (u - 1) / 2); scales H + G.
  * an RMSNorm with a gain across all heads' outputs before W_O (BitNet; v <= d): n(z M) = n(z) M only
    for orthogonal M, so of GL(v) per group O(v) is left, G v (v - 1) / 2; the gains against the rows of
    W_O, H v; the value bias sits inside the norm: seen; the scale of W_V (and b_V): 1 (weak for eps > 0).
  * a sigmoid output gate per element (Qwen3-Next, Qwen3.5: o_h = (A_h V_g) * sigmoid(X W_G^h), W_G^h (d, v)):
    each value dim j of a group is its own unit sum_h (A_h X W_V^g[:, j]) sigmoid(X W_G^h[:, j]) W_O^h[j, :], told
    apart from the others by its gates, so of GL(v) per group only the diagonal is left (W_V^g D, D^-1 W_O^h
    for every h in g): G v; b_V^g[j] sigmoid(X W_G^h[:, j]) W_O^h[j, :] varies with the token: every value bias
    is seen. The gate's weights are seen.
  * a sigmoid output gate per head (LFM3: o_h = (A_h V_g) sigmoid(X w_G^h), one scalar per head and token):
    GL(v) per group commutes with a scalar, so value_output is unchanged; the value bias reaches the output as
    sum_h sigmoid(X w_G^h) b_V^g W_O^h, a different function of the token for every head: as with sinks, each
    b_V^g W_O^h is seen (b_O no longer absorbs it), G max(0, v - r d) value-bias directions are left and the
    value-output fibre is that of [W_V^g; b_V^g] W_O^h less them.
  * an RMSNorm without a gain on every value head (Gemma-4's v_norm; v <= d): V_g = n(X W_V^g + b_V^g). The
    function sees the map z -> n(z W) W_O^h on generic z; n(z L) = n(z) M for every z (both sides of degree 0)
    holds only when ||z L|| / ||z|| is constant, i.e. L = c O with O orthogonal, and then M = O. So of GL(v) per
    group O(v) is left (W_V^g O, O^T W_O^h for every h in g): G v (v - 1) / 2; b_V^g sits inside the norm:
    seen; the scale c of [W_V^g; b_V^g] is exact for eps = 0 and weakly identified for eps > 0: G.
  * chunked attention (Llama-4's attention_chunk_size c >= 2, causal): a fixed mask, each chunk a causal sequence
    of c positions at its own RoPE positions (the scores see offsets 0..c-1 only): the causal count, for c >=
    T_min (as for a sliding window; refused below it).
  * a query temperature (Llama-4's NoPE layers: Q_i times a fixed t_i = 1 + s log(1 + floor((i + 1) / f)) > 0):
    S_h[i, j] = t_i q_i . k_j: every symmetry of the scores survives (W_Q A acts per row, a scalar per row
    commutes with it) and a constant along keys (q_i . b_K, times t_i) stays constant: count-neutral.
  * multi-head latent attention (DeepSeek-V2/V3; ranks r_q, r_kv, RMSNorm on each latent): each
    latent admits W_D -> W_D O (O orthogonal), any gains, up-projections compensating:
    r (r + 1) / 2 each; per head GL(u) on the nope query/key: H u^2; the RoPE key is shared by
    all heads: C^* per plane, p; value-output per head: H v^2; scaling each down-projection:
    weakly identified (exact for eps = 0): 1 + [r_q > 0].
  * its shared key unrotated (Kimi-Linear: s shared dims, no RoPE): head h's scores are the bilinear forms
    x_i W_Q^h_nope (c_KV,j W_UK^h)^T + x_i W_Q^h_s (x_j W_KR)^T, apart because c_KV is not linear in x; the first
    keeps GL(u) per head, the second, one W_KR for every head, is the product of the stacked H (r_q or d) x s
    queries with W_KR (d, s): GL(s) (s^2 when s <= d), in place of the p rotated dims' C^* per plane. A change
    mixing nope and shared dims would make c_KV W_UK^h depend linearly on x or the shared key on c_KV: none.
  * an RMSNorm with a gain g on its rotated shared key (Dots3-Note): k_j = RoPE(g * n(x_j W_KR)), and n(z M) = n(z) M
    only for M = c O; a rotation O inside a plane would have to pass diag(g) and every R_n, which generic g within the
    plane forbids (only quarter turns that swap the plane's gains: discrete). Left: per plane one scale traded
    between g and the queries' plane, p/2 in place of p, and the scale of W_KR (exact for eps = 0, weak else).
  * its output gates: per head (Bailing-hybrid) a scalar that commutes with GL(v) (no value bias to show): count
    unchanged; per element (HY-V4) only the diagonal of GL(v) is left, as for plain heads: H v.
  * the query and its gate reading [c_Q, X W_DQ] (A.X-K2): both halves are absorbed by the up-projections, so the
    latent keeps what the norm allows, W_DQ -> c W_DQ O (the raw half takes any O, the gain and c linearly; the
    normed half only c O): r_q (r_q + 1) / 2 and the weak scale as before; per head the nope forms read 2 r_q
    dims, still GL(u) (u <= r_q): the count is the plain latent one with the gate's.
  * DeepSeek sparse attention's indexer keeps index_topk keys per query; on T <= index_topk it keeps every key, so
    the layer is the latent attention it masks, and its selection, piecewise constant in its own weights (top-k
    of its scores), moves no output: every one of its parameters is unidentified (the Jacobian's columns are zero;
    DeepSeek-V3.2 trains it by a separate loss). T > index_topk is not counted. The same holds of MiniMax-M3's
    block indexer on GQA attention (its top blocks are integer indices: no derivative reaches its weights).

  * cross-attention (d_cross = c > 0; the decoders of encoder-decoder models): queries read X (T, d), keys and
    values the encoder's states C (S, c), no mask, no positions. The same groups act, GL(k) per group on
    ([W_Q^h; b_Q^h] for h in g, W_K^g) and GL(v) on (W_V^g, W_O^h), on products of shape r m_q x c and c x r d:
    query_key G fibre(r m_q, c, k), value_output G fibre(c, r d, v). The key bias adds [x_i, 1] [W_Q^h; b_Q^h]
    b_K^T, constant along the keys: all G k of it unidentified; the value bias passes through softmax rows (they
    sum to one) into sum_h b_V^g W_O^h + b_O, as in self-attention. That bounds the fibre from below; it is exact:
    at c = d, self-attention without a mask is cross-attention at C = X, so the Jacobian over generic (X, C) has
    at least its rank, P - the same count; at c != d, measured (this project's layer with C as an input, and
    TrOCR's encoder_attn with cross_attention_hidden_size != d_model; tests/test_hf_seq2seq.py).

Gate functions, gate biases and differential attention: `attnid.layer.counting_gates`.

Each number is measured by the Jacobian of this project's layer and of the real `transformers`
module (`attnid.hf.verify`).
"""

from __future__ import annotations

from .counting_gates import differential_breakdown
from .spec import AttentionSpec
from .spec_latent import indexer_params


def fibre_of_product(rows: int, cols: int, inner: int) -> int:
    """dim of the fibre of (A, B) -> A B^T, A (rows, inner), B (cols, inner), at a generic point.

    Rank-rho matrices of shape rows x cols form a manifold of dimension rho (rows + cols - rho),
    rho = min(inner, rows, cols); the parameters number inner (rows + cols).
    """
    if inner == 0:
        return 0
    rho = min(inner, rows, cols)
    return inner * (rows + cols) - rho * (rows + cols - rho)


def variant_breakdown(spec: AttentionSpec, breakdown: dict) -> tuple[dict, int]:
    """(breakdown, weakly identified) of a non-latent spec from the plain-attention breakdown."""
    d, H, G, r = spec.d_model, spec.n_heads, spec.n_kv_heads, spec.group_size
    k, v, p = spec.d_head_qk, spec.d_head_v, spec.rope_dims
    u, m_q = k - p, d + spec.has_bias("q")
    out = dict(breakdown)
    shift_free = not (spec.sinks or spec.softcap)  # softmax ignores a constant along keys
    if spec.has_bias("k") and not shift_free:
        out["key_bias"] = G * max(0, u - r * m_q)
    if spec.has_bias("v") and (spec.sinks or spec.output_gate == "head"):  # each b_V^g W_O^h seen (docstring)
        out["value_bias"] = G * max(0, v - r * d)
        out["value_output"] = G * fibre_of_product(d + 1, r * d, v) - out["value_bias"]
    if spec.output_gate == "element":
        out["value_output"], out["value_bias"] = G * v, 0
    if spec.index_heads:  # MiniMax-M3's indexer on GQA attention: unidentified on T <= index_topk (below)
        out["indexer"] = indexer_params(spec)
    scale = 0
    if spec.diff_lambda_init:  # differential attention (attnid.layer.counting_gates)
        out, scale = differential_breakdown(spec, out)
    if spec.sub_norm:
        out["value_output"] = G * (v * (v - 1) // 2) + H * v
        out["value_bias"] = 0
        scale += 1
    if spec.v_norm:
        out["value_output"], out["value_bias"] = G * (v * (v - 1) // 2), 0
        scale += G
    if spec.qk_norm != "none":
        out["query_key"] = {
            "rms_head": u + p // 2,
            "layernorm_head": u + p // 2,
            "rms_all": G * (u + p // 2),
            "layernorm_heads": G * (u + p // 2),
            "rms_head_rotated": k,
            "rms_plain": G * (p // 2 + u * (u - 1) // 2),
        }[spec.qk_norm]
        out["key_bias"] = 0
        scale += 2 if spec.qk_norm == "rms_all" else H + G
        if spec.qk_norm in ("layernorm_head", "layernorm_heads"):
            out["norm_centring"] = H * m_q + G * (d + spec.has_bias("k"))
        if spec.qk_norm == "layernorm_head":
            out["norm_shift"] = u if shift_free else 0
    return _scales(spec, out, scale)


def latent_breakdown(spec: AttentionSpec) -> tuple[dict, int]:
    """(breakdown, weakly identified) of multi-head latent attention, its gates and its indexer."""
    d, H, v, p, s = spec.d_model, spec.n_heads, spec.d_head_v, spec.rope_dims, spec.shared_key_dims
    u, r_q, r_kv = spec.d_head_qk - p - s, spec.q_lora_rank, spec.kv_lora_rank
    shared = fibre_of_product(H * (r_q or d), d, s) if s else p  # the unrotated shared key: GL(s); rotated: C^* a plane
    if spec.shared_key_norm:  # a normed rotated key: one scale a plane, W_KR's own scale weak (docstring)
        shared = p // 2
    out = {
        "query_key": H * u * u + shared,
        "value_output": H * v if spec.output_gate == "element" else H * v * v,
        "key_bias": 0,
        "value_bias": 0,
        "latent": r_kv * (r_kv + 1) // 2 + r_q * (r_q + 1) // 2,
    }
    if spec.index_heads:
        out["indexer"] = indexer_params(spec)
    return _scales(spec, out, 1 + (r_q > 0) + spec.shared_key_norm)


def _scales(spec: AttentionSpec, breakdown: dict, scale: int) -> tuple[dict, int]:
    """Norm scale symmetries: unidentified when eps = 0 ('norm_scale'), else weakly identified."""
    if scale and spec.norm_eps == 0:
        return {**breakdown, "norm_scale": scale}, 0
    return breakdown, scale


# One small shape (d_model 16, 4 heads, 2 KV groups, full RoPE on heads of 4) under each variant:
# the examples the paper quotes (workflow/scripts/hf_macros.py counts each).
EXAMPLE_SHAPE = {"d_model": 16, "n_heads": 4, "n_kv_heads": 2, "rope_dims": 4, "causal": True}
EXAMPLE_VARIANTS = {
    "plain": {},
    "qk_norm_head": {"qk_norm": "rms_head"},
    "qk_norm_all": {"qk_norm": "rms_all"},
    "biases": {"biases": "qkvo"},
    "sinks": {"biases": "qkvo", "sinks": True},
    "softcap": {"softcap": 50.0},
    "window": {"sliding_window": 3},
    "gate_element": {"output_gate": "element"},
    "gate_head": {"output_gate": "head"},
    "gate_element_biases": {"biases": "qkvo", "output_gate": "element"},
    "gate_head_biases": {"biases": "qkvo", "output_gate": "head"},
    "cross": {"causal": False, "rope_dims": 0, "biases": "qkvo", "d_cross": 24},  # no mask, no RoPE across streams
}
