"""A Hugging Face `config.json` -> :class:`attnid.model.ModelSpec`: the one place that reads config keys.

The published file is read as a plain mapping (no `transformers` import, no network), so a legacy key
that a `transformers` config class would silently ignore (Falcon's `n_head`, `n_head_kv`, `n_layer`) is
still read. What the code of a model class fixes rather than its config is written down in the module
of its family: every module here that defines MAPPERS = {model_type: mapper} (a mapper returns every block and
the other ModelSpec fields) and, where the family needs them, these dicts by model type, collected the same way:

    REFUSED           why a type the family examined is not mapped
    NAME_MAPS         its classes' parameters written onto the layout, in the words of `.names`
    TINY_LAYERS       the layers of a hybrid's tiny self-check model
    DEFAULT_GAPS      what its config class leaves None though its model class needs it
    CLASS_KEYS        a legacy config's keys rewritten as its config class reads them (Falcon's RefinedWeb)
    REAL_ATTENTION    the attention class the module-level check builds (`.real_attention`)
    DECODERS          a causal LM that is the decoder of an encoder-decoder config (is_encoder_decoder unread)
    DECODER_SECTIONS  a composite config whose causal LM is built from its `decoder` section (MusicGen)
    TEXT_MODELS       a multimodal wrapper's text model type (`.wrappers`: read by `text_config`, `model_type`)
    TINY_KEYS         keys its tiny model fixes after shrinking (XLM's)
    ENCODERS          an encoder listed beside the causal LMs, with the class its self-check builds (BERT's)
    CHECK_CLASSES     the registered class the self-check builds for a text model type (Emu3's)
    TOWER_MODULES     a wrapper's tower submodules, which the self-check passes over
    TINY_WRAPPERS     a wrapper's tiny config around its tiny text model (`.wrappers`)

each fact with where it comes from. Adding a family is one module here (and its tests):

    llama      Llama, Mistral, Mixtral, Qwen2/3, Qwen3-MoE, Gemma 1-3, OLMo-2/3, Phi-3, GPT-OSS and the dense
               relatives with RMSNorm (Arcee, Apertus, Helium, EXAONE 3/4, ERNIE-4.5, Seed-OSS, SmolLM3,
               Ministral 1/3, InternLM-3, IQuestCoder, HunYuan-Dense, GLM 1/4, CWM, VaultGemma, Granite,
               Granite-SWA, HyperCLOVAX, NanoChat, BitNet, Emu3's text model; Moshi's text decoder: layers only)
    layernorm  StarCoder2, StableLM, Persimmon, Nemotron, Jais-2, OLMo (LayerNorm blocks)
    cohere     Cohere, Cohere-2 (parallel blocks behind a LayerNorm without bias), Cohere-2-MoE (layers only)
    deepseek   DeepSeek-V2/V3, GLM-4.7-Flash (latent attention, dense then routed blocks), Youtu, MiniCPM3
               (dense); A.X-K1, LongCat-Flash (layers only)
    experts    the mixtures of experts of those
    gpt2       GPT-2, GPT-SW3, GPTBigCode, GPT-Neo, GPT-1
    opt        OPT, BioGPT, XGLM
    ctrl       CTRL
    mpt        MPT, DBRX
    routed     the Llama-shaped mixtures of experts: Qwen2-MoE, OLMoE, FlexOlmo, Granite-MoE, Ernie-4.5-MoE,
               GLM-4.5, dots1, EXAONE-MoE, Solar-Open, Sarvam-MoE, MiniMax-M2, MiMo-V2-Flash, PhiMoE, HunYuan-MoE,
               Aria's text model, Mellum, HY-V3, Kolibri-1; MiniMax-M3's text model (layers only)
    llama4     Llama-4's text model (gain-free q/k norms, chunks, a query temperature; layers only)
    gemma4     Gemma-4's and Gemma-3n's text models (a gain-free norm on every value head; layers only)
    parallel   GPT-J, CodeGen, GPT-NeoX (and its Japanese), Phi, Falcon (parallel blocks)
    bloom      BLOOM
    bert       BERT (as BertForMaskedLM) and its relatives (ERNIE, BERT-Generation, Megatron-BERT, the RoBERTas,
               ELECTRA, RemBERT, RoCBert, RoFormer; GIT's decoder, XLM: layers only)
    hybrid     Jamba, Bamba, Falcon-H1, LFM2, LFM3, Nemotron-H, RecurrentGemma, MiniMax, OLMo-hybrid, Lara-mini,
               Qwen3-Next, Qwen3.5 (+ text, MoE): their softmax-attention layers only (layers only)
    modernbert ModernBERT's decoder (per layer)
    gated      AfMoE, Laguna, Beam: mixtures of experts with gated attention (sigmoid or softplus, per element or
               per head, Beam's gate bias): their attention layers (layers only); HRM-Text (layers only)
    diffllama  DiffLlama: differential attention (layers only)
    seq2seq    the decoders of encoder-decoder models: BART, mBART, PLBart, MVP, Blenderbot (+ small), BigBird-Pegasus,
               Marian, Pegasus, TrOCR, Whisper, MusicGen (self- and cross-attention), MusicGen-Melody (layers only)
    sparse     DeepSeek-V3.2, GLM-MoE-DSA, HY-V4, A.X-K2: latent attention with DeepSeek sparse attention's indexer (its
               parameters unidentified, counted on T <= index_topk; layers only)
    dots       Dots3-Note's text model (latent attention with a normed shared key, a gate per head, the indexer,
               sliding layers of their own sizes; layers only)
    minimax_m3 MiniMax-M3's text model (per-head q/k norms; its sparse layers' block indexer: layers only)
    latent_hybrid  Kimi-Linear (latent attention without RoPE), Bailing-hybrid (latent attention with a gate per
               head): their latent-attention layers only (layers only)
    wrappers   Gemma-3, Gemma-4 (+ unified), GOT-OCR2, Fuyu, Phi-4-multimodal, MOSS-transcribe: multimodal wrappers
               whose text model a family maps (layers only: the towers named); Emu3, whose causal LM is its text
               model (TEXT_MODELS: a wrapper -> its text model's type, read by `text_config` and `model_type`)

Every block's attention layer is exact (per-layer counts need nothing else). What the whole-model count
does not model is recorded in `ModelSpec.not_modelled` (the key and why), and `count_model` refuses it by
that key; a feature the attention count does not model is refused here, with a SpecError naming the key,
so the caller never sees a wrong number.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from pathlib import Path

from ...errors import SpecError
from ...model.spec import ModelSpec
from .keys import read_int, read_str, refuse_if


def _family_mappers(attribute: str = "MAPPERS") -> dict:
    """model_type -> mapper, from every module of this package that defines MAPPERS (one module per family);
    attribute="NAME_MAPS": model_type -> its class's name map (`attnid.hf.mapping.names`)."""
    mappers = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        family = importlib.import_module(f"{__name__}.{info.name}")
        for mt, mapper in getattr(family, attribute, {}).items():
            if mt in mappers:
                raise RuntimeError(f"model_type {mt!r} is mapped by two families ({info.name} and another)")
            mappers[mt] = mapper
    return mappers


