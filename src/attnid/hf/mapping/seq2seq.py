"""The decoders of encoder-decoder models: their attention layers only (`transformers` 5.24,
models/<type>/modeling_<type>.py). The causal LM each type registers (<Type>ForCausalLM) builds the decoder stack
alone (it sets is_decoder and clears is_encoder_decoder), and every decoder layer holds a causal self-attention
(self_attn) and a cross-attention (encoder_attn) whose keys and values read the encoder's states
(`encoder_hidden_states`: the decoder layer calls encoder_attn(hidden_states, key_value_states=encoder states),
without a mask). Here a decoder layer is two blocks, self_attn then encoder_attn (the order of
`attnid.hf.check.attention_modules`), the second an AttentionSpec with d_cross the encoder's width: no mask, no
positions, counted in `attnid.layer.counting_variants` and measured by the self-check on the real encoder_attn
with Gaussian encoder states as a free input. Both blocks carry the layer's MLP (descriptive: the whole model is
not counted). Run as a causal LM without encoder states, each class skips encoder_attn (`if encoder_hidden_states
is not None` in its DecoderLayer), so its parameters (and encoder_attn_layer_norm) then have no effect at all.

    type              blocks (LayerNorm, eps 1e-5)                  decoder positions                 attention biases
    bart              post-LN, layernorm_embedding                  learned, offset 2                 q, k, v, out
    mbart             pre-LN, layernorm_embedding and a final norm  learned, offset 2                 q, k, v, out
    plbart, mvp       post-LN, layernorm_embedding                  learned, offset 2                 q, k, v, out
    blenderbot        pre-LN, a final layer_norm                    learned, no offset                q, k, v, out
    blenderbot-small  post-LN, layernorm_embedding                  learned, no offset                q, k, v, out
    bigbird_pegasus   pre-LN, a final norm (layernorm_embedding)    learned, no offset                use_bias (false)
    marian            post-LN                                       fixed sinusoidal                  q, k, v, out
    pegasus           pre-LN, a final layer_norm                    fixed sinusoidal                  q, k, v, out
    trocr             post-LN, layernorm_embedding (flag)           learned offset 2, or sinusoidal   q, k, v, out
    whisper           pre-LN, a final layer_norm                    learned (max_target_positions)    q, v, out
    musicgen          pre-LN, a final layer_norm                    fixed sinusoidal                  none

BigBird-Pegasus's decoder attention is full attention (BigBirdPegasusDecoderAttention; block-sparse attention is its
encoder's). TrOCR's encoder_attn reads cross_attention_hidden_size (default d_model) wide states (its k_proj, v_proj:
kdim, vdim). Whisper's k_proj has no bias (WhisperAttention: bias=False), in both attentions. MVP's prompts
(use_prompt: learned keys and values prepended in every attention, MvpPrompt) are refused. MusicGen (MusicgenForCausalLM
takes the composite config's `decoder` section, a MusicgenDecoderConfig: DECODER_SECTIONS) reads num_codebooks token
streams, their embeddings summed, one lm_head each; its attention and MLP have no biases. MusicGen-Melody
(MusicgenMelodyForCausalLM) has no cross-attention: its conditioning states are prepended to the sequence
(MusicgenMelodyDecoder concatenates encoder_hidden_states before the codes), so its blocks are self-attention only.
The self-check's tiny models keep one decoder layer (one self_attn and one encoder_attn) and MusicGen one codebook
(the attention layers read the summed embeddings, the same for any number of streams).
"""

from __future__ import annotations

import math

from ...errors import SpecError
from ...layer.spec import AttentionSpec
from ...model.blocks import LayerSpec, MLPSpec
from ...model.spec import PAD_READS_POSITIONS
from .keys import mlp_kind, read_flag, read_int, read_str
from .opt import POSITION_OFFSET, SINUSOIDAL_FLOAT64

# model type -> (pre-LN blocks, positions with their offset: ("learned", 2) | ("learned", 0) | ("sinusoidal", 0))
BLOCKS = {
    "bart": (False, ("learned", POSITION_OFFSET)),
    "mbart": (True, ("learned", POSITION_OFFSET)),
    "plbart": (False, ("learned", POSITION_OFFSET)),
    "mvp": (False, ("learned", POSITION_OFFSET)),
    "blenderbot": (True, ("learned", 0)),
    "blenderbot-small": (False, ("learned", 0)),
    "bigbird_pegasus": (True, ("learned", 0)),
    "marian": (False, ("sinusoidal", 0)),
    "pegasus": (True, ("sinusoidal", 0)),
    "trocr": (False, ("learned", POSITION_OFFSET)),
    "whisper": (True, ("learned", 0)),
    "musicgen": (True, ("sinusoidal", 0)),
    "musicgen_melody": (True, ("sinusoidal", 0)),
}
WITHOUT_CROSS = ("musicgen_melody",)
EMBEDDING_NORM = ("bart", "mbart", "plbart", "mvp", "blenderbot-small")  # layernorm_embedding after the embeddings
MUSICGEN = ("musicgen", "musicgen_melody")
# composite configs (text encoder, audio encoder, decoder) whose causal LM is built from the `decoder` section, and
# that section's model type (MusicgenForCausalLM.config_class is MusicgenDecoderConfig)
DECODER_SECTIONS = {"musicgen": "musicgen_decoder", "musicgen_melody": "musicgen_melody_decoder"}
UNUSED = (
    "encoder-decoder: the decoder of an encoder-decoder model, counted per attention layer (each decoder layer as two"
    " blocks, self_attn then encoder_attn, whose keys and values read the encoder's states); run as a causal LM"
    " without encoder states the class skips encoder_attn, whose parameters then have no effect at all; the whole"
    " model (embeddings, norms, MLPs, the encoder's states as its input) is not modelled"
)
CODEBOOKS = (
    "num_codebooks",
    "num_codebooks token streams: their embeddings summed at the input, one lm_head each (not modelled)",
)
PREFIX = (
    "model_type",
    "MusicGen-Melody's decoder: self-attention layers over the conditioning states prepended to the codes"
    " (encoder_hidden_states concatenated before them); the whole model is not modelled",
)


