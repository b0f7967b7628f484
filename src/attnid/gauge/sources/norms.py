r"""Generators of the norms against the maps they feed (sources `norm_gain`, `norm_bias`, `centring_readers`,
`centring_writers`; counted by `attnid.model.counting.norms`).

A norm's output is x = n diag(g) + beta (n centred after a LayerNorm), read by linear maps x W + b:

    norm_gain         dg = g s, dbeta = beta s, dW = -diag(s) W for every reader (s in R^d)
    norm_bias         dbeta = t and every reader keeps x W + b: db = -t W, or, without a bias, the rank-one
                      change dW = -(1/g) (t W) / (beta . 1/g) (it adds only a constant, n . 1 = 0)
    centring_readers  dW = (1/g) u^T, db = -(beta . 1/g) u: the constant it adds is absorbed by the bias
                      (or there is none: no beta); one u in R^{n_X} per reader X that has a bias or no beta
    centring_writers  every reader of the stream is a LayerNorm: each row of a writer may move along 1

With Gemma's gains (g = 1 + w) the generator moves w by dg.
"""

from __future__ import annotations

import torch

from ..group import Group, outer_input, scale_input
from ..point import DTYPE, Point, Reader, rows_update


def contract_input(W: torch.Tensor, t: torch.Tensor, axis: int) -> torch.Tensor:
    """(..., *rest): sum_i t[..., i] W[.., i, ..] over the input `axis` of W."""
    Wm = W.movedim(axis, -1)  # (rest..., d)
    lead = t.shape[:-1]
    return (Wm * t.reshape(*lead, *([1] * (Wm.dim() - 1)), t.shape[-1])).sum(-1)


def _bias_shape(point: Point, r: Reader) -> tuple:
    shape = list(point.w[r.weight].shape)
    shape.pop(r.axis)
    return tuple(shape)


def norm_gain(point: Point, norm: str, readers: list[Reader], source: str = "norm_gain") -> Group:
    g, beta = point.gain(norm), point.beta(norm)

    def fn(s):  # (..., d)
        out = {f"{norm}.gain": g * s}
        if beta is not None:
            out[f"{norm}.bias"] = beta * s
        for r in readers:
            out[r.weight] = -scale_input(point.w[r.weight], s, r.axis)
        return out

    def act(w, s):  # g e^s, beta e^s, diag(e^-s) W
        gain = w[f"{norm}.gain"]
        out = {f"{norm}.gain": (1.0 + gain) * s.exp() - 1.0 if point.spec.gemma_gain else gain * s.exp()}
        if beta is not None:
            out[f"{norm}.bias"] = w[f"{norm}.bias"] * s.exp()
        for r in readers:
            out[r.weight] = scale_input(w[r.weight], (-s).exp(), r.axis)
        return out

    def adjoint(v):  # g_i v_g + beta_i v_beta - sum over readers of <row i of W, row i of V>
        m = next(iter(v.values())).shape[0]
        out = torch.zeros(m, point.d, dtype=DTYPE)
        if f"{norm}.gain" in v:
            out = out + g * v[f"{norm}.gain"]
        if beta is not None and f"{norm}.bias" in v:
            out = out + beta * v[f"{norm}.bias"]
        for r in readers:
            if r.weight in v:
                W = point.w[r.weight].movedim(r.axis, 0).reshape(point.d, -1)
                out = out - (v[r.weight].movedim(r.axis + 1, 1).reshape(m, point.d, -1) * W).sum(-1)
        return out

    blocks = (f"{norm}.gain",) + ((f"{norm}.bias",) if beta is not None else ()) + tuple(r.weight for r in readers)
    return Group(source, f"{norm}.gain", point.d, fn, blocks, meta={"action": act, "adjoint": adjoint})


def norm_bias(point: Point, norm: str, readers: list[Reader], source: str = "norm_bias") -> Group:
    """dbeta = t with every reader keeping x W + b (module docstring)."""
    g, beta = point.gain(norm), point.beta(norm)
    inv = 1.0 / g
    col = inv / (beta @ inv)

    def fn(t):
        out = {f"{norm}.bias": t}
        for r in readers:
            tW = contract_input(point.w[r.weight], t, r.axis)  # (..., rest)
            if r.bias is not None:
                out[r.bias] = -tW
            else:
                out[r.weight] = -outer_input(tW, col, point.w[r.weight].shape, r.axis)
        return out

    blocks = (f"{norm}.bias",) + tuple(r.bias if r.bias else r.weight for r in readers)
    return Group(source, f"{norm}.bias", point.d, fn, blocks)


def centring_readers(point: Point, norm: str, readers: list[Reader], source: str = "centring_readers") -> list[Group]:
    """dW = (1/g) u^T (db = -(beta . 1/g) u) for every reader with a bias or behind a norm without beta."""
    if not point.layernorm:
        return []
    g, beta = point.gain(norm), point.beta(norm)
    inv = 1.0 / g
    shift = float(beta @ inv) if beta is not None else 0.0
    out = []
    for r in readers:
        if beta is not None and r.bias is None:
            continue
        shape = point.w[r.weight].shape
        rest = _bias_shape(point, r)

        def fn(c, r=r, shape=shape, rest=rest):
            u = c.unflatten(-1, rest)
            res = {r.weight: outer_input(u, inv, shape, r.axis)}
            if r.bias is not None:
                res[r.bias] = -shift * u
            return res

        blocks = (r.weight,) + ((r.bias,) if r.bias else ())
        out.append(Group(source, f"{norm}->{r.weight}.centring", r.width, fn, blocks))
    return out


def centring_writers(point: Point, writers: list[str], source: str = "centring_writers") -> list[Group]:
    """One generator per row a reader can see of every writer: that row moves along 1."""
    out = []
    d = point.d
    for name in writers:
        rows = point.writer_rows(name).shape[0]

        def fn(c, name=name):
            return {name: rows_update(point, name, c[..., :, None].expand(*c.shape, d))}

        out.append(Group(source, f"{name}.centring", rows, fn, (name,)))
    return out
