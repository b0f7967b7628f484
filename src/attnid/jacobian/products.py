r"""Products with the Jacobian J = dY/dtheta of the layer, without ever forming more of J than needed.

Rows of J are ordered by sequence, then token, then output coordinate: J has B T d rows and P
columns. Each output depends on its own sequence only, so one sequence's block of rows is the
Jacobian of a (T, d) output: :func:`jacobian_rows` vmaps ``torch.func.jacrev`` over sequences (T d
backward passes of length T each, not of the whole batch). Forward-mode products J u
(:func:`jvps`) and Gauss-Newton products J^T J u (:func:`gauss_newton`) are vmapped over the rows
of U; :func:`sigma_max` is power iteration on J^T J. Every function takes the RoPE position ids
(B, T) and optional explicit frequencies of :mod:`attnid.layer.forward`.
"""

from __future__ import annotations

import math

import torch
from torch.func import jacrev, jvp, vjp, vmap

from ..layer.forward import attention
from ..layer.layout import Layout
from ..layer.spec import AttentionSpec


def jacobian_rows(
    spec: AttentionSpec,
    theta: torch.Tensor,
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    frequencies: torch.Tensor | None = None,
    max_bytes: float = 2**28,
) -> torch.Tensor:
    """J (B T d, P): per sequence, jacrev of Y (T, d), vmapped over sequences in chunks of `max_bytes`."""
    layout = Layout(spec)
    B, T, d = x.shape
    if positions is None:
        positions = torch.arange(T, dtype=torch.float64, device=x.device).expand(B, T)

    def one_sequence(th, xs, ps):  # (P,), (T, d), (T,) -> (T, d)
        return attention(th, xs, spec, layout, ps, frequencies)

    per_seq = T * d * layout.size * x.element_size()
    chunk = max(1, int(max_bytes // per_seq))
    jac = vmap(jacrev(one_sequence), in_dims=(None, 0, 0), chunk_size=chunk)(theta, x, positions)  # (B, T, d, P)
    return jac.reshape(B * T * d, layout.size)


def _output(spec, x, positions, frequencies):
    layout = Layout(spec)
    return lambda th: attention(th, x, spec, layout, positions, frequencies)


def jvps(
    spec: AttentionSpec,
    theta: torch.Tensor,
    x: torch.Tensor,
    tangents: torch.Tensor,
    positions: torch.Tensor | None = None,
    frequencies: torch.Tensor | None = None,
    chunk: int = 256,
) -> torch.Tensor:
    """J u for each row u of tangents (n, P): (n, B T d), vmapped forward-mode products in chunks."""
    f = _output(spec, x, positions, frequencies)
    push = vmap(lambda u: jvp(f, (theta,), (u,))[1].reshape(-1))
    return torch.cat([push(tangents[i : i + chunk]) for i in range(0, tangents.shape[0], chunk)])


def gauss_newton(
    spec: AttentionSpec,
    theta: torch.Tensor,
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    frequencies: torch.Tensor | None = None,
    chunk: int = 256,
):
    """A function U (n, P) -> (J^T J U^T)^T (n, P): one JVP then one VJP per row, vmapped in chunks."""
    f = _output(spec, x, positions, frequencies)
    _, pull = vjp(f, theta)

    def product(u):
        return pull(jvp(f, (theta,), (u,))[1])[0]

    batched = vmap(product)
    return lambda U: torch.cat([batched(U[i : i + chunk]) for i in range(0, U.shape[0], chunk)])


def sigma_max(
    spec: AttentionSpec,
    theta: torch.Tensor,
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    frequencies: torch.Tensor | None = None,
    iters: int = 30,
    seed: int = 0,
) -> float:
    """Largest singular value of J by power iteration on J^T J (Gauss-Newton products)."""
    gn = gauss_newton(spec, theta, x, positions, frequencies)
    gen = torch.Generator().manual_seed(seed)
    u = torch.randn(1, theta.numel(), generator=gen, dtype=theta.dtype).to(theta.device)
    lam = 0.0
    for _ in range(iters):
        u = u / u.norm()
        w = gn(u)
        lam = float((u * w).sum())
        u = w
    return math.sqrt(max(lam, 0.0))
