"""A config.json shrunk to the self-check's size with the same flags (attnid.hf.check).

d_model 8, two to four heads keeping MHA / GQA / MQA, head sizes that differ from d_model / heads where the
config's do, half the head rotated where the config rotates part of it, a window shorter than the sequence,
four experts of four units of which two are chosen, small latent ranks, a vocabulary of 32 (more where a
parallel first block's MLP would reach its whole output table at the tiny size though the config's model does
not), two layers, one of each kind where layers differ. Keys are set where the config or its class's defaults
hold them, so a class reads the tiny size wherever it reads its own.
"""

from __future__ import annotations

import copy

from ..model.blocks import MoESpec
from ..model.real import PAD_READS_POSITIONS, SEQ_LEN  # positions per sequence of the whole-model check
from .mapping import TINY_KEYS, TINY_LAYERS, TINY_WRAPPERS, class_config, model_spec, model_type, unread_position_rows

WIDTH, VOCAB, WINDOW, MLP_WIDTH, EXPERT_WIDTH = 8, 32, 4, 16, 4
EXPERT_KEYS = ("moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size")
POSITIONS = 64  # the position range of a model without learned positions; no size the shrinker sets is above it
# (keys, value): every key present in the config (or its class defaults) is set to the value
FIXED = (
    (("hidden_size", "n_embd", "d_model", "emb_dim"), WIDTH),
    (("vocab_size", "decoder_vocab_size"), VOCAB),  # Marian's decoder reads its own
    (("intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size", "ffn_hidden_dim", "dff"), MLP_WIDTH),
    (EXPERT_KEYS, EXPERT_WIDTH),
    (("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"), 4),
    (("num_experts_per_tok", "experts_per_token", "moe_topk", "moe_top_k", "moe_k"), 2),
    (("word_embed_proj_dim",), WIDTH),
    (("kv_lora_rank",), 4),
    (("qk_nope_head_dim",), 4),
    (("qk_rope_head_dim",), 2),
    (("v_head_dim",), 4),
    (("index_n_heads",), 2),  # DeepSeek sparse attention's indexer (its head keeps the 2 rotary dims and 2 more)
    (("index_head_dim",), 4),
    (("index_block_size",), 2),  # MiniMax-M3's block indexer: its top 16 blocks of 2 keys hold the check's sequences
    (("pronunciation_vocab_size", "shape_vocab_size"), VOCAB),
)
# widths of embeddings of their own (ELECTRA, RemBERT, RoCBert, RoFormer): d where the config's equal d, else 2 d
EMBEDDING_KEYS = (
    "embedding_size", "input_embedding_size", "output_embedding_size", "pronunciation_embed_dim", "shape_embed_dim",
)
HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads", "n_heads", "attention_heads")
KV_KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num", "kv_n_heads")
SECTIONS = ("attn_config", "ffn_config")  # sub-configs holding some of those keys (MPT, DBRX)
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "max_target_positions")  # Whisper's decoder


def _class_defaults(mt: str) -> dict:
    """The config class's default values (what `transformers` fills in for keys a config.json leaves out)."""
    from transformers import CONFIG_MAPPING

    try:
        return CONFIG_MAPPING[mt]().to_dict()
    except Exception:  # noqa: BLE001 -- a class that needs arguments: only the config's own keys are shrunk
        return {}


def _set(tiny: dict, defaults: dict, keys, value) -> None:
    for key in keys:
        if tiny.get(key) is not None or (key not in tiny and defaults.get(key) is not None):
            tiny[key] = value


def _layers_kept(cfg: dict, n_layers: int, spec) -> list[int]:
    """The layer indices the tiny model keeps: one of each distinct block (attention spec and MLP kind), two at least."""
    kinds = [(b.attention, type(b.mlp).__name__) for b in spec.layer_specs]  # a layer without RoPE is its own kind
    kept = sorted({kinds.index(k) for k in kinds})
    return (kept + [i for i in range(n_layers) if i not in kept])[: max(2, len(kept))]


def tiny_config(cfg: dict) -> dict:
    """The config shrunk to the self-check's size, with the same flags (module docstring); a multimodal wrapper's
    text model shrunk so, its towers by its family (`attnid.hf.mapping.TINY_WRAPPERS`)."""
    mt = model_type(cfg)
    tiny = _tiny_text(cfg, mt)
    return TINY_WRAPPERS[mt](cfg, mt, tiny) if mt in TINY_WRAPPERS else tiny


