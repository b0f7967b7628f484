"""Which `transformers` attention class a model type runs, and how its config shrinks around it (torch-free).

A family module that offers its types to the module-level check (`attnid.hf.modules`, the paper's table of
real attention modules) defines REAL_ATTENTION = {model_type: RealAttention(...)}: the modeling module and
classes, and the few config facts the shrinker cannot read from the config itself (the names of its width,
head and layer keys; a fused projection whose head size is d_model / H; how partial rotary is written).
`attnid.hf.mapping.REAL_ATTENTION` collects them like MAPPERS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

GPT2_KEYS = ("n_embd", "n_head", "n_layer")  # GPT-2's and GPT-J's config keys for width, heads and layers


def gpt2_positions(out: dict, cfg: dict, kv_groups: int) -> None:
    """GPT-2's and GPT-J's shrunk configs keep a position table (n_positions) of 4,096 rows."""
    out["n_positions"] = 4096


@dataclass(frozen=True)
class RealAttention:
    """A model type's attention module in `transformers.models.<package>.modeling_<package>`.

    keys: the config's (width, heads, layers) keys. fused: one projection for q, k, v (or heads split from
    d_model), so the head size is d_model / H. rotary_key: where partial rotary is written ("partial_rotary_factor",
    GPT-NeoX's "rotary_pct" as a fraction; GPT-J's "rotary_dim" in dimensions). window_from_config: the module
    reads its sliding window from the config (Mistral's) rather than holding it per layer (Gemma's).
    causal: False for an encoder's bidirectional attention. attention_block_only: the module also holds the block's
    residual norm (BERT's BertAttention), which the check replaces by the identity. shrink(out, cfg, kv_groups):
    the family's own edits of the shrunk config (its KV-head key, latent ranks, position table)."""

    package: str
    attention: str
    rotary: str | None = None
    keys: tuple[str, str, str] = ("hidden_size", "num_attention_heads", "num_hidden_layers")
    fused: bool = False
    rotary_key: str = "partial_rotary_factor"
    window_from_config: bool = False
    causal: bool = True
    attention_block_only: bool = False
    shrink: Callable[[dict, dict, int], None] | None = None

    def partial_rotary(self, out: dict, head_size: int) -> None:
        """Write 'rotate half of each head' into the shrunk config `out` the way this class reads it."""
        if self.rotary_key == "rotary_dim":
            out["rotary_dim"] = head_size // 2
            return
        out[self.rotary_key] = 0.5
        if self.rotary_key == "partial_rotary_factor" and isinstance(out.get("rope_parameters"), dict):
            out["rope_parameters"] = {**out["rope_parameters"], "partial_rotary_factor": 0.5}


def llama_like(package: str, prefix: str, **fields) -> RealAttention:
    """The attention of a Llama-shaped type: <Prefix>Attention with <Prefix>RotaryEmbedding in modeling_<package>
    (other RealAttention fields as keywords)."""
    return RealAttention(package, f"{prefix}Attention", f"{prefix}RotaryEmbedding", **fields)
