"""DeepSeek sparse attention (DSA): DeepSeek-V3's latent attention with a lightning indexer that keeps index_topk keys
per query (`transformers` 5.24, models/<type>/modular_<type>.py; keys a config leaves out take the class defaults):

    deepseek_v32  DeepseekV32Attention (AXK1Attention, "always with a Q-LoRA rank": q_a_proj, q_a_layernorm, q_b_proj;
                  attention_bias on q_a_proj, kv_a_proj_with_mqa and o_proj) plus DeepseekV32Indexer on every layer:
                  wq_b (index_n_heads x index_head_dim, q_lora_rank) on the query latent, wk (index_head_dim, d) with
                  a LayerNorm k_norm (gain and bias), weights_proj (index_n_heads, d); the top-index_topk keys of
                  its scores per query (min(index_topk, T)) stay unmasked. Blocks dense for the first
                  first_k_dense_replace (3), then DeepSeek-V3's experts (mlp_layer_types)
    glm_moe_dsa   GlmMoeDsaAttention: the same layer, the indexer only on the "full" layers of indexer_types; a
                  "shared" layer has none and reuses the previous full layer's selection (prev_topk_indices).
                  Default indexer_types (GlmMoeDsaConfig.__post_init__): index_topk_pattern ("F"/"S" per layer),
                  else full where max(i - index_skip_topk_offset + 1, 0) % index_topk_freq == 0 (offset 2, freq 1:
                  every layer)
    hy_v4         HYV4Attention (GlmMoeDsaAttention): the same, plus a sigmoid gate per element of every head's
                  output (gate_proj (H v, d) on X) and one sink logit per head (sinks, eager s_aux); default
                  indexer_types full at layer 0 and where (i - 1) % 4 == 0; hyper-connections (hc_mult streams)
                  around every block (HYV4HyperConnection) and a hyper head
    axk2          AXK2Attention (DeepseekV32Attention without q_b_proj): q_gate_proj (H (k + v), 2 q_lora_rank) reads
                  [q_a_layernorm(q_a_proj x), q_a_proj x], the normed query latent beside the raw one, and gives each
                  head its query and a sigmoid gate per element of its output (attnid.layer.spec_latent's
                  raw_latent_query); the indexer (reading the normed latent) on every layer; input norms gated by a
                  low-rank MLP of their output (AXK2GatedRMSNorm); mlp_layer_types from first_k_dense_replace (1)
                  and moe_layer_freq

The latent norms take the class default eps 1e-6 (AXK1RMSNorm(q_lora_rank), as in attnid.hf.mapping.deepseek).

What is counted, and why. The indexer's top-k is piecewise constant in its own weights (and in X): its parameters
move no output, so every one of their Jacobian columns is zero and they are all unidentified (DeepSeek-V3.2 trains
them by a separate KL loss to the dense attention's scores, which this count, of the layer's function, does not see).
On a sequence no longer than index_topk every key is kept and the layer is the latent attention the deepseek
family counts, plus those columns (`attnid.layer.counting_variants`); the count's hypothesis is T <= index_topk
(2,048 in every default config). Longer sequences, where the selection masks keys, are not counted. Layers only:
the whole-model count and its generators do not hold the indexer (nor HY-V4's hyper-connections, nor A.X-K2's gated
norms).
"""

from __future__ import annotations

from ...errors import SpecError
from ...layer.spec import AttentionSpec
from ...model.blocks import LayerSpec, MLPSpec
from .deepseek import latent_attention, latent_fields
from .experts import experts
from .keys import mlp_kind, read_int, read_str, routed_layers

