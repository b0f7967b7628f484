"""A Hugging Face `config.json` -> :class:`ModelSpec` (torch-free), through `attnid.hf.mapping`'s facts.

`attnid.hf.mapping.model_facts` reads the config (the one place config keys meet this project's
words); this module turns its facts into the whole-model vocabulary, one
:class:`attnid.model.layers.LayerSpec` per block (a sliding window is dropped: it only needs to show
a query T_min offsets, which `attnid.counting` checks), and refuses, naming the field, what the
whole-model counting does not model: mixture-of-experts MLPs other than those of
`attnid.model.moe.moe_spec`, latent attention outside pre-LN
RMSNorm blocks, non-gated SiLU MLPs. BERT is BertForMaskedLM (token_type_ids all 0, the MLM head).
"""

from __future__ import annotations

import dataclasses

from ..hf.mapping import model_facts
from ..spec import SpecError
from .layers import LayerSpec, MLPSpec
from .moe import moe_spec
from .spec import ModelSpec

# Parallel blocks with one norm for both branches; GPT-NeoX and Falcon's new decoder use two.
SHARED_NORM_TYPES = ("gptj", "phi")
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu"}


def _mlp_kind(activation: str, gated: bool) -> str:
    if gated:
        if activation in ("silu", "swish"):
            return "swiglu"
        if activation.startswith("gelu"):
            return "geglu"
    elif activation in ACTIVATIONS:
        return ACTIVATIONS[activation]
    raise SpecError("hidden_act", f"MLP activation {activation!r} ({'gated' if gated else 'ungated'}) is not modelled")


def model_spec(cfg: dict, seq_len: int | None = None) -> ModelSpec:
    """The whole model of a config mapping; seq_len (default: the config's max_position_embeddings) is the
    longest sequence it is used on."""
    facts = model_facts(cfg)
    if facts.positions == "alibi":
        positions = "none"  # ALiBi adds fixed biases to the scores: the spec's `alibi` field carries it
    else:
        positions = facts.positions
    layers = []
    for i, block in enumerate(facts.blocks):
        attention = dataclasses.replace(block.attention, sliding_window=0, seq_len=None)
        if block.mlp.n_experts:
            mlp = moe_spec(cfg, facts.model_type, block.mlp)
        else:
            mlp = MLPSpec(block.mlp.d_hidden, _mlp_kind(block.mlp.activation, block.mlp.gated), block.mlp.bias)
        layers.append(LayerSpec(attention, mlp))
    max_positions = int(facts.max_positions or seq_len or 1)
    if seq_len is None:
        if facts.max_positions is None:
            raise SpecError("max_position_embeddings", "missing: give --seq-len")
        seq_len = max_positions
    max_positions = max(max_positions, seq_len) if positions != "learned" else max_positions
    mt = facts.model_type
    if mt == "bert" and not facts.tied_embeddings:  # measured: P and the Jacobian's count both V more
        raise SpecError(
            "tie_word_embeddings",
            "false: an untied BertForMaskedLM adds its decoder's own bias to the head's (two V-vectors seen only"
            " through their sum): not modelled",
        )
    return ModelSpec.from_layers(
        layers,
        vocab_size=facts.vocab_size,
        norm="layernorm" if facts.norm == "layernorm" else "rmsnorm",
        norm_bias=facts.norm_bias,
        norm_eps=facts.norm_eps,
        gemma_gain=facts.norm == "rmsnorm_1p",
        parallel=facts.parallel_blocks,
        shared_norm=facts.parallel_blocks
        and (mt in SHARED_NORM_TYPES or (mt == "falcon" and not cfg.get("new_decoder_architecture"))),
        positions=positions,
        max_positions=max_positions,
        seq_len=seq_len,
        tied=facts.tied_embeddings,
        final_norm=facts.final_norm,
        lm_head_bias=mt in ("phi", "bert"),  # BERT: the MLM decoder's bias
        norm_position="post" if facts.post_ln else "pre",
        embedding_norm=facts.embedding_norm,
        token_types=facts.token_types,
        mlm_head=mt == "bert",  # BertForMaskedLM, the model the config's architectures name
        output_norms=mt in ("gemma2", "gemma3_text"),  # post_attention_layernorm, post_feedforward_layernorm
    )
