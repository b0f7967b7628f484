"""Cohere (Command-R) and Cohere-2: parallel blocks, h = h + Attn(Norm h) + MLP(Norm h) with one norm for both,
behind CohereLayerNorm, a LayerNorm with a gain and no bias (`transformers` 5.24, models/cohere/modular_cohere.py,
models/cohere2/modular_cohere2.py):

    attention    LlamaAttention's projections: `attention_bias` on q/k/v/o_proj; interleaved RoPE on the whole head
    q/k norms    Cohere's use_qk_norm: CohereLayerNorm of shape (heads, head_dim), a LayerNorm per head with every
                 head's own gain and no bias; Cohere-2 has none
    windows      Cohere-2: `layer_types` (else every sliding_window_pattern-th layer, 4, is full); RoPE only on the
                 sliding layers (`if self.sliding_window is not None`), the full layers have none; head size d / H
                 (Cohere2Config sets head_dim so)
    MLP          SwiGLU without bias
    head         tied by default; the logits times logit_scale (a nonzero constant: count-neutral)

Cohere-2-MoE (models/cohere2_moe/modular_cohere2_moe.py) is Cohere-2's parallel block with head_dim read, its one norm
an RMSNorm when rms_norm_eps is set (else Cohere's LayerNorm), RoPE also on the dense layers when
prefix_dense_sliding_window_pattern is 1 (Cohere2MoeAttention.force_rope), and per mlp_layer_types a dense SwiGLU of
prefix_dense_intermediate_size (default intermediate_size) or experts (`experts`, Cohere2MoeSparseMoeBlock).
"""

from __future__ import annotations

from ...errors import SpecError
from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .experts import experts
from .keys import head_sizes, layer_types, mlp_kind, read_flag, read_float, read_int, read_str, rope, routed_layers

MODEL_TYPES = ("cohere", "cohere2", "cohere2_moe")


def _types(cfg: dict, mt: str, n_layers: int) -> list[str]:
    if mt == "cohere":
        return ["full_attention"] * n_layers
    if "layer_types" in cfg or "sliding_window_pattern" in cfg:
        return layer_types(cfg, n_layers)
    return ["sliding_attention" if (i + 1) % 4 else "full_attention" for i in range(n_layers)]


def cohere_family(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(every block, the ModelSpec fields) of a config of the family."""
    d, H, G, k = head_sizes({**cfg, "head_dim": None} if mt == "cohere2" else cfg)
    n_layers = read_int(cfg, "num_hidden_layers")
    rms = mt == "cohere2_moe" and cfg.get("rms_norm_eps") is not None
    eps = read_float(cfg, "rms_norm_eps" if rms else "layer_norm_eps", default=1e-5)
    if read_float(cfg, "logit_scale", default=0.0625) == 0:
        raise SpecError("logit_scale", "0 makes the logits constant: not modelled")
    qk = (
        {"qk_norm": "layernorm_heads", "norm_eps": eps}
        if mt == "cohere" and read_flag(cfg, "use_qk_norm", False)
        else {}
    )
    window = read_int(cfg, "sliding_window", default=0, minimum=0) if mt != "cohere" else 0
    biases = "qkvo" if read_flag(cfg, "attention_bias", False) else ""
    not_modelled: list = []
    mlps, forced = _mlps(cfg, mt, n_layers, not_modelled)
    layers = []
    for t, mlp, force_rope in zip(_types(cfg, mt, n_layers), mlps, forced, strict=True):
        w = window if t == "sliding_attention" else 0
        rotary = mt == "cohere" or w > 0 or force_rope
        attention = AttentionSpec(
            d_model=d, n_heads=H, n_kv_heads=G, d_head_qk=k, rope_dims=k // 2 * 2 if rotary else 0, biases=biases,
            causal=True, rope_base=rope(cfg), sliding_window=w, **qk,
        )  # fmt: skip
        layers.append(LayerSpec(attention, mlp))
    rotary_layers = any(x.attention.rope_dims for x in layers)
    fields = {
        "positions": "rope" if rotary_layers else "none", "norm": "rmsnorm" if rms else "layernorm",
        "norm_bias": False, "norm_eps": eps, "parallel": True, "shared_norm": True,
        "tied": read_flag(cfg, "tie_word_embeddings", True), "not_modelled": tuple(not_modelled),
    }  # fmt: skip
    return layers, fields


def _mlps(cfg: dict, mt: str, n_layers: int, not_modelled: list) -> tuple[list, list[bool]]:
    """Every block's MLP, and whether its attention takes RoPE without a window (Cohere-2-MoE's dense prefix)."""
    activation = read_str(cfg, "hidden_act", default="silu")
    dense = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(activation, True))
    if mt != "cohere2_moe":
        return [dense] * n_layers, [False] * n_layers
    sparse = routed_layers(cfg, n_layers, 0)
    width = read_int(cfg, "prefix_dense_intermediate_size", default=dense.d_ff)
    n_experts, top_k = read_int(cfg, "num_experts"), read_int(cfg, "num_experts_per_tok")
    routed = experts(cfg, mt, n_experts, top_k, dense.d_ff, activation, not_modelled)
    prefix_rope = read_int(cfg, "prefix_dense_sliding_window_pattern", default=1, minimum=0) == 1
    mlps = [routed if moe else MLPSpec(width, dense.kind) for moe in sparse]
    return mlps, [prefix_rope and not moe for moe in sparse]


MAPPERS = dict.fromkeys(MODEL_TYPES, cohere_family)
