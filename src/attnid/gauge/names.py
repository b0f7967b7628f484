r"""The name map between a real `transformers` model's `named_parameters()` and the ModelSpec layout: its pieces.

A family (`attnid.gauge.families`) writes down, per parameter of its class, which fine blocks of
`attnid.gauge.point.FineLayout` it holds and how, as one :class:`Entry` each; every entry is a permutation of
coordinates (a transpose, a split of heads, a fused QKV, a permutation inside a head), so the name map is exact
and its adjoint is its inverse. The pieces, with the class code they come from (`transformers` 5.24,
models/<type>/modeling_<type>.py):

    Linear              weight (out, in); the layout stores (in, out) (x W): a transpose
    heads               q_proj.weight (H k, d) -> W_Q (H, d, k); o_proj.weight (d, H v) -> W_O (H, v, d)
    rotary pairs        rotate_half pairs dims (i, i + p/2) of a head's first p; this project pairs (2i, 2i + 1):
                        project dim 2i is the class's dim i, 2i + 1 is i + p/2 (the q/k norms' gains alike)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..errors import SpecError


@dataclass(frozen=True)
class Entry:
    """One parameter of the class: the fine blocks it holds and the two directions of the map (batched:
    leading dims pass through)."""

    hf: str
    fine: tuple[str, ...]
    to_fine: Callable  # (..., *hf_shape) -> tuple of (..., *fine_shape)
    to_hf: Callable  # tuple of (..., *fine_shape) -> (..., *hf_shape)


def rope_perm(k: int, p: int, interleaved: bool = False) -> torch.Tensor:
    """perm (k,): project dim j of a head is the class's dim perm[j] (module docstring)."""
    perm = list(range(k))
    if not interleaved:
        half = p // 2
        for i in range(half):
            perm[2 * i], perm[2 * i + 1] = i, i + half
    return torch.tensor(perm)


def inverse_perm(perm: torch.Tensor) -> torch.Tensor:
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel())
    return inv


def single(hf, fine, to_fine, to_hf) -> Entry:
    """An entry holding one fine block: to_fine (..., *hf_shape) -> (..., *fine_shape), to_hf its inverse."""
    return Entry(hf, (fine,), lambda x: (to_fine(x),), lambda t: to_hf(t[0]))


def same(hf: str, fine: str) -> Entry:
    return single(hf, fine, lambda x: x, lambda y: y)


def linear(hf: str, fine: str) -> Entry:
    """Linear weight (out, in) <-> (in, out)."""
    return single(hf, fine, lambda x: x.transpose(-1, -2), lambda y: y.transpose(-1, -2))


def heads(hf: str, fine: str, n: int, k: int, perm: torch.Tensor | None = None) -> Entry:
    """(n k, d) <-> (n, d, k), permuted inside each head."""
    perm = torch.arange(k) if perm is None else perm
    inv = inverse_perm(perm)
    return single(
        hf, fine,
        lambda x: x.unflatten(-2, (n, k))[..., perm, :].transpose(-1, -2),
        lambda y: y.transpose(-1, -2)[..., inv, :].flatten(-3, -2),
    )  # fmt: skip


def head_bias(hf: str, fine: str, n: int, k: int, perm: torch.Tensor | None = None) -> Entry:
    perm = torch.arange(k) if perm is None else perm
    inv = inverse_perm(perm)
    return single(hf, fine, lambda x: x.unflatten(-1, (n, k))[..., perm], lambda y: y[..., inv].flatten(-2))


def permuted(hf: str, fine: str, perm: torch.Tensor) -> Entry:
    inv = inverse_perm(perm)
    return single(hf, fine, lambda x: x[..., perm], lambda y: y[..., inv])


def out_heads(hf: str, fine: str, n: int, v: int) -> Entry:
    """o_proj.weight (d, n v) <-> W_O (n, v, d)."""
    return single(hf, fine, lambda x: x.transpose(-1, -2).unflatten(-2, (n, v)), lambda y: y.flatten(-3, -2).transpose(-1, -2))


def fused(hf: str, fines: tuple[str, ...], split: Callable, join: Callable) -> Entry:
    return Entry(hf, fines, split, join)


class NameMap:
    """The entries of one model (module docstring): class parameters <-> fine blocks."""

    def __init__(self, entries: list[Entry]):
        self.entries = entries
        self.hf_names = [e.hf for e in entries]

    def to_fine(self, hf: dict) -> dict:
        """{fine block: tensor} of {class parameter name: tensor} (leading dims pass through)."""
        out = {}
        for e in self.entries:
            for name, t in zip(e.fine, e.to_fine(hf[e.hf]), strict=True):
                out[name] = t
        return out

    def to_hf(self, fine: dict) -> dict:
        return {e.hf: e.to_hf(tuple(fine[n] for n in e.fine)) for e in self.entries}

    def check(self, hf_shapes: dict, fine_layout) -> None:
        """Every class parameter and every fine block is covered once, shapes agree (SpecError naming the first miss)."""
        missing = sorted(set(hf_shapes) - set(self.hf_names))
        if missing:
            raise SpecError("named_parameters", f"{missing[0]} has no place in the name map")
        covered = [n for e in self.entries for n in e.fine]
        left = sorted(set(fine_layout.blocks) - set(covered))
        if left or len(covered) != len(set(covered)):
            raise SpecError("named_parameters", f"the name map leaves {left[:3]} (or covers a block twice)")
        probe = self.to_fine({n: torch.empty(s, device="meta") for n, s in hf_shapes.items() if n in self.hf_names})
        for name, t in probe.items():
            if tuple(t.shape) != fine_layout.blocks[name].shape:
                raise SpecError("named_parameters", f"{name}: {tuple(t.shape)} mapped, {fine_layout.blocks[name].shape} in the layout")
