r"""The name map between a real `transformers` model's `named_parameters()` and the ModelSpec layout, as tensors.

Each family writes its map once, as plain data, in its module of `attnid.hf.mapping` (NAME_MAPS: per
parameter of its class an entry (kind, class parameter, fine block(s), sizes...), in the words of
`attnid.hf.mapping.names`). Here each kind becomes an :class:`Entry`, the two directions of the map on tensors
(batched: leading dims pass through); every kind is a permutation of coordinates, so the name map is exact
and its adjoint is its inverse. The fused kinds, with the class code they come from (`transformers` 5.24,
models/<type>/modeling_<type>.py):

    qkv_columns         GPT-2's Conv1D c_attn (d, 3d) = [q | k | v] columns (and its bias); row_heads: c_proj
                        (H v, d), already (in, out)
    qkv_per_head        GPT-NeoX, BLOOM query_key_value (3 d, d) rows per head [q_h; k_h; v_h] (and its bias)
    qkv_per_group       Falcon (new arch) query_key_value rows per KV group [q of its r heads; k; v]
    gate_up_rows        Mixtral, Qwen3-MoE, DeepSeek experts' gate_up_proj (E, 2m, d) = [gate; up]
    gate_up_interleaved GPT-OSS gate_up_proj (E, d, 2m): gate even, up odd columns (and its bias)
    gate_up_columns     Aria's experts' gate_up_proj (E, d, 2m) = [gate | up] columns (AriaExperts, stored (in, out))
    latent_rope_rows    DeepSeek kv_a_proj_with_mqa rows [latent (r); rope key (p)]
    kv_b_heads          DeepSeek kv_b_proj rows per head [k_nope; v]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..errors import SpecError
from ..hf.mapping import NAME_MAPS
from ..model.spec import ModelSpec


@dataclass(frozen=True)
class Entry:
    """One parameter of the class: the fine blocks it holds and the two directions of the map (batched:
    leading dims pass through)."""

    hf: str
    fine: tuple[str, ...]
    to_fine: Callable  # (..., *hf_shape) -> tuple of (..., *fine_shape)
    to_hf: Callable  # tuple of (..., *fine_shape) -> (..., *hf_shape)


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


def _perm(perm: tuple | None, k: int) -> torch.Tensor:
    return torch.arange(k) if perm is None else torch.tensor(perm)


def heads(hf: str, fine: str, n: int, k: int, perm: tuple | None = None) -> Entry:
    """(n k, d) <-> (n, d, k), permuted inside each head."""
    perm = _perm(perm, k)
    inv = inverse_perm(perm)
    return single(
        hf, fine,
        lambda x: x.unflatten(-2, (n, k))[..., perm, :].transpose(-1, -2),
        lambda y: y.transpose(-1, -2)[..., inv, :].flatten(-3, -2),
    )  # fmt: skip


def head_bias(hf: str, fine: str, n: int, k: int, perm: tuple | None = None) -> Entry:
    perm = _perm(perm, k)
    inv = inverse_perm(perm)
    return single(hf, fine, lambda x: x.unflatten(-1, (n, k))[..., perm], lambda y: y[..., inv].flatten(-2))


def permuted(hf: str, fine: str, perm: tuple) -> Entry:
    perm = torch.tensor(perm)
    inv = inverse_perm(perm)
    return single(hf, fine, lambda x: x[..., perm], lambda y: y[..., inv])


def rows(hf: str, fine: str, perm: tuple) -> Entry:
    """Layout row t is the class's row perm[t]."""
    perm = torch.tensor(perm)
    inv = inverse_perm(perm)
    return single(hf, fine, lambda x: x[..., perm, :], lambda y: y[..., inv, :])


def out_heads(hf: str, fine: str, n: int, v: int) -> Entry:
    """o_proj.weight (d, n v) <-> W_O (n, v, d)."""
    return single(hf, fine, lambda x: x.transpose(-1, -2).unflatten(-2, (n, v)), lambda y: y.flatten(-3, -2).transpose(-1, -2))


def qkv_columns(hf: str, fines: tuple, d: int, H: int, k: int) -> Entry:
    """(d, 3d) columns [q | k | v], each (H, k) <-> W_Q, W_K, W_V (H, d, k)."""

    def split(t):
        return tuple(t[..., j * d : (j + 1) * d].unflatten(-1, (H, k)).transpose(-2, -3) for j in range(3))

    def join(y):
        return torch.cat([w.transpose(-2, -3).flatten(-2) for w in y], -1)

    return Entry(hf, fines, split, join)


def qkv_columns_bias(hf: str, fines: tuple, d: int, H: int, k: int) -> Entry:
    return Entry(hf, fines, lambda t: tuple(t[..., j * d : (j + 1) * d].unflatten(-1, (H, k)) for j in range(3)),
                 lambda y: torch.cat([w.flatten(-2) for w in y], -1))  # fmt: skip


def row_heads(hf: str, fine: str, H: int) -> Entry:
    """(H v, d) <-> (H, v, d)."""
    return single(hf, fine, lambda t: t.unflatten(-2, (H, -1)), lambda y: y.flatten(-3, -2))