# model type -> its config class's defaults that differ from DeepSeek-V3's reading (configuration_<type>.py): the
# dense blocks first, the router, the indexer's heads, the norms' eps
_SHARED = {"n_shared_experts": 1, "index_head_dim": 128, "index_topk": 2048}
CLASS_DEFAULTS = {
    "deepseek_v32": {**_SHARED, "first_k_dense_replace": 3, "n_group": 8, "topk_group": 4, "index_n_heads": 64,
                     "rms_norm_eps": 1e-6, "routed_scaling_factor": 2.5},
    "glm_moe_dsa": {**_SHARED, "first_k_dense_replace": 3, "n_group": 1, "topk_group": 1, "index_n_heads": 32,
                    "rms_norm_eps": 1e-5, "routed_scaling_factor": 2.5},
    "hy_v4": {**_SHARED, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "index_n_heads": 16,
              "rms_norm_eps": 1e-5, "routed_scaling_factor": 2.827},
    # A.X-K2-Light routes without groups (n_group None): one group holding every expert
    "axk2": {**_SHARED, "first_k_dense_replace": 1, "n_group": 1, "topk_group": 1, "index_n_heads": 16,
             "rms_norm_eps": 1e-6, "routed_scaling_factor": 2.5},
}  # fmt: skip
# what a type's attention adds to DeepSeek-V3.2's (module docstring)
EXTRA = {
    "hy_v4": {"output_gate": "element", "sinks": True},
    "axk2": {"output_gate": "element", "raw_latent_query": True},
}
WHY = (
    "DeepSeek sparse attention: the indexer's parameters have zero derivative (its top-k selection is piecewise"
    " constant in them) and on T <= index_topk it keeps every key; the whole-model count and its generators do not"
    " hold the indexer{}: the attention layers are counted alone"
)
BLOCKS = {
    "hy_v4": " (nor HY-V4's hyper-connections, hc_mult streams mixed by learned gates)",
    "axk2": " (nor A.X-K2's gated input norms: an RMSNorm times a low-rank sigmoid gate of its output)",
}


def indexer_kinds(cfg: dict, mt: str, n_layers: int) -> list[str]:
    """'full' (the layer runs its own indexer) or 'shared' (it reuses the previous full layer's selection) per layer."""
    kinds = cfg.get("indexer_types")
    if kinds is None and mt == "glm_moe_dsa" and cfg.get("index_topk_pattern") is not None:
        pattern = cfg["index_topk_pattern"]
        kinds = [{"F": "full", "S": "shared"}.get(c, c) for c in pattern] if isinstance(pattern, str) else pattern
    if kinds is None:
        if mt in ("deepseek_v32", "axk2"):  # an indexer in every layer
            return ["full"] * n_layers
        if mt == "hy_v4":  # HYV4Config.__post_init__
            return ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(n_layers)]
        freq = max(read_int(cfg, "index_topk_freq", default=1, minimum=None), 1)
        offset = read_int(cfg, "index_skip_topk_offset", default=2, minimum=None)
        return ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n_layers)]
    if not isinstance(kinds, list) or len(kinds) != n_layers or not set(kinds) <= {"full", "shared"}:
        raise SpecError("indexer_types", f"must list 'full' or 'shared' for each of the {n_layers} layers")
    if mt in ("deepseek_v32", "axk2") and "shared" in kinds:
        raise SpecError("indexer_types", f"{mt}'s attention runs its own indexer in every layer")
    if kinds[0] == "shared":
        raise SpecError("indexer_types", "the first layer has no full layer before it to share the selection of")
    return list(kinds)


def sparse_family(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(every block, the ModelSpec fields) of a config of the family: layers only."""
    cfg = {**CLASS_DEFAULTS[mt], **{k: v for k, v in cfg.items() if v is not None}}
    read_int(cfg, "q_lora_rank")  # AXK1Attention always has a query latent
    latent = latent_attention(cfg, "deepseek_v3")
    index = {"index_topk": read_int(cfg, "index_topk")}
    own = {**index, "index_heads": read_int(cfg, "index_n_heads"), "index_head_dim": read_int(cfg, "index_head_dim")}
    extra = EXTRA.get(mt, {})
    n_layers = read_int(cfg, "num_hidden_layers")
    activation = read_str(cfg, "hidden_act", default="silu")
    dense = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(activation, True))
    not_modelled: list = [("index_topk", WHY.format(BLOCKS.get(mt, "")))]
    routed = experts(cfg, "deepseek_v3", read_int(cfg, "n_routed_experts", "num_local_experts"),
                     read_int(cfg, "num_experts_per_tok"), read_int(cfg, "moe_intermediate_size"), activation,
                     not_modelled)  # fmt: skip
    layers = []
    for kind, moe in zip(indexer_kinds(cfg, mt, n_layers), routed_layers(cfg, n_layers, 3), strict=True):
        fields = {**latent.to_config(), **extra, **(own if kind == "full" else index)}
        layers.append(LayerSpec(AttentionSpec.from_config(fields), routed if moe else dense))
    return layers, latent_fields(cfg, "deepseek_v3", not_modelled)


MAPPERS = dict.fromkeys(CLASS_DEFAULTS, sparse_family)
