"""Functional optimizers on stacked parameters: one update for many runs at once.

Every tensor carries the runs on its leading dim (M, ...); hyperparameters are per run (M,), so
runs that differ only in learning rate or weight decay share one batched step. With g the
gradient, p the parameter, lr = eta, wd = lambda, t = 1, 2, ... the step number:

    sgd           u = -eta (g + lambda p)
    sgd_momentum  b = mu b + (g + lambda p)   (b_1 = g_1 + lambda p_1);   u = -eta b
    adam          g' = g + lambda p;  m = beta1 m + (1 - beta1) g';  v = beta2 v + (1 - beta2) g'^2
                  u = -(eta / (1 - beta1^t)) m / (sqrt(v / (1 - beta2^t)) + eps)
    adamw         the same moments of g (no lambda in them);  u = -eta lambda p - (Adam step)
    adam_shared   Adam whose second moment is averaged over each symmetry block of an attention
                  layer before use: per KV group the query-key block (W_Q^h for h in the group, b_Q^h,
                  W_K^g, b_K^g) and the value-output block (W_V^g, W_O^h); b_O and every
                  non-attention parameter keep their own coordinates. With a value bias the
                  value-output side of every group and b_O are one block (:func:`symmetry_blocks`).

These are the updates of torch.optim.SGD / Adam / AdamW (the tests compare them step by step). Every
run of a job is one row of one flat (M, P) parameter tensor (all its weights side by side), so a step is
a dozen elementwise operations for all runs and all their weights at once.
Why adam_shared: the group acts on a query-key block by (W_Q, W_K) -> (W_Q A, W_K A^{-T}); a
preconditioner that is one scalar per block commutes with that action, so with beta1 = 0 its
update is a positive multiple of the gradient per block and stays orthogonal to the orbit, while
Adam's coordinatewise scaling tilts the update into it. With beta1 > 0 the moving average of past
gradients (taken at other points of the orbit) leaks as momentum does.
"""

from __future__ import annotations

import torch

from ..layer.layout import Layout
from ..layer.spec import AttentionSpec
from ..symmetry import PART_BLOCKS

EPS = 1e-8  # Adam's epsilon (torch's default)