def qkv_per_head(hf: str, fines: tuple, H: int, k: int, perm: tuple) -> Entry:
    """query_key_value (H 3 k, d): rows per head [q_h; k_h; v_h] <-> W_Q, W_K, W_V (H, d, k)."""
    perm = torch.tensor(perm)
    inv = inverse_perm(perm)

    def split(t):
        x = t.unflatten(-2, (H, 3, k))  # (..., H, 3, k, d)
        q, kk, v = x[..., 0, :, :], x[..., 1, :, :], x[..., 2, :, :]
        return q[..., perm, :].transpose(-1, -2), kk[..., perm, :].transpose(-1, -2), v.transpose(-1, -2)

    def join(y):
        q, kk, v = y[0].transpose(-1, -2)[..., inv, :], y[1].transpose(-1, -2)[..., inv, :], y[2].transpose(-1, -2)
        return torch.stack((q, kk, v), -3).flatten(-4, -2)

    return Entry(hf, fines, split, join)


def qkv_per_head_bias(hf: str, fines: tuple, H: int, k: int, perm: tuple) -> Entry:
    perm = torch.tensor(perm)
    inv = inverse_perm(perm)

    def split(t):
        x = t.unflatten(-1, (H, 3, k))
        return x[..., 0, :][..., perm], x[..., 1, :][..., perm], x[..., 2, :]

    def join(y):
        return torch.stack((y[0][..., inv], y[1][..., inv], y[2]), -2).flatten(-3)

    return Entry(hf, fines, split, join)


def qkv_per_group(hf: str, fines: tuple, G: int, r: int, k: int, perm: tuple) -> Entry:
    """query_key_value rows per KV group [q of its r heads; k; v] <-> W_Q (H, d, k), W_K, W_V (G, d, k)."""
    perm = torch.tensor(perm)
    inv = inverse_perm(perm)

    def split(t):
        x = t.unflatten(-2, (G, r + 2, k))  # (..., G, r + 2, k, d)
        q = x[..., :r, :, :].flatten(-4, -3)[..., perm, :].transpose(-1, -2)  # (..., H, d, k)
        return q, x[..., r, :, :][..., perm, :].transpose(-1, -2), x[..., r + 1, :, :].transpose(-1, -2)

    def join(y):
        q = y[0].transpose(-1, -2)[..., inv, :].unflatten(-3, (G, r))
        kk = y[1].transpose(-1, -2)[..., inv, :][..., None, :, :]
        v = y[2].transpose(-1, -2)[..., None, :, :]
        return torch.cat((q, kk, v), -3).flatten(-4, -2)

    return Entry(hf, fines, split, join)


def gate_up_rows(hf: str, fines: tuple, m: int) -> Entry:
    """(E, 2m, d) = [gate; up] <-> gate, up (E, d, m)."""
    return Entry(hf, fines, lambda x: (x[..., :m, :].transpose(-1, -2), x[..., m:, :].transpose(-1, -2)),
                 lambda t: torch.cat([y.transpose(-1, -2) for y in t], -2))  # fmt: skip


def gate_up_interleaved(hf: str, fines: tuple) -> Entry:
    """(E, d, 2m), gate even and up odd columns <-> gate, up (E, d, m)."""
    return Entry(hf, fines, lambda x: (x[..., 0::2], x[..., 1::2]), lambda t: torch.stack(t, -1).flatten(-2))


def gate_up_columns(hf: str, fines: tuple, m: int) -> Entry:
    """(E, d, 2m) = [gate | up] <-> gate, up (E, d, m)."""
    return Entry(hf, fines, lambda x: (x[..., :m], x[..., m:]), lambda t: torch.cat(t, -1))


def latent_rope_rows(hf: str, fines: tuple, r: int, perm: tuple) -> Entry:
    """kv_a_proj_with_mqa (r + p, d) rows [latent; rope key] <-> W_DKV (d, r), W_KR (d, p) (rope dims permuted)."""
    kr = torch.tensor(perm)
    return Entry(hf, fines,
                 lambda t: (t[..., :r, :].transpose(-1, -2), t[..., r:, :][..., kr, :].transpose(-1, -2)),
                 lambda y: torch.cat((y[0].transpose(-1, -2), y[1].transpose(-1, -2)[..., inverse_perm(kr), :]), -2))  # fmt: skip


def kv_b_heads(hf: str, fines: tuple, H: int, u: int) -> Entry:
    """kv_b_proj (H (u + v), r) rows per head [k_nope; v] <-> W_UK (H, r, u), W_UV (H, r, v)."""
    return Entry(hf, fines,
                 lambda t: (t.unflatten(-2, (H, -1))[..., :u, :].transpose(-1, -2),
                            t.unflatten(-2, (H, -1))[..., u:, :].transpose(-1, -2)),
                 lambda y: torch.cat((y[0].transpose(-1, -2), y[1].transpose(-1, -2)), -2).flatten(-3, -2))  # fmt: skip


KINDS = {f.__name__: f for f in (same, linear, heads, head_bias, permuted, rows, out_heads, qkv_columns,
                                 qkv_columns_bias, row_heads, qkv_per_head, qkv_per_head_bias, qkv_per_group,
                                 gate_up_rows, gate_up_interleaved, gate_up_columns, latent_rope_rows,
                                 kv_b_heads)}  # fmt: skip


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


def name_map(spec: ModelSpec, cfg: dict) -> NameMap:
    """The name map of a config's class (cfg: the config mapping; its model_type picks the family's NAME_MAPS)."""
    mt = cfg["model_type"]
    names = NAME_MAPS.get(mt)
    if names is None:
        raise SpecError("model_type", f"{mt!r}: no name map between its class and the layout is written")
    return NameMap([KINDS[kind](*args) for kind, *args in names(spec, cfg)])
