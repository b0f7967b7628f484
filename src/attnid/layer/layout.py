"""The one flat-parameter layout: which slice of a 1-D vector is which weight.

The layer, the Jacobian and the symmetry tools all read parameters through this layout, so
there is one truth about which number is which weight. Blocks come from
`AttentionSpec.block_shapes` (torch-free, so P is known without torch), in this order (absent biases
are skipped), with H query heads, G key/value groups, d = d_model, k = d_head_qk, v = d_head_v:

    W_Q (H, d, k)   b_Q (H, k)
    W_K (G, c, k)   b_K (G, k)          c = d_cross for cross-attention, else d
    W_V (G, c, v)   b_V (G, v)
    W_O (H, v, d)   b_O (d,)

Each block is stored row-major (C order), as every flat vector here (`attnid.flat`).
"""

from __future__ import annotations

import torch

from ..flat import FlatLayout
from .spec import AttentionSpec


class Layout(FlatLayout):
    """Names -> slices of the flat parameter vector of one attention layer."""

    def __init__(self, spec: AttentionSpec):
        super().__init__(spec.block_shapes().items(), label=f"layout of {spec.label}")
        self.spec = spec

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
        kv_in = self.spec.d_cross or self.spec.d_model  # cross-attention: keys and values read the encoder's states
        fan_in = {
            "W_Q": self.spec.d_model,
            "W_K": kv_in,
            "W_V": kv_in,
            "W_O": self.spec.d_head_v,
            "W_G": self.spec.d_model,  # the output gate reads x
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
