"""The two trained models; each exposes its attention layers through `attention_layers()`.

* :class:`Student` — one :class:`attnid.layer.forward.AttentionLayer` (teacher-student regression).
* :class:`TinyTransformer` — a pre-norm decoder of `n_layers` blocks (nanoGPT-style):

      h_0 = E_tok[tokens] + E_pos[0..T-1]                          (B, T, d)
      h_l = h_{l-1} + Attn_l(Norm(h_{l-1}));  h_l = h_l + MLP_l(Norm(h_l))
      logits = Norm(h_L) W_unembed                                  (B, T, n_tokens)

  with Attn_l the project's AttentionLayer (flat parameter theta, any AttentionSpec), Norm a
  LayerNorm or RMSNorm, and MLP = Linear(d, m d) -> GELU -> Linear(m d, d).

  `forward(tokens, last_only=True)` returns the logits of the last position only (B, 1, n_tokens),
  which is all the recall loss reads. It computes the same numbers (up to summation order) with less
  work: position T-1 of block L depends on block L-1 at every position (keys and values), but its
  own query, attention output, MLP, the final norm and the unembedding are needed at T-1 only
  (`attnid.layer.forward.attention(..., last_only=True)`). For the recall sizes that is about 45% of the forward and backward
  FLOPs saved.

The attention symmetry group of each layer acts on its theta alone and leaves Attn_l, hence the
whole network and any loss of its output, unchanged: the training geometry of `attnid.symmetry`
applies layer by layer.
"""

from __future__ import annotations

import torch
from torch import nn

from ..layer.forward import AttentionLayer, attention
from ..layer.spec import AttentionSpec


class Student(nn.Module):
    """One attention layer: x (B, T, d) -> (B, T, d)."""

    def __init__(self, spec: AttentionSpec, generator: torch.Generator, dtype=torch.float64, device="cpu"):
        super().__init__()
        self.attn = AttentionLayer(spec, generator, dtype=dtype, device=device)

    def attention_layers(self) -> list[AttentionLayer]:
        return [self.attn]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * g (Zhang and Sennrich 2019), over the last dim."""

    def __init__(self, d: int, eps: float = 1e-6, dtype=None, device=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d, dtype=dtype, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(kind: str, d: int, dtype, device) -> nn.Module:
    if kind == "layernorm":
        return nn.LayerNorm(d, dtype=dtype, device=device)
    if kind == "rmsnorm":
        return RMSNorm(d, dtype=dtype, device=device)
    raise ValueError(f"norm must be 'layernorm' or 'rmsnorm', got {kind!r}")


class Block(nn.Module):
    """Pre-norm residual block: attention then MLP."""

    def __init__(self, spec: AttentionSpec, generator: torch.Generator, norm: str, mlp_ratio: int, dtype, device):
        super().__init__()
        d = spec.d_model
        self.norm_attn = make_norm(norm, d, dtype, device)
        self.attn = AttentionLayer(spec, generator, dtype=dtype, device=device)
        self.norm_mlp = make_norm(norm, d, dtype, device)
        self.mlp = nn.Sequential(
            nn.Linear(d, mlp_ratio * d, dtype=dtype, device=device),
            nn.GELU(),
            nn.Linear(mlp_ratio * d, d, dtype=dtype, device=device),
        )

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:  # (B, T, d) -> (B, T or 1, d)
        if last_only:  # keys and values from every position, the rest at the last one
            h = h[:, -1:] + attention(
                self.attn.theta, self.norm_attn(h), self.attn.spec, self.attn.layout, last_only=True
            )
        else:
            h = h + self.attn(self.norm_attn(h))
        return h + self.mlp(self.norm_mlp(h))


class TinyTransformer(nn.Module):
    """Token + learned position embeddings, `n_layers` pre-norm blocks, final norm, unembedding.

    The non-attention weights use PyTorch's default initialisation under the global seed (the
    caller sets `torch.manual_seed`); the attention layers draw theta from `generator`.
    """

    def __init__(
        self,
        spec: AttentionSpec,
        n_tokens: int,
        seq_len: int,
        generator: torch.Generator,
        n_layers: int = 2,
        norm: str = "layernorm",
        mlp_ratio: int = 4,
        dtype=torch.float64,
        device="cpu",
    ):
        super().__init__()
        d = spec.d_model
        self.tok = nn.Embedding(n_tokens, d, dtype=dtype, device=device)
        self.pos = nn.Embedding(seq_len, d, dtype=dtype, device=device)
        self.blocks = nn.ModuleList(Block(spec, generator, norm, mlp_ratio, dtype, device) for _ in range(n_layers))
        self.norm = make_norm(norm, d, dtype, device)
        self.unembed = nn.Linear(d, n_tokens, bias=False, dtype=dtype, device=device)

    def attention_layers(self) -> list[AttentionLayer]:
        return [block.attn for block in self.blocks]

    def forward(self, tokens: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """(B, T) -> logits (B, T, n_tokens), or (B, 1, n_tokens) of the last position with last_only."""
        T = tokens.shape[1]
        h = self.tok(tokens) + self.pos(torch.arange(T, device=tokens.device))  # (B, T, d)
        for i, block in enumerate(self.blocks):
            h = block(h, last_only=last_only and i == len(self.blocks) - 1)
        return self.unembed(self.norm(h))
