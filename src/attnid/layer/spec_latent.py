"""The multi-head latent attention fields of :class:`attnid.layer.spec.AttentionSpec` beyond its two ranks: checks,
label parts and parameter blocks (torch-free; `attnid.layer.spec_variants` merges them).

Latent attention (DeepSeek-V2/V3; `kv_lora_rank`, `q_lora_rank`): c_Q = rms(X W_DQ) gain_DQ (or no query latent),
c_KV = rms(X W_DKV) gain_DKV, per head Q_h = c_Q W_UQ^h = [nope (u); shared (s)], K_h = [c_KV W_UK^h; X W_KR],
V_h = c_KV W_UV^h: the key's last part X W_KR is one key shared by all heads. DeepSeek rotates it (s = rope_dims);

    shared_key_dims   Kimi-Linear's MLA applies no rotary embedding (KimiLinearAttention, modular_kimi_linear.py:
                      "MLA ... with NoPE, but the part of the keys where RoPE is applied is still shared"): s shared
                      key dims that nothing rotates (rope_dims 0); 0 = none
    index_topk        DeepSeek sparse attention (DeepseekV32Indexer, modular_deepseek_v32.py): a lightning indexer
                      scores every key and keeps index_topk per query, min(index_topk, T) of them, as a mask on the
                      latent attention's scores; 0 = off. On T <= index_topk every key is kept (the count's hypothesis).
                      MiniMax-M3's (MiniMaxM3VLIndexer, on GQA attention) keeps index_topk_blocks blocks of
                      index_block_size keys: every key while T <= their product, its index_topk here
    shared_key_norm   Dots3-Note (Dots3NoteTextAttention's k_rope_only_layernorm, modular_dots3_note.py): an RMSNorm
                      with a gain gain_KR (p,) on the shared key X W_KR before RoPE; needs rope_dims
    raw_latent_query  A.X-K2 (AXK2Attention, modular_axk2.py): the query up-projection and the output gate read
                      [c_Q, X W_DQ], the normed query latent beside the raw one (q_gate_proj (H (k + v), 2 r_q)):
                      W_UQ (H, 2 r_q, k), W_G (H, 2 r_q, v) or (H, 2 r_q); needs q_lora_rank
    index_heads,      the indexer's own parameters: its query W_IQ (index_heads, r_q, index_head_dim) reads the query
    index_head_dim    latent c_Q, its key W_IK (d, index_head_dim) with a LayerNorm (gain_IK, shift_IK) reads X, and
                      W_IW (d, index_heads) weighs its heads; 0 where a layer reuses another layer's selection
                      (GLM-MoE-DSA's and HY-V4's "shared" layers: index_topk set, no parameters). Without latents
                      (MiniMax-M3): W_IQ (index_heads, d, index_head_dim) and W_IK (d, index_head_dim) read X, each
                      with an RMSNorm gain (gain_IQ, gain_IK)

Output gates (`output_gate`, `gate_fn`, `gate_bias`) read X beside the latents (HY-V4: per element; Bailing-hybrid,
Dots: per head), or the query latents (A.X-K2: raw_latent_query).
"""

from __future__ import annotations

import math
from numbers import Integral

from ..errors import SpecError

INT_FIELDS = ("shared_key_dims", "index_topk", "index_heads", "index_head_dim")
BOOL_FIELDS = ("shared_key_norm", "raw_latent_query")
LATENT_DEFAULTS = {"shared_key_dims": 0, "shared_key_norm": False, "raw_latent_query": False, "index_topk": 0,
                   "index_heads": 0, "index_head_dim": 0}  # fmt: skip
LATENT_LABEL = {
    "shared_key_dims": lambda v: f"sk{v}",
    "shared_key_norm": lambda v: "krnorm",
    "raw_latent_query": lambda v: "rawq",
    "index_topk": lambda v: f"top{v}",
    "index_heads": lambda v: f"ih{v}",
    "index_head_dim": lambda v: f"id{v}",
}


def checked_latent(spec) -> dict:
    """The fields normalised, name -> value; SpecError names a bad field or a combination not modelled (also the
    ranks' own rules, checked here for every latent spec)."""
    out = {}
    for name in INT_FIELDS:
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
            raise SpecError(name, f"must be an integer >= 0, got {value!r}")
        out[name] = int(value)
    for name in BOOL_FIELDS:
        value = getattr(spec, name)
        out[name] = bool(value) if type(value).__name__ == "bool_" else value
        if not isinstance(out[name], bool):
            raise SpecError(name, f"must be true or false, got {value!r}")
    if out["raw_latent_query"] and not spec.q_lora_rank:
        raise SpecError("raw_latent_query", "reads the query latent: needs q_lora_rank > 0")
    if out["shared_key_norm"] and not spec.rope_dims:
        raise SpecError("shared_key_norm", "is modelled on a rotated shared key (rope_dims > 0) only")
    if spec.q_lora_rank and not spec.kv_lora_rank:
        raise SpecError("q_lora_rank", "needs kv_lora_rank > 0 (multi-head latent attention)")
    for name in ("shared_key_dims", "shared_key_norm", "raw_latent_query"):
        if out[name] and not spec.kv_lora_rank:
            raise SpecError(name, "is modelled with multi-head latent attention only (kv_lora_rank > 0)")
    if spec.kv_lora_rank:
        _check_latent(spec, out["shared_key_dims"])
    if out["index_topk"] or out["index_heads"] or out["index_head_dim"]:
        _check_indexer(spec, out)
    return out


