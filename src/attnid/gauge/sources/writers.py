r"""Who writes into the residual stream, for the stream's generators (`.residual`, `.rotations`, `.post_ln`,
`.embeddings`): every writer, the writers that may move along 1 under LayerNorms, and a basis of 1^perp."""

from __future__ import annotations

import torch

from ..point import DTYPE, Point


def ones_complement(d: int) -> torch.Tensor:
    """Q (d, d - 1): an orthonormal basis of 1^perp (QR of the centring matrix's first d - 1 columns)."""
    C = torch.eye(d, dtype=DTYPE) - 1.0 / d
    return torch.linalg.qr(C[:, : d - 1]).Q


def stream_writers(point: Point) -> list[str]:
    """Every block writing into the stream (embeddings side first), for the rotations and the scale."""
    spec = point.spec
    out = list(point.embedding_writers())
    for i in range(spec.n_layers):
        if spec.output_norms:
            out += [n for n in (f"layers.{i}.out_norm_1.gain", f"layers.{i}.out_norm_1.bias",
                                f"layers.{i}.out_norm_2.gain", f"layers.{i}.out_norm_2.bias") if n in point.layout]  # fmt: skip
        else:
            out += point.block_writers(i)
    return out


def centred_writers(point: Point) -> list[str]:
    """Writers whose rows may move along 1 when every reader is a LayerNorm (E untied, positions, block writers)."""
    spec = point.spec
    out = [] if spec.tied or spec.embedding_norm else ["embed"]
    out += ["pos"] if "pos" in point.layout and not spec.embedding_norm else []
    for i in range(spec.n_layers):
        out += point.block_writers(i)
    return out