def _tiny_text(cfg: dict, mt: str) -> dict:
    """The text model's keys of a config of mapped type `mt`, shrunk (module docstring)."""
    cfg = class_config(cfg)
    spec = model_spec(cfg)
    defaults = _class_defaults(cfg["model_type"])
    tiny = copy.deepcopy(cfg)
    a = spec.attention
    gqa, mqa = 1 < a.n_kv_heads < a.n_heads, a.n_kv_heads == 1 < a.n_heads
    H = 4 if gqa else 2
    for section, section_defaults in [(tiny, defaults)] + [
        (tiny[key], defaults.get(key) or {}) for key in SECTIONS if isinstance(tiny.get(key), dict)
    ]:
        for keys, value in FIXED:
            _set(section, section_defaults, keys, value)
        _set(section, section_defaults, HEAD_KEYS, H)
        _set(section, section_defaults, KV_KEYS, 2 if gqa else (1 if mqa else H))
    experts = any(isinstance(b.mlp, MoESpec) for b in spec.layer_specs)
    if experts and not any(k in cfg or defaults.get(k) is not None for k in EXPERT_KEYS):  # experts read the MLP width
        tiny["intermediate_size"] = EXPERT_WIDTH  # (Mixtral, GPT-OSS): four units each, a quarter of the parameters
    for key in KV_KEYS:  # null means one key/value head per head, which a class may read as it is (Nemotron)
        if key in tiny and tiny[key] is None:
            tiny[key] = H
    partial = 0 < a.rope_dims < a.d_head_qk and not a.kv_lora_rank
    if tiny.get("head_dim") is not None or "head_dim" in defaults:  # the class reads a head size of its own
        # a partly rotated head keeps four dims at least, so that half of it is one whole plane
        tiny["head_dim"] = 6 if a.d_head_qk * a.n_heads != a.d_model else (4 if H == 2 or partial else 2)
    if isinstance(tiny.get("rope_parameters"), dict) and 0 < (tiny["rope_parameters"].get("partial_rotary_factor") or 1) < 1:
        tiny["rope_parameters"] = {**tiny["rope_parameters"], "partial_rotary_factor": 0.5}
    if a.kv_lora_rank:  # latent attention: head_dim names the rotary dims, qk_head_dim the query/key head
        if "head_dim" in tiny or "head_dim" in defaults:
            tiny["head_dim"] = tiny["qk_rope_head_dim"]
        if "qk_head_dim" in tiny or "qk_head_dim" in defaults:
            tiny["qk_head_dim"] = tiny["qk_nope_head_dim"] + tiny["qk_rope_head_dim"]
    if partial:  # partial rotary: half of the tiny head
        for key in ("partial_rotary_factor", "rotary_pct"):
            _set(tiny, defaults, (key,), 0.5)
        if tiny.get("rotary_dim"):
            tiny["rotary_dim"] = WIDTH // H // 2
    if tiny.get("q_lora_rank"):
        tiny["q_lora_rank"] = 6
    for key in ("n_group", "topk_group", "first_k_dense_replace"):  # set in the config or by its class's defaults
        if tiny.get(key, defaults.get(key)):
            tiny[key] = 1
    if tiny.get("shared_intermediate_size"):  # Granite's shared expert, only where the config has one (0: none)
        tiny["shared_intermediate_size"] = 4
    for key in ("sliding_window", "window_size", "attention_window_size"):  # GPT-Neo's, RecurrentGemma's
        if tiny.get(key):
            tiny[key] = WINDOW
    if cfg["model_type"] in TINY_LAYERS:  # a hybrid: its blocks are the attention layers only; its family picks
        tiny.update(TINY_LAYERS[cfg["model_type"]](cfg, cfg["model_type"]))  # the model's layers
        _set(tiny, defaults, POSITION_KEYS, SEQ_LEN if spec.positions == "learned" else POSITIONS)
        return tiny
    _shrink_layers(tiny, cfg, defaults, spec, H)
    tiny.update(TINY_KEYS.get(cfg["model_type"], {}))  # keys a family fixes in its tiny model (XLM's pad id)
    return _data_limited_table(tiny, spec)


