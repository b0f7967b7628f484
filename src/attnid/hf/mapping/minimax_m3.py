"""MiniMax-M3's text model (`transformers` 5.24, models/minimax_m3_vl/modular_minimax_m3_vl.py; keys a config leaves out
take the class defaults of MiniMaxM3VLTextConfig): layers only.

    attention   MiniMaxM3VLAttention (MiniMaxM2Attention's projections, no biases) with a per-head q/k RMSNorm of
                head_dim, one gain for all heads (Gemma-3's 1 + w: a reparametrisation of the gain), then RoPE
                (MiniMax-M2's rotary class) on int(head_dim f) dims, f = rope_parameters' partial_rotary_factor
                (default 1). The class's rotary_dim (64) does not reach it: MiniMaxM2Config.convert_rope_params_to_dict
                reads rotary_dim from the keyword arguments, and MiniMaxM3VLTextConfig declares it as a field
                (MiniMaxM3VLTextConfig(rotary_dim=32).rope_parameters holds no partial_rotary_factor; the check
                measures the whole head rotated)
    indexer     on the minimax_m3_sparse layers of layer_types (else sparse_attention_config's sparse_attention_freq;
                default: none), MiniMaxM3VLIndexer: q_proj (index_n_heads x index_head_dim, d) and k_proj
                (index_head_dim, d), each with an RMSNorm gain; per query it keeps index_topk_blocks blocks of
                index_block_size keys (top max-pooled scores, the local blocks boosted), as integer block indices: no
                derivative reaches its weights, and while T <= index_block_size x index_topk_blocks every block, so
                every key, is kept (the count's index_topk; attnid.layer.spec_latent)
    blocks      MLPs dense or routed by mlp_layer_types (experts with a shared one, clamped SwiGLU-OAI activations),
                Gemma-3 RMSNorms: not modelled (layers only)
"""

from __future__ import annotations

import math

from ...errors import SpecError
from ...layer.spec import AttentionSpec
from ...model.blocks import LayerSpec, MLPSpec
from .keys import head_sizes, partial_factor, read_float, read_int, read_section, rope

KINDS = ("full_attention", "minimax_m3_sparse")
WHY = (
    "MiniMax-M3's blocks (routed and dense MLPs with clamped SwiGLU-OAI activations, a shared expert, Gemma-3 norms)"
    " and its sparse layers' indexer are not modelled by the whole-model count: the attention layers are counted alone"
)


def layer_kinds(cfg: dict, n_layers: int) -> list[str]:
    """'full_attention' or 'minimax_m3_sparse' (an indexer) per layer (MiniMaxM3VLTextConfig.__post_init__)."""
    kinds = cfg.get("layer_types")
    freq = read_section(cfg, "sparse_attention_config").get("sparse_attention_freq")
    if kinds is None and freq is not None:
        kinds = ["minimax_m3_sparse" if f else "full_attention" for f in freq] if isinstance(freq, list) else freq
    if kinds is None:
        return ["full_attention"] * n_layers
    if not isinstance(kinds, list) or len(kinds) != n_layers or not set(kinds) <= set(KINDS):
        raise SpecError("layer_types", f"must list {' or '.join(KINDS)} for each of the {n_layers} layers")
    return list(kinds)


def minimax_m3(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(every block, the ModelSpec fields): layers only."""
    d, H, G, k = head_sizes(cfg, 128)
    n_layers = read_int(cfg, "num_hidden_layers")
    eps = read_float(cfg, "rms_norm_eps", default=1e-6)
    p = min(k, 2 * math.ceil(int(k * partial_factor(cfg)) / 2))
    topk = read_int(cfg, "index_block_size", default=128) * read_int(cfg, "index_topk_blocks", default=16)
    indexer = {"index_topk": topk, "index_heads": read_int(cfg, "index_n_heads", default=4),
               "index_head_dim": read_int(cfg, "index_head_dim", default=128)}  # fmt: skip
    mlp = MLPSpec(read_int(cfg, "intermediate_size", default=3072), "swiglu", False)  # not modelled (WHY)
    layers = []
    for kind in layer_kinds(cfg, n_layers):
        attention = AttentionSpec(
            d_model=d, n_heads=H, n_kv_heads=G, d_head_qk=k, rope_dims=p, rope_base=rope(cfg), causal=True,
            qk_norm="rms_head", norm_eps=eps, **(indexer if kind == "minimax_m3_sparse" else {}),
        )  # fmt: skip
        layers.append(LayerSpec(attention, mlp))
    fields = {"positions": "rope", "norm": "rmsnorm", "norm_bias": False, "norm_eps": eps, "tied": False,
              "not_modelled": (("mlp_layer_types", WHY),)}  # fmt: skip
    return layers, fields


MAPPERS = {"minimax_m3_vl_text": minimax_m3}