def symmetry_blocks(spec: AttentionSpec) -> tuple[torch.Tensor, int]:
    """Block id of every coordinate of theta (P,) and the number of blocks (see the module docstring).

    Query-key block of group g: id g; value-output block of group g: id G + g; b_O: one id per coordinate.
    With a value bias the value-output blocks of every group and b_O are one block (id G): the translation
    (db_V, db_O = -sum_g db_V^g S_g) moves b_V of every group against b_O, and a preconditioner that is one
    scalar on all of them keeps the update orthogonal to it as well.
    """
    layout = Layout(spec)
    G, r = spec.G, spec.group_size
    value_bias = spec.has_bias("v")
    ids = torch.empty(layout.size, dtype=torch.long)
    for block in layout:
        shape = block.shape
        if block.name == "b_O":
            ids[block.slice] = G if value_bias else 2 * G + torch.arange(block.size)
            continue
        if value_bias and block.name in PART_BLOCKS["value_output"]:
            ids[block.slice] = G
            continue
        offset = 0 if block.name in PART_BLOCKS["query_key"] else G
        per_head = block.name in ("W_Q", "b_Q", "W_O")  # leading dim H (else G)
        lead = torch.arange(shape[0]) // (r if per_head else 1)  # group of each leading index
        ids[block.slice] = (offset + lead).repeat_interleave(block.size // shape[0])
    if value_bias:
        return ids, G + 1
    return ids, 2 * G + (spec.d_model if spec.has_bias("o") else 0)


def shared_blocks(layers: list[tuple[AttentionSpec, torch.Tensor]], size: int) -> tuple[torch.Tensor, int]:
    """Block id of every coordinate of a flat parameter vector (size,) holding the attention layers `layers`
    ((spec, index of the layer's layout in the flat vector) each): the layer's symmetry blocks
    (:func:`symmetry_blocks`), and one id per coordinate everywhere else. Returns (ids, number of ids)."""
    ids = torch.full((size,), -1, dtype=torch.long)
    n = 0
    for spec, index in layers:
        block, count = symmetry_blocks(spec)
        ids[index] = block + n
        n += count
    free = ids < 0
    ids[free] = n + torch.arange(int(free.sum()))
    return ids, n + int(free.sum())


def _segments(flags: list[bool]) -> list[tuple[slice, bool]]:
    """The maximal ranges of equal flags, [(slice of rows, flag)], in order."""
    out, begin = [], 0
    for i in range(1, len(flags) + 1):
        if i == len(flags) or flags[i] != flags[begin]:
            out.append((slice(begin, i), flags[begin]))
            begin = i
    return out


class Optimizer:
    """State and step of M runs on flat parameters (M, P), each run with its own algorithm and hyperparameters.

    algorithms: one of attnid.training.runs.ALGORITHMS per run; hyper: per-run tensors (M,) lr, weight_decay,
    momentum, beta1, beta2; shared: (ids (P,), n) from :func:`shared_blocks`, needed when a run is adam_shared.
    The rows are cut into ranges of one family (the SGD family, the Adam family; a job lists its runs optimizer by
    optimizer, so a handful of ranges), and each range takes its family's step in place on its own state, in the
    order of operations of torch.optim: a step reads the parameters, gradients and moments once or twice each,
    which on a wide model (M P in the tens of millions) costs as much as the gradient itself.
    """

    def __init__(self, algorithms: list[str], hyper: dict, shared: tuple[torch.Tensor, int] | None = None):
        self.t, self.state = 0, {}
        self.M = len(algorithms)
        col = lambda x: x.to(torch.float64).reshape(-1, 1)  # (M, 1)
        alg = list(algorithms)
        self.lr = col(hyper["lr"])
        wd = col(hyper["weight_decay"])
        decoupled = torch.tensor([a == "adamw" for a in alg]).reshape(-1, 1)
        self.wd_coupled = torch.where(decoupled, 0.0, wd)
        self.wd_decoupled = torch.where(decoupled, wd, 0.0)
        self.momentum = torch.where(torch.tensor([a == "sgd_momentum" for a in alg]).reshape(-1, 1), col(hyper["momentum"]), 0.0)
        self.beta1, self.beta2 = col(hyper["beta1"]), col(hyper["beta2"])
        # per range: its family, and whether any of its runs has coupled decay, momentum, decoupled decay (fixed for
        # the whole run, so no step asks the device)
        has = lambda x, rows: bool((x[rows] != 0).any())
        self.segments = [(rows, adam, has(self.wd_coupled, rows), has(self.momentum, rows), has(self.wd_decoupled, rows))
                         for rows, adam in _segments([a.startswith("adam") for a in alg])]  # fmt: skip
        self.shared_rows = [i for i, a in enumerate(alg) if a == "adam_shared"]
        if self.shared_rows and shared is None:
            raise ValueError("adam_shared needs the symmetry blocks of the attention layers (optim.shared_blocks)")
        self.shared = shared
        if shared is not None:
            ids, n = shared
            self.counts = torch.zeros(n, dtype=torch.float64).index_add_(0, ids, torch.ones(ids.shape, dtype=torch.float64))
        self._on = None

    def _to(self, like: torch.Tensor) -> None:
        if self._on == (like.device, like.dtype):
            return
        for name in ("lr", "wd_coupled", "wd_decoupled", "momentum", "beta1", "beta2"):
            setattr(self, name, getattr(self, name).to(like))
        if self.shared is not None:
            self.shared = (self.shared[0].to(like.device), self.shared[1])
            self.counts = self.counts.to(like)
        self._on = (like.device, like.dtype)

    def update(self, p: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """u = p_{t+1} - p_t (M, P) for parameters p and gradients g (M, P); p and g are not modified."""
        self._to(p)
        self.t += 1
        u = torch.empty_like(p)
        for rows, adam, coupled, momentum, decoupled in self.segments:
            p_rows = p[rows]
            g_rows = torch.addcmul(g[rows], self.wd_coupled[rows], p_rows) if coupled else g[rows]  # L2 in the gradient
            if adam:
                self._adam(rows, p_rows, g_rows, u[rows], decoupled)
            else:
                self._sgd(rows, g_rows, u[rows], momentum)
        return u

    def _sgd(self, rows: slice, g: torch.Tensor, u: torch.Tensor, momentum: bool) -> None:
        """u = -eta b, b = mu b + g (b_1 = g; mu = 0 without momentum)."""
        key = f"buf{rows.start}"
        if momentum:
            if self.t == 1:
                self.state[key] = g.clone()
            else:
                self.state[key].mul_(self.momentum[rows]).add_(g)
            g = self.state[key]
        torch.mul(g, -self.lr[rows], out=u)

    def _adam(self, rows: slice, p: torch.Tensor, g: torch.Tensor, u: torch.Tensor, decoupled: bool) -> None:
        """Adam's step (module docstring) as torch.optim.Adam orders it: m.lerp_(g, 1 - beta1),
        v = beta2 v + (1 - beta2) g^2, denom = sqrt(v) / sqrt(1 - beta2^t) + eps, u = -(eta / (1 - beta1^t)) m / denom,
        minus eta lambda p for adamw; adam_shared rows read their block's mean of v."""
        t, b1, b2 = self.t, self.beta1[rows], self.beta2[rows]
        if t == 1:
            self.state[f"m{rows.start}"], self.state[f"v{rows.start}"] = torch.zeros_like(p), torch.zeros_like(p)
        m, v = self.state[f"m{rows.start}"], self.state[f"v{rows.start}"]
        m.lerp_(g, 1 - b1)
        v.mul_(b2).add_(g.square().mul_(1 - b2))
        torch.sqrt(v, out=u)
        shared = [i - rows.start for i in self.shared_rows if rows.start <= i < rows.stop]
        if shared:  # each coordinate reads its block's mean of v
            ids, n = self.shared
            sums = torch.zeros(len(shared), n, dtype=p.dtype, device=p.device).index_add_(1, ids, v[shared])
            u[shared] = (sums / self.counts)[:, ids].sqrt_()
        u.div_((1 - b2**t).sqrt()).add_(EPS)
        torch.div(m, u, out=u)
        u.mul_(-self.lr[rows] / (1 - b1**t))
        if decoupled:
            u.addcmul_(self.lr[rows] * self.wd_decoupled[rows], p, value=-1)