def _shrink_layers(tiny: dict, cfg: dict, defaults: dict, spec, H: int) -> None:
    """The tiny model's layers (`_layers_kept`), their per-layer lists, embeddings and position table, in place."""
    n_layers = spec.n_layers
    kept = _layers_kept(cfg, n_layers, spec)
    for key, value in cfg.items():  # per-layer lists (layer_types, no_rope_layers, ...): the kept layers' entries
        if isinstance(value, list) and len(value) == n_layers:
            tiny[key] = [value[i] for i in kept]
    if isinstance(tiny.get("per_layer_config"), dict):
        tiny["per_layer_config"] = _per_layer_config(tiny, kept, H)
    if isinstance(tiny.get("num_attention_heads_per_layer"), list):  # Laguna's head count per layer: the tiny one
        tiny["num_attention_heads_per_layer"] = [H] * len(kept)
    if isinstance(tiny.get("attention_types"), list):  # GPT-Neo: [[kinds, repeats]], one entry per kept layer
        kinds = ["local" if spec.layer_specs[i].attention.sliding_window else "global" for i in kept]
        tiny["attention_types"] = [[[kind], 1] for kind in kinds]
    if tiny.get("sliding_window_pattern"):
        tiny["sliding_window_pattern"] = 2
    if tiny.get("max_window_layers") is not None:
        tiny["max_window_layers"] = 1
    if isinstance(tiny.get("mlp_only_layers"), list):
        tiny["mlp_only_layers"] = [kept.index(i) for i in tiny["mlp_only_layers"] if i in kept]
    for key in EMBEDDING_KEYS:
        if tiny.get(key) is not None:
            tiny[key] = WIDTH if tiny[key] == cfg.get("hidden_size") else 2 * WIDTH
    _set(tiny, defaults, LAYER_KEYS, len(kept))
    unread = unread_position_rows(cfg)  # RoBERTa's table: padding_idx + 1 rows before the first token's
    _set(tiny, defaults, POSITION_KEYS, SEQ_LEN + unread if spec.positions == "learned" else POSITIONS)
    if unread:
        tiny[PAD_READS_POSITIONS] = True  # the real class keeps its pad token id (attnid.model.real.real_config)


def _per_layer_config(tiny: dict, kept: list[int], H: int) -> dict:
    """Dots3-Note's per_layer_config {layer index: the keys that differ}: the kept layers' entries, renumbered, at the
    tiny sizes (a latent layer's head_dim its nope and rotary dims, as Dots3NoteTextConfig demands of them)."""
    entries = {int(k): v for k, v in tiny["per_layer_config"].items()}
    out = {}
    for j, i in enumerate(kept):
        if i not in entries:
            continue
        entry = dict(entries[i])
        for keys, value in FIXED + ((HEAD_KEYS + KV_KEYS, H), (("q_lora_rank",), 6)):
            entry.update({key: value for key in keys if key in entry})
        if "qk_nope_head_dim" in entry or "qk_rope_head_dim" in entry:
            entry["head_dim"] = tiny["qk_nope_head_dim"] + tiny["qk_rope_head_dim"]
        out[str(j)] = entry
    return out


def _data_limited_table(tiny: dict, spec) -> dict:
    """The tiny config with a vocabulary large enough that a parallel first block's MLP does not reach its whole
    V x d output table (`attnid.model.counting.token_points.first_mlp_table`) when the config's own model does not
    (Cohere, GPT-J: a tiny vocabulary would measure another regime than the model's): VOCAB doubled until it does
    not."""
    from ..model.counting.residual import Stream
    from ..model.counting.token_points import table_excess

    def free_table(spec) -> int:
        stream = Stream.of(spec)
        return table_excess(spec, stream.d_c, stream.d_out, stream.d_const)

    if free_table(spec):
        return tiny  # the model's own table is free (Falcon-40B): the tiny one stays so
    while True:
        spec = model_spec(tiny, seq_len=SEQ_LEN)
        if spec.vocab_size >= 16 * VOCAB or not free_table(spec):
            return tiny
        tiny = {**tiny, "vocab_size": 2 * spec.vocab_size}