def _check_latent(spec, s: int) -> None:
    for name, ok, why in (
        ("n_kv_heads", spec.n_kv_heads == spec.n_heads, "latent attention has one key/value per head"),
        ("biases", not spec.biases, "latent attention is modelled without biases"),
        ("qk_norm", spec.qk_norm == "none", "latent attention has its own norms"),
        ("shared_key_dims", not (s and spec.rope_dims), "a shared key partly rotated is not modelled (rope_dims 0)"),
        ("shared_key_dims", s <= spec.d_model, "must be <= d_model"),
        ("rope_dims", spec.rope_dims + s < spec.d_head_qk, "latent attention needs unrotated (nope) dims"),
        ("kv_lora_rank", spec.kv_lora_rank <= spec.d_model, "must be <= d_model"),
        ("q_lora_rank", spec.q_lora_rank <= spec.d_model, "must be <= d_model"),
    ):
        if not ok:
            raise SpecError(name, why)
    u, r_kv = spec.d_head_qk - spec.rope_dims - s, spec.kv_lora_rank
    if max(u, spec.d_head_v) > min(r_kv, spec.q_lora_rank or spec.d_model, spec.d_model):
        raise SpecError("kv_lora_rank", "latent attention is modelled for nope and value head sizes <= the ranks")
    if spec.n_heads * (u + spec.d_head_v) < r_kv or (spec.q_lora_rank > spec.n_heads * spec.d_head_qk):
        raise SpecError("kv_lora_rank", "a rank above what the heads read back is not modelled")


def _check_indexer(spec, out: dict) -> None:
    for name, ok, why in (
        ("index_topk", out["index_topk"] >= 2, "an indexer keeps index_topk >= 2 keys per query (1: only itself)"),
        ("causal", spec.causal, "the indexer's selection is modelled on causal attention"),
        ("index_heads", bool(out["index_heads"]) == bool(out["index_head_dim"]),
         "index_heads and index_head_dim are set together (0 and 0: the layer reuses another's selection)"),
        ("q_lora_rank", spec.q_lora_rank or not (out["index_heads"] and spec.kv_lora_rank),
         "a latent attention's indexer reads the query latent"),
        ("sliding_window", not spec.sliding_window, "an indexer together with a sliding window is not modelled"),
    ):  # fmt: skip
        if not ok:
            raise SpecError(name, why)


def latent_block_shapes(spec, variant_blocks: dict) -> dict[str, tuple[int, ...]]:
    """Multi-head latent attention: query (full or down W_DQ, RMSNorm gain, up W_UQ), key/value down
    W_DKV with its RMSNorm gain, the shared key W_KR (rotated or not), up-projections W_UK (nope dims) and W_UV, W_O;
    then the variants' (`variant_blocks`: sinks, an output gate, which reads the query latents [c_Q, X W_DQ] in place
    of X with raw_latent_query, the indexer's blocks)."""
    d, H, k, v = spec.d_model, spec.n_heads, spec.d_head_qk, spec.d_head_v
    shared, r_q, r_kv = spec.rope_dims + spec.shared_key_dims, spec.q_lora_rank, spec.kv_lora_rank
    width = 2 * r_q if spec.raw_latent_query else r_q  # what the query up-projection reads
    query = {"W_DQ": (d, r_q), "gain_DQ": (r_q,), "W_UQ": (H, width, k)} if r_q else {"W_Q": (H, d, k)}
    blocks = query | {
        "W_DKV": (d, r_kv),
        "gain_DKV": (r_kv,),
        "W_KR": (d, shared),
        **({"gain_KR": (shared,)} if spec.shared_key_norm else {}),
        "W_UK": (H, r_kv, k - shared),
        "W_UV": (H, r_kv, v),
        "W_O": (H, v, d),
    }
    blocks |= variant_blocks
    if spec.raw_latent_query and "W_G" in blocks:
        blocks["W_G"] = (H, width, v) if spec.output_gate == "element" else (H, width)
    return blocks


def indexer_block_shapes(spec) -> dict[str, tuple[int, ...]]:
    """The indexer's parameter blocks (module docstring; none without index_heads), n heads of m dims."""
    n, m, d = spec.index_heads, spec.index_head_dim, spec.d_model
    if not n:
        return {}
    if spec.kv_lora_rank:  # DeepSeek's: n r_q m + d m + 2 m + d n
        return {"W_IQ": (n, spec.q_lora_rank, m), "W_IK": (d, m), "gain_IK": (m,), "shift_IK": (m,), "W_IW": (d, n)}
    return {"W_IQ": (n, d, m), "W_IK": (d, m), "gain_IQ": (m,), "gain_IK": (m,)}  # MiniMax-M3's: n d m + d m + 2 m


def indexer_params(spec) -> int:
    """How many parameters the indexer has."""
    return sum(math.prod(shape) for shape in indexer_block_shapes(spec).values())
