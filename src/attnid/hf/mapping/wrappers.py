"""Multimodal wrappers whose language model a family maps: the wrapper is its text model's family plus the towers
the registered class holds beside it. The text model's attention layers are counted through the family of its
config (the `text_config` section, or the wrapper's own keys where it has none); each tower is named in
`not_modelled`, so the whole model is refused and the layers are counted ("layers only"). What each registered
class holds (`transformers` 5.24, models/<type>/modeling_<type>.py, the class of MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):

    gemma3           Gemma3ForConditionalGeneration: model.language_model (Gemma3TextModel, text_config gemma3_text),
                     model.vision_tower (SigLIP) and model.multi_modal_projector
    gemma4           Gemma4ForConditionalGeneration: model.language_model (Gemma4TextModel, text_config gemma4_text),
                     a vision tower (model.vision_tower, model.embed_vision) where vision_config is set and an
                     audio tower (model.audio_tower, model.embed_audio) where audio_config is set
    gemma4_unified   Gemma4UnifiedForConditionalGeneration: the same around Gemma4UnifiedTextModel
    got_ocr2         GotOcr2ForConditionalGeneration: model.language_model (text_config, Qwen2 by default),
                     model.vision_tower (a SAM-style ViT, GotOcr2VisionEncoder) and model.multi_modal_projector
    fuyu             FuyuForCausalLM: model.language_model (text_config, Persimmon by default) and a linear patch
                     embedding of the image (model.vision_embed_tokens)
    phi4_multimodal  Phi4MultimodalForCausalLM: Phi-3's decoder (Phi4MultimodalConfig is Phi3Config: its own keys)
                     whose embedding holds a SigLIP image encoder and a Conformer audio encoder
                     (model.embed_tokens_extend)
    moss_transcribe_diarize  MossTranscribeDiarizeForConditionalGeneration: model.language_model (text_config, Qwen3 by
                     default), model.audio_tower (a Whisper-style encoder) and model.multi_modal_projector
    emu3             Emu3ForCausalLM is built from text_config alone (the auto class builds a class whose config
                     class is the text config's from that section, models/auto/auto_factory.py): the Llama model
                     of Emu3TextModel; the VQ-VAE image tokenizer is Emu3ForConditionalGeneration's, not this
                     class's. No tower: the whole model is its text model

On text alone (no pixel values, no audio features) each class runs its text model on the token embeddings, so the
self-check (`attnid.hf.check`) builds the registered class at the tiny size, towers shrunk (TINY_TOWERS), and
measures the attention modules of its text model (the modules under a tower, TOWERS, are not its layers).
"""

from __future__ import annotations

from ...errors import SpecError

# wrapper -> the model type of its text model where its config does not name one (the family that maps it)
TEXT_MODELS = {
    "gemma3": "gemma3_text", "gemma4": "gemma4_text", "gemma4_unified": "gemma4_unified_text", "got_ocr2": "qwen2",
    "fuyu": "persimmon", "phi4_multimodal": "phi3", "emu3": "emu3_text_model", "moss_transcribe_diarize": "qwen3",
}  # fmt: skip
# a text model type that no causal LM registers, with the class its wrapper's config builds from that section
# alone (Emu3ForCausalLM's config class is Emu3TextConfig)
TEXT_CLASSES = {"emu3_text_model": "Emu3ForCausalLM"}
# the wrapper's own keys are its text model's (no text_config section)
FLAT = ("phi4_multimodal",)
_SIGLIP = "a SigLIP vision tower"
# wrapper -> (config key that holds the tower, its modules in the registered class, what it is); a tower whose key
# the config leaves null is not built
TOWERS = {
    "gemma3": (("vision_config", ("model.vision_tower", "model.multi_modal_projector"), f"{_SIGLIP} and projector"),),
    "gemma4": (
        ("vision_config", ("model.vision_tower", "model.embed_vision"), "a vision tower and its embedding"),
        ("audio_config", ("model.audio_tower", "model.embed_audio"), "an audio tower and its embedding"),
    ),
    "got_ocr2": (
        ("vision_config", ("model.vision_tower", "model.multi_modal_projector"), "a SAM-style ViT and projector"),
    ),
    "fuyu": (("patch_size", ("model.vision_embed_tokens",), "a linear embedding of image patches"),),
    "phi4_multimodal": (
        ("vision_config", ("model.embed_tokens_extend",), f"{_SIGLIP} and a Conformer audio encoder in the embedding"),
    ),
    "emu3": (),
    "moss_transcribe_diarize": (
        ("audio_config", ("model.audio_tower", "model.multi_modal_projector"), "an audio encoder and projector"),
    ),
    # GIT's text decoder is its own (attnid.hf.mapping.bert), beside the towers named here for the self-check
    "git": (("vision_config", ("git.image_encoder", "git.visual_projection"), "a CLIP vision encoder and projection"),),
}
TOWERS["gemma4_unified"] = TOWERS["gemma4"]


