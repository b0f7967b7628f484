"""The flat parameter layout of a whole model: names -> slices of one 1-D vector theta.

Blocks, in order (absent ones skipped), d = d_model, V = vocab, m = d_ff, T = max_positions:

    embed (V, d)   pos (T, d)   embed_norm.{gain,bias} (d,)
    per layer l:   layers.l.norm_1.{gain,bias}   layers.l.attn (P_attn of layer l,)  [attnid.layer.layout order]
                   layers.l.norm_2.{gain,bias}   layers.l.mlp.{gate (d, m), gate_bias (m,), up (d, m),
                   up_bias (m,), down (m, d), down_bias (d,)}   (m = layer l's d_ff)
    final_norm.{gain,bias} (d,)   unembed (d, V)   unembed_bias (V,)

The source of each block (embedding, norm gain, MLP, ...) is what the counting breakdown names.
"""

from __future__ import annotations

from math import prod

import torch

from ..flat import FlatLayout
from ..layer.layout import Layout
from .spec import ModelSpec


class ModelLayout(FlatLayout):
    """Names -> blocks of the flat parameter vector of a :class:`ModelSpec` (order: ModelSpec.block_shapes)."""

    def __init__(self, spec: ModelSpec):
        super().__init__(spec.block_shapes(), label=spec.label)
        self.spec = spec
        layouts = {}  # one Layout per distinct attention spec
        self.attention_layouts = [layouts.setdefault(x.attention, Layout(x.attention)) for x in spec.layer_specs]
        self.attention_layout = self.attention_layouts[0]

    def init(self, generator: torch.Generator, dtype=torch.float64) -> torch.Tensor:
        """A generic random point: matrices ~ N(0, 1/fan_in) (embeddings N(0, 1)), gains 1 + N(0, 0.3^2)
        (Gemma's w ~ N(0, 0.3^2)), biases ~ N(0, 0.3^2); attention by its own layout's init."""
        theta = torch.empty(self.size, dtype=dtype)
        for name, block in self.blocks.items():
            shape = block.shape
            if name.endswith(".attn"):
                layer = int(name.split(".")[1])
                theta[self.slice(name)] = self.attention_layouts[layer].init(generator, dtype=dtype)
                continue
            sample = torch.randn(prod(shape), generator=generator, dtype=dtype)
            if name.endswith(".gain"):
                sample = (0.0 if self.spec.gemma_gain else 1.0) + 0.3 * sample
            elif name.endswith("bias"):
                sample = 0.3 * sample
            elif name not in ("embed", "pos", "token_type"):
                sample = sample / shape[-2 if len(shape) == 3 else 0] ** 0.5  # fan-in (an expert stack: (E, in, out))
            theta[self.slice(name)] = sample
        return theta