def _family_refusals() -> dict:
    """model_type -> why it is not mapped, from every family module that defines REFUSED."""
    refused = {}
    for info in pkgutil.iter_modules(__path__):
        refused.update(getattr(importlib.import_module(f"{__name__}.{info.name}"), "REFUSED", {}))
    return refused


MAPPERS = _family_mappers()
NAME_MAPS = _family_mappers("NAME_MAPS")  # model_type -> names(spec, cfg): its class's parameters <-> the layout
TINY_LAYERS = _family_mappers("TINY_LAYERS")  # model_type -> the layer keys of its tiny model (hybrids: `.hybrid`)
TINY_KEYS = _family_mappers("TINY_KEYS")  # model_type -> keys its tiny model fixes after shrinking (XLM: `.bert`)
DEFAULT_GAPS = _family_mappers("DEFAULT_GAPS")  # model_type -> keys its config class leaves None (hf.coverage)
CLASS_KEYS = _family_mappers("CLASS_KEYS")  # legacy model_type -> its keys rewritten as its config class reads them
REAL_ATTENTION = _family_mappers("REAL_ATTENTION")  # model_type -> its attention class (`.real_attention`)
DECODERS = _family_mappers("DECODERS")  # model_type -> why is_encoder_decoder is not read (`.seq2seq`)
DECODER_SECTIONS = _family_mappers("DECODER_SECTIONS")  # model_type -> its `decoder` section's model type (MusicGen)
TEXT_MODELS = _family_mappers("TEXT_MODELS")  # a multimodal wrapper -> its text model's type (`.wrappers`)
ENCODERS = _family_mappers("ENCODERS")  # an encoder listed beside the causal LMs -> its self-check's class (`.bert`)
CHECK_CLASSES = _family_mappers("CHECK_CLASSES")  # a text model type -> the registered class its check builds (Emu3's)
TOWER_MODULES = _family_mappers("TOWER_MODULES")  # a wrapper -> its towers' submodules, no part of its text model
TINY_WRAPPERS = _family_mappers("TINY_WRAPPERS")  # a wrapper -> its tiny config around its tiny text model
REFUSED = _family_refusals()
SUPPORTED_MODEL_TYPES = tuple(sorted(MAPPERS))
DEFAULT_SEQ_LEN = 2048  # positions counted where a model without learned positions names no maximum (Falcon, BLOOM)


