"""Dots3-Note's text model (`transformers` 5.24, models/dots3_note/modular_dots3_note.py; keys a config leaves out take
the class defaults of Dots3NoteTextConfig): layers only. The causal LM registered for dots3_note is the same text model
(AutoModelForCausalLM builds Dots3NoteForCausalLM from Dots3NoteConfig's text_config), so both types map it.

    layers      layer_types: indexed_attention (DeepSeek sparse attention), sliding_attention, or full_attention
                (legacy use_dsa false); by default (Dots3NoteTextConfig.__post_init__) the first two and every
                i % 4 == 1 full (indexed), the others sliding (use_sliding_window, default true)
    sizes       per_layer_config {layer index: the keys that differ}; a config without it (legacy) gives every
                sliding layer the swa_* keys (heads 64, q_lora_rank 1024, kv_lora_rank 1024, qk_nope_head_dim 192,
                v_head_dim 128, head_dim 256, qk_rope_head_dim head_dim - qk_nope_head_dim)
    attention   Dots3NoteTextAttention (DeepseekV3Attention's projections, a query latent required): the latent
                RMSNorms with rms_norm_eps, each latent times a constant (q_lora_scale, kv_lora_scale: count-neutral),
                an RMSNorm with a gain on the shared RoPE key (k_rope_only_layernorm: attnid.layer.spec_latent's
                shared_key_norm), interleaved RoPE on it at rope_parameters[layer type]'s theta, a sigmoid gate per
                head (g_proj (H, d)) on the output; the window sliding_window on the sliding layers; on the indexed
                layers Dots3NoteTextIndexer (GLM-MoE-DSA's indexer: attnid.hf.mapping.sparse), counted on
                T <= index_topk
    blocks      dense then routed MLPs (mlp_layer_types): not modelled (layers only)
"""

from __future__ import annotations

from ...errors import SpecError
from ...layer.spec import AttentionSpec
from ...model.blocks import LayerSpec, MLPSpec
from .keys import read_flag, read_float, read_int, read_section

KINDS = ("indexed_attention", "sliding_attention", "full_attention")
SWA_DEFAULTS = {"num_attention_heads": 64, "q_lora_rank": 1024, "kv_lora_rank": 1024, "head_dim": 256,
                "qk_nope_head_dim": 192, "v_head_dim": 128}  # fmt: skip
THETAS = {"sliding_attention": 50_000.0}  # else default_theta 8e7 (Dots3NoteTextConfig.convert_rope_params_to_dict)
WHY = "Dots3-Note's dense and routed blocks and its indexer are not modelled whole: the attention layers count alone"


def layer_kinds(cfg: dict, n_layers: int) -> list[str]:
    """The attention kind of every layer (module docstring)."""
    kinds = cfg.get("layer_types")
    use_dsa = cfg.get("use_dsa", None if "per_layer_config" in cfg else True)
    if kinds is None:
        full = "full_attention" if use_dsa is False else "indexed_attention"
        sliding = read_flag(cfg, "use_sliding_window", True)
        kinds = [full if not sliding or i < 2 or i % 4 == 1 else "sliding_attention" for i in range(n_layers)]
    if not isinstance(kinds, list) or len(kinds) != n_layers or not set(kinds) <= set(KINDS):
        raise SpecError("layer_types", f"must list one of {', '.join(KINDS)} for each of the {n_layers} layers")
    if use_dsa is not None:  # the legacy flag renames the full layers
        old, new = ("full_attention", "indexed_attention") if use_dsa else ("indexed_attention", "full_attention")
        kinds = [new if kind == old else kind for kind in kinds]
    return list(kinds)


def layer_sizes(cfg: dict, kinds: list[str]) -> list[dict]:
    """Every layer's config: the model's keys, then its per_layer_config entry (or the swa_* keys of a legacy one)."""
    overrides = {}
    if "per_layer_config" in cfg:
        for key, value in read_section(cfg, "per_layer_config").items():
            if not str(key).isdigit() or not isinstance(value, dict):
                raise SpecError("per_layer_config", f"must map layer indices to objects, got {key!r}: {value!r}")
            overrides[int(key)] = value
    else:
        swa = {k: cfg.get(f"swa_{k}", v) for k, v in SWA_DEFAULTS.items()}
        swa["qk_rope_head_dim"] = cfg.get("swa_qk_rope_head_dim", swa["head_dim"] - swa["qk_nope_head_dim"])
        overrides = {i: swa for i, kind in enumerate(kinds) if kind == "sliding_attention"}
    return [{**cfg, **overrides.get(i, {})} for i in range(len(kinds))]


def _attention(layer: dict, kind: str, cfg: dict) -> AttentionSpec:
    d, H = read_int(layer, "hidden_size"), read_int(layer, "num_attention_heads")
    nope, p = read_int(layer, "qk_nope_head_dim"), read_int(layer, "qk_rope_head_dim")
    if read_flag(layer, "attention_bias", False):
        raise SpecError("attention_bias", "true biases the latent down-projections and o_proj: not modelled")
    theta = read_float(read_section(read_section(cfg, "rope_parameters"), kind), "rope_theta",
                       default=THETAS.get(kind, read_float(cfg, "rope_theta", default=8e7)))  # fmt: skip
    window = read_int(cfg, "sliding_window", "sliding_window_size", default=512)
    indexed = {"index_topk": read_int(cfg, "index_topk", default=2048), "index_heads": read_int(cfg, "index_n_heads",
               default=64), "index_head_dim": read_int(cfg, "index_head_dim", default=128)}  # fmt: skip
    return AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=H, d_head_qk=nope + p, d_head_v=read_int(layer, "v_head_dim"), rope_dims=p,
        rope_base=theta, causal=True, kv_lora_rank=read_int(layer, "kv_lora_rank"),
        q_lora_rank=read_int(layer, "q_lora_rank"), norm_eps=read_float(layer, "rms_norm_eps", default=1e-5),
        shared_key_norm=True, output_gate="head",
        sliding_window=window if kind == "sliding_attention" else 0, **(indexed if kind == "indexed_attention" else {}),
    )  # fmt: skip


def dots(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(every block, the ModelSpec fields): layers only."""
    kinds = layer_kinds(cfg, read_int(cfg, "num_hidden_layers"))
    mlp = MLPSpec(read_int(cfg, "intermediate_size", default=13824), "swiglu", False)  # not modelled (WHY)
    layers = [LayerSpec(_attention(layer, kind, cfg), mlp) for layer, kind in zip(layer_sizes(cfg, kinds), kinds)]
    eps = read_float(cfg, "rms_norm_eps", default=1e-5)
    fields = {"positions": "rope", "norm": "rmsnorm", "norm_bias": False, "norm_eps": eps,
              "tied": read_flag(cfg, "tie_word_embeddings", False),
              "not_modelled": (("mlp_layer_types", WHY),)}  # fmt: skip
    return layers, fields


MAPPERS = {"dots3_note_text": dots, "dots3_note": dots}