def _sizes(cfg: dict, mt: str) -> tuple[int, int, int, int]:
    """(d_model, heads, layers, MLP width) of the decoder."""
    if mt in MUSICGEN:
        keys = ("hidden_size", "num_attention_heads", "num_hidden_layers", "ffn_dim")
    else:
        keys = ("d_model", "decoder_attention_heads", "decoder_layers", "decoder_ffn_dim")
    return tuple(read_int(cfg, key) for key in keys)


def _biases(cfg: dict, mt: str) -> str:
    if mt in MUSICGEN:
        return ""  # MusicgenAttention(bias=False)
    if mt == "whisper":
        return "qvo"  # WhisperAttention: k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
    if mt == "bigbird_pegasus":
        return "qkvo" if read_flag(cfg, "use_bias", False) else ""
    return "qkvo"


def _positions(cfg: dict, mt: str) -> tuple[str, int]:
    if mt == "trocr" and not read_flag(cfg, "use_learned_position_embeddings", True):
        return "sinusoidal", 0  # TrOCRSinusoidalPositionalEmbedding
    return BLOCKS[mt][1]


def seq2seq_decoder(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(the attention layers' blocks, the ModelSpec fields) of a config of the family: layers only."""
    if mt == "mvp" and read_flag(cfg, "use_prompt", False):
        raise SpecError("use_prompt", "true: learned prompt keys and values join every attention (MvpPrompt)")
    d, H, n_layers, width = _sizes(cfg, mt)
    biases = _biases(cfg, mt)
    activation = read_str(cfg, "activation_function", default="gelu")
    mlp = MLPSpec(width, mlp_kind(activation, False, "activation_function"), mt not in MUSICGEN)
    causal = LayerSpec(AttentionSpec(d_model=d, n_heads=H, biases=biases, causal=True), mlp)
    blocks = [causal]
    if mt not in WITHOUT_CROSS:  # TrOCR: k_proj, v_proj of encoder_attn read cross_attention_hidden_size
        width_in = read_int(cfg, "cross_attention_hidden_size", default=d) if mt == "trocr" else d
        blocks.append(LayerSpec(AttentionSpec(d_model=d, n_heads=H, biases=biases, d_cross=width_in), mlp))
    pre, (positions, offset) = BLOCKS[mt][0], _positions(cfg, mt)
    not_modelled = [PREFIX] if mt in WITHOUT_CROSS else [("model_type", UNUSED)]
    if mt in MUSICGEN:
        not_modelled.append(CODEBOOKS)
    if positions == "sinusoidal":
        not_modelled.append(SINUSOIDAL_FLOAT64)
    embedding_norm = mt in EMBEDDING_NORM or (mt == "trocr" and read_flag(cfg, "layernorm_embedding", True))
    fields = {
        "positions": positions, "norm": "layernorm", "norm_bias": True, "norm_eps": 1e-5,
        "norm_position": "pre" if pre else "post", "final_norm": pre, "embedding_norm": embedding_norm,
        "embed_scale": math.sqrt(d) if read_flag(cfg, "scale_embedding", False) else 1.0,
        "tied": read_flag(cfg, "tie_word_embeddings", mt not in MUSICGEN), "position_offset": offset,
        "max_positions_default": read_int(cfg, "max_target_positions", default=448) if mt == "whisper" else None,
        "not_modelled": tuple(not_modelled),
    }  # fmt: skip
    return blocks * n_layers, fields


def tiny_layers(cfg: dict, mt: str) -> dict:
    """The keys of the self-check's tiny model (attnid.hf.tiny, which also shrinks Whisper's max_target_positions and
    Marian's decoder_vocab_size): one decoder layer of two heads, a 16-wide MLP (the encoder's sizes too, which the
    causal LM does not build), one MusicGen codebook, TrOCR's encoder width 8 (d_model's) or 16 where it differs and
    its pad id where its sinusoidal positions count from it."""
    if mt in MUSICGEN:
        return {"num_hidden_layers": 1, "num_attention_heads": 2, "ffn_dim": 16, "num_codebooks": 1}
    tiny = {"decoder_layers": 1, "decoder_attention_heads": 2, "decoder_ffn_dim": 16}
    if mt != "trocr":
        tiny |= {"encoder_layers": 1, "encoder_attention_heads": 2, "encoder_ffn_dim": 16}
    if mt == "trocr" and not read_flag(cfg, "use_learned_position_embeddings", True):
        tiny[PAD_READS_POSITIONS] = True  # TrOCRSinusoidalPositionalEmbedding counts positions from the pad id
    if mt == "trocr" and cfg.get("cross_attention_hidden_size") is not None:
        tiny["cross_attention_hidden_size"] = 8 if cfg["cross_attention_hidden_size"] == cfg.get("d_model") else 16
    return tiny


MAPPERS = dict.fromkeys(BLOCKS, seq2seq_decoder)
TINY_LAYERS = dict.fromkeys(BLOCKS, tiny_layers)
# model type -> why its config's is_encoder_decoder is not read: its causal LM builds the decoder alone
DECODERS = {mt: "its causal LM builds the decoder stack alone" for mt in BLOCKS}
