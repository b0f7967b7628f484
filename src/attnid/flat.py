"""Named blocks of one flat parameter vector: the one map from names to slices.

Every flat vector in the package (one attention layer, a whole model, a real `transformers` module's
parameters in `named_parameters()` order) is a sequence of blocks, each stored row-major (C order), so
`theta[..., offset:offset + size].reshape(*lead, *shape)` is the block. :class:`FlatLayout` holds that
sequence; the layouts of the layer (`attnid.layer.layout.Layout`) and of the model
(`attnid.model.layout.ModelLayout`) add their own initialisation to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import torch


@dataclass(frozen=True)
class ParamBlock:
    """One named weight or bias: its offset in the flat vector and its shape."""

    name: str
    offset: int
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return prod(self.shape)

    @property
    def slice(self) -> slice:
        return slice(self.offset, self.offset + self.size)


class FlatLayout:
    """Names -> blocks of a flat vector, in the order given by (name, shape) pairs."""

    def __init__(self, shapes, label: str = "the layout"):
        self.label = label
        self.blocks: dict[str, ParamBlock] = {}
        offset = 0
        for name, shape in shapes:
            block = ParamBlock(name, offset, tuple(shape))
            self.blocks[name] = block
            offset += block.size
        self.size = offset  # P: total number of parameters

    def __contains__(self, name: str) -> bool:
        return name in self.blocks

    def __iter__(self):
        return iter(self.blocks.values())

    def slice(self, name: str) -> slice:
        return self.blocks[name].slice

    def unflatten(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of `theta` (P,) as named blocks; a batch (..., P) gives (..., *shape) blocks."""
        if theta.shape[-1] != self.size:
            raise ValueError(f"parameter vector has {theta.shape[-1]} entries, {self.label} needs {self.size}")
        lead = theta.shape[:-1]
        return {b.name: theta[..., b.slice].reshape(*lead, *b.shape) for b in self.blocks.values()}

    def flatten(self, blocks: dict[str, torch.Tensor]) -> torch.Tensor:
        """Inverse of :meth:`unflatten`; every block of the layout must be given, no other."""
        missing = set(self.blocks) - set(blocks)
        extra = set(blocks) - set(self.blocks)
        if missing or extra:
            raise ValueError(f"blocks do not match the layout: missing {sorted(missing)}, unexpected {sorted(extra)}")
        parts = []
        for b in self.blocks.values():
            t = blocks[b.name]
            if tuple(t.shape[t.dim() - len(b.shape) :]) != b.shape:
                raise ValueError(f"block {b.name} has shape {tuple(t.shape)}, expected {b.shape}")
            parts.append(t.reshape(*t.shape[: t.dim() - len(b.shape)], b.size))
        return torch.cat(parts, dim=-1)
