"""The one flat-parameter layout: which slice of a 1-D vector is which weight.

The layer, the Jacobian and the symmetry tools all read parameters through this layout, so
there is one truth about which number is which weight. Blocks come from
`AttentionSpec.block_shapes` (torch-free, so P is known without torch), in this order (absent biases
are skipped), with H query heads, G key/value groups, d = d_model, k = d_head_qk, v = d_head_v:

    W_Q (H, d, k)   b_Q (H, k)
    W_K (G, d, k)   b_K (G, k)
    W_V (G, d, v)   b_V (G, v)
    W_O (H, v, d)   b_O (d,)

Each block is stored row-major (C order), so `theta[offset:offset+size].view(shape)` is the block.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import torch

from .spec import AttentionSpec


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


class Layout:
    """Names -> slices of the flat parameter vector of one attention layer."""

    def __init__(self, spec: AttentionSpec):
        self.spec = spec
        self.blocks: dict[str, ParamBlock] = {}
        offset = 0
        for name, shape in spec.block_shapes().items():
            block = ParamBlock(name, offset, shape)
            self.blocks[name] = block
            offset += block.size
        self.size = offset  # P: total number of parameters

    def __contains__(self, name: str) -> bool:
        return name in self.blocks

    def __iter__(self):
        return iter(self.blocks.values())

    def unflatten(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views of `theta` (P,) as named blocks; works for a batch (..., P) too."""
        if theta.shape[-1] != self.size:
            raise ValueError(
                f"parameter vector has {theta.shape[-1]} entries, layout of {self.spec.label} needs {self.size}"
            )
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
            if tuple(t.shape[-len(b.shape) :]) != b.shape:
                raise ValueError(f"block {b.name} has shape {tuple(t.shape)}, expected {b.shape}")
            parts.append(t.reshape(*t.shape[: t.dim() - len(b.shape)], b.size))
        return torch.cat(parts, dim=-1)

    def names(self) -> list[str]:
        """One human-readable name per flat index, e.g. 'W_Q[h=2][3,1]' (for reports, not hot paths)."""
        out = []
        for b in self.blocks.values():
            for idx in torch.cartesian_prod(*[torch.arange(s) for s in b.shape]).reshape(-1, len(b.shape)).tolist():
                out.append(f"{b.name}[{','.join(map(str, idx))}]")
        return out

    def init(
        self, generator: torch.Generator | None = None, dtype=torch.float64, device=None, bias_scale: float = 0.5
    ) -> torch.Tensor:
        """A generic random point: weights ~ N(0, 1/fan_in), biases ~ N(0, bias_scale^2)."""
        theta = torch.empty(self.size, dtype=dtype, device=device)
        fan_in = {
            "W_Q": self.spec.d_model,
            "W_K": self.spec.d_model,
            "W_V": self.spec.d_model,
            "W_O": self.spec.d_head_v,
        }
        for b in self.blocks.values():
            if b.name in fan_in:
                std = fan_in[b.name] ** -0.5
            elif b.name.startswith("W_"):  # latent attention blocks (..., in, out): fan-in is the in size
                std = b.shape[-2] ** -0.5
            else:  # biases, norm shifts, sink logits; norm gains are drawn around one
                std = bias_scale
            sample = torch.randn(b.size, generator=generator, dtype=dtype, device="cpu") * std
            if b.name.startswith("gain_"):
                sample = sample + 1.0
            theta[b.slice] = sample.to(device)
        return theta
