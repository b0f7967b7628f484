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

from ..layout import Layout
from ..spec import AttentionSpec
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


class Optimizer:
    """State and step of M runs on flat parameters (M, P), each run with its own algorithm and hyperparameters.

    algorithms: one of attnid.training.runs.ALGORITHMS per run; hyper: per-run tensors (M,) lr, weight_decay,
    momentum, beta1, beta2; shared: (ids (P,), n) from :func:`shared_blocks`, needed when a run is adam_shared.
    Runs of different algorithms share one step: the SGD and Adam updates are computed for every run and each
    run keeps its own (a few elementwise operations more, one dispatch of each instead of one per algorithm).
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
        self.adam = torch.tensor([a.startswith("adam") for a in alg]).reshape(-1, 1)
        self.momentum = torch.where(torch.tensor([a == "sgd_momentum" for a in alg]).reshape(-1, 1), col(hyper["momentum"]), 0.0)
        self.beta1, self.beta2 = col(hyper["beta1"]), col(hyper["beta2"])
        self.any_adam, self.all_adam = bool(self.adam.any()), bool(self.adam.all())
        self.any_momentum = bool((self.momentum > 0).any())
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
        # the moments' new-gradient weights and the decoupled decay's step, once in the parameters' dtype
        self.c1, self.c2, self.lr_wd = 1 - self.beta1, 1 - self.beta2, self.lr * self.wd_decoupled
        self.adam = self.adam.to(like.device)
        if self.shared is not None:
            self.shared = (self.shared[0].to(like.device), self.shared[1])
            self.counts = self.counts.to(like)
        self._on = (like.device, like.dtype)

    def update(self, p: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """u = p_{t+1} - p_t (M, P) for parameters p and gradients g (M, P); nothing is modified in place."""
        self._to(p)
        self.t += 1
        t, state = self.t, self.state
        g = g + self.wd_coupled * p  # L2 in the gradient (adamw: decoupled below)
        u_sgd = u_adam = None
        if not self.all_adam:
            if self.any_momentum:
                state["buf"] = g.clone() if t == 1 else self.momentum * state["buf"] + g
                u_sgd = -self.lr * state["buf"]
            else:
                u_sgd = -self.lr * g
        if self.any_adam:
            b1, b2 = self.beta1, self.beta2
            if t == 1:
                state["m"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
            state["m"] = b1 * state["m"] + self.c1 * g
            state["v"] = b2 * state["v"] + self.c2 * g * g
            v = state["v"]
            if self.shared_rows:
                ids, n = self.shared
                rows = self.shared_rows
                sums = torch.zeros(len(rows), n, dtype=p.dtype, device=p.device).index_add_(1, ids, v[rows])
                v = v.clone()
                v[rows] = (sums / self.counts)[:, ids]  # each coordinate reads its block's mean
            denom = (v / (1 - b2**t)).sqrt() + EPS
            u_adam = -(self.lr / (1 - b1**t)) * state["m"] / denom - self.lr_wd * p
        if u_sgd is None:
            return u_adam
        if u_adam is None:
            return u_sgd
        return torch.where(self.adam, u_adam, u_sgd)