def tower_modules(mt: str) -> tuple[str, ...]:
    """The submodules of the registered class of `mt` that are no part of its text model ('' prefixes: none)."""
    return tuple(module for _, modules, _ in TOWERS.get(mt, ()) for module in modules)


def _towers_present(cfg: dict, mt: str) -> list[tuple[str, str]]:
    """(key, why) of each tower the config builds (module docstring)."""
    found = []
    for key, modules, what in TOWERS[mt]:
        if cfg.get(key) is not None:
            where = ", ".join(modules)
            found.append((key, f"{what} ({where}) beside the text model: not modelled"))
    return found


def wrapper_family(cfg: dict, mt: str) -> tuple[list, dict]:
    """(the text model's blocks, the ModelSpec fields) of a wrapper's whole config: the family of its text model
    (`attnid.hf.mapping.text_config`), with each tower the config builds named in not_modelled."""
    from . import MAPPERS, text_config

    text = cfg if mt in FLAT else text_config(cfg)
    text_type = TEXT_MODELS[mt] if mt in FLAT else text["model_type"]
    if text_type not in MAPPERS or text_type in TEXT_MODELS:
        raise SpecError("text_config.model_type", f"{text_type!r}: the text model of {mt!r} is not mapped")
    layers, fields = MAPPERS[text_type](text, text_type)
    return layers, {**fields, "not_modelled": (*fields.get("not_modelled", ()), *_towers_present(cfg, mt))}


MAPPERS = dict.fromkeys(TEXT_MODELS, wrapper_family)


# the towers' keys at the self-check's size, merged over the config's (a sub-config key by key); None: not built
_TINY_SIGLIP = {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                "image_size": 16, "patch_size": 8}  # fmt: skip
TINY_TOWERS = {
    "gemma3": {"vision_config": _TINY_SIGLIP, "mm_tokens_per_image": 4},  # 2 x 2 patches, pooled by 1
    "gemma4": {"vision_config": None, "audio_config": None},
    "got_ocr2": {"vision_config": {**_TINY_SIGLIP, "output_channels": 8, "mlp_dim": 16, "window_size": 2,
                                   "global_attn_indexes": [0]}},  # fmt: skip
    "fuyu": {"patch_size": 2},
    "phi4_multimodal": {
        "vision_config": {**_TINY_SIGLIP, "crop_size": 16},
        "audio_config": {"hidden_size": 8, "intermediate_size": 16, "num_blocks": 1, "num_attention_heads": 2,
                         "ext_pw_out_channel": 8, "depthwise_separable_out_channel": 8, "nemo_conv_channels": 8,
                         "input_size": 8, "bias_max_distance": 8},
    },
    "emu3": {},
    "moss_transcribe_diarize": {"audio_config": {"num_mel_bins": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
                                                 "intermediate_size": 16, "hidden_size": 8, "max_source_positions": 8}},
    "git": {"vision_config": _TINY_SIGLIP},
}
TINY_TOWERS["gemma4_unified"] = TINY_TOWERS["gemma4"]


def tiny_wrapper(cfg: dict, mt: str, tiny_text: dict) -> dict:
    """The self-check's tiny config of a type with towers (TOWERS): its text model's keys shrunk (`tiny_text`, by
    attnid.hf.tiny) in their place and its towers at TINY_TOWERS's size."""
    nested = mt in TEXT_MODELS and mt not in FLAT
    out = {k: v for k, v in cfg.items() if not k.startswith("_")} if nested else dict(tiny_text)
    out["model_type"] = mt
    if nested:
        out["text_config"] = tiny_text
    for key, value in TINY_TOWERS[mt].items():
        out[key] = {**(out.get(key) or {}), **value} if isinstance(value, dict) else value
    return out


# the self-check's hooks (collected by attnid.hf.mapping): the class built for a text model type, the submodules that
# are no part of a wrapper's text model, and a wrapper's tiny config around its tiny text model
CHECK_CLASSES = TEXT_CLASSES
TOWER_MODULES = {mt: tower_modules(mt) for mt in TOWERS}
TINY_WRAPPERS = dict.fromkeys(TOWERS, tiny_wrapper)