def load_config(path) -> dict:
    """The mapping of a `config.json` file (SpecError naming `hf_config` when it cannot be read)."""
    path = Path(path)
    try:
        cfg = json.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError("hf_config", f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError("hf_config", f"{path} cannot be read ({err})") from None
    except json.JSONDecodeError as err:
        raise SpecError("hf_config", f"{path} is not valid JSON ({err})") from None
    if not isinstance(cfg, dict):
        raise SpecError("hf_config", f"{path} does not hold a JSON object")
    return cfg


def text_config(cfg: dict) -> dict:
    """The language model's keys: Gemma-3 and other multimodal configs keep them under `text_config` (its model type,
    where the section names none, the one its wrapper's family names: TEXT_MODELS), MusicGen's composite configs
    under `decoder` (DECODER_SECTIONS)."""
    if cfg.get("model_type") in DECODER_SECTIONS and isinstance(cfg.get("decoder"), dict):
        return {**cfg["decoder"], "model_type": DECODER_SECTIONS[cfg["model_type"]]}
    if isinstance(cfg.get("text_config"), dict):
        outer = cfg.get("model_type")
        return {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type", TEXT_MODELS.get(outer, outer))}
    return cfg


def class_config(cfg: dict) -> dict:
    """The keys the text model's `transformers` config class reads: `text_config`'s (a wrapper's text model, a
    composite config's decoder), a legacy config's rewritten (CLASS_KEYS: Falcon's RefinedWeb keys), private ("_...")
    keys dropped."""
    mt = model_type(cfg)
    cfg = {k: v for k, v in text_config(cfg).items() if not k.startswith("_")}
    return CLASS_KEYS[mt](cfg) if mt in CLASS_KEYS else cfg


def model_type(cfg: dict) -> str:
    """The config's model type as the mapping names it: a mapped wrapper's own (TEXT_MODELS), else its text model's
    (`text_config`; a composite config's own for its decoder section, DECODER_SECTIONS); refused when not mapped."""
    mt = cfg.get("model_type")
    if mt not in TEXT_MODELS:
        mt = read_str(text_config(cfg), "model_type")
        mt = {section: t for t, section in DECODER_SECTIONS.items()}.get(mt, mt)
    if mt in REFUSED:
        raise SpecError("model_type", f"{mt!r} is not mapped: {REFUSED[mt]}")
    if mt not in MAPPERS:
        raise SpecError("model_type", f"{mt!r} is not mapped; supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
    return mt


def _mapped(cfg: dict) -> tuple[str, list, dict]:
    """(model type, blocks, ModelSpec fields) of a config: a wrapper's family reads the whole config, the others
    their text model's keys."""
    mt = model_type(cfg)
    layers, fields = MAPPERS[mt](cfg if mt in TEXT_MODELS else text_config(cfg), mt)
    return mt, layers, fields


def model_spec(cfg: dict, seq_len: int | None = None) -> ModelSpec:
    """The ModelSpec of a config mapping, used on seq_len positions (default: the config's maximum; 2048
    for a model without learned positions that names none; the class default for learned ones)."""
    if model_type(cfg) not in DECODERS:
        refuse_if(text_config(cfg), "is_encoder_decoder", bool, "encoder-decoder models are not modelled")
    _, layers, fields = _mapped(cfg)
    cfg = text_config(cfg)
    most = read_int(cfg, "max_position_embeddings", "n_positions", default=fields.pop("max_positions_default", None))
    unread = fields.pop("unread_position_rows", 0)  # rows of the table no token of a full sequence reads
    if seq_len is None:
        seq_len = most - unread if most is not None else DEFAULT_SEQ_LEN
    max_positions = (most or seq_len) + fields.pop("position_offset", 0)  # rows before the offset are never read
    if fields["positions"] != "learned":  # no table: the model takes any length
        max_positions = max(max_positions, seq_len)
    if unread and seq_len > max_positions - unread:
        raise SpecError("seq_len", f"{seq_len} positions: the table's first {unread} rows take no token's position")
    if fields.get("pad_token") is not None:  # the pad's own row, last in the layout (the family's name map)
        fields["pad_row"] = max_positions - 1
    return ModelSpec.from_layers(
        layers, vocab_size=read_int(cfg, "vocab_size"), max_positions=max_positions, seq_len=seq_len, **fields
    )


def unread_position_rows(cfg: dict) -> int:
    """Rows of a config's learned position table that no token of a sequence of the longest length reads
    (RoBERTa's first padding_idx + 1: its real tokens' position ids start there), 0 for most types."""
    return _mapped(cfg)[2].get("unread_position_rows", 0)
