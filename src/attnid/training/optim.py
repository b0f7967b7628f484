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
                  W_K^g, b_K^g) and the value-output block (W_V^g, b_V^g, W_O^h); b_O and every
                  non-attention parameter keep their own coordinates.

These are the updates of torch.optim.SGD / Adam / AdamW (the tests compare them step by step).
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
    """
    layout = Layout(spec)
    G, r = spec.G, spec.group_size
    ids = torch.empty(layout.size, dtype=torch.long)
    for block in layout:
        shape = block.shape
        if block.name == "b_O":
            ids[block.slice] = 2 * G + torch.arange(block.size)
            continue
        offset = 0 if block.name in PART_BLOCKS["query_key"] else G
        per_head = block.name in ("W_Q", "b_Q", "W_O")  # leading dim H (else G)
        lead = torch.arange(shape[0]) // (r if per_head else 1)  # group of each leading index
        ids[block.slice] = (offset + lead).repeat_interleave(block.size // shape[0])
    return ids, 2 * G + (spec.d_model if spec.has_bias("o") else 0)


class Optimizer:
    """State and step of one algorithm for stacked parameters {name: (M, ...)}.

    hyper: per-run tensors (M,) lr, weight_decay, momentum, beta1, beta2. shared: {name: (ids, n)}
    for adam_shared, the symmetry blocks of each attention parameter (from :func:`symmetry_blocks`).
    """

    def __init__(self, algorithm: str, params: dict, hyper: dict, shared: dict | None = None):
        self.algorithm, self.hyper, self.shared, self.t = algorithm, hyper, shared or {}, 0
        self.state = {name: {} for name in params}

    def _h(self, key: str, like: torch.Tensor) -> torch.Tensor:
        """Per-run hyperparameter broadcast against a stacked tensor (M, ...)."""
        return self.hyper[key].to(like).reshape(-1, *([1] * (like.dim() - 1)))

    def updates(self, params: dict, grads: dict) -> dict:
        """u = p_{t+1} - p_t for every parameter (nothing is modified in place)."""
        self.t += 1
        return {name: self._update(name, params[name], grads[name]) for name in params}

    def _update(self, name: str, p: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        lr, wd, state, t = self._h("lr", p), self._h("weight_decay", p), self.state[name], self.t
        if self.algorithm != "adamw":
            g = g + wd * p
        if self.algorithm == "sgd":
            return -lr * g
        if self.algorithm == "sgd_momentum":
            state["buf"] = g.clone() if t == 1 else self._h("momentum", p) * state["buf"] + g
            return -lr * state["buf"]
        b1, b2 = self._h("beta1", p), self._h("beta2", p)
        if t == 1:
            state["m"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
        state["m"] = b1 * state["m"] + (1 - b1) * g
        state["v"] = b2 * state["v"] + (1 - b2) * g * g
        v = state["v"]
        if self.algorithm == "adam_shared" and name in self.shared:
            ids, n = self.shared[name]
            ids = ids.to(p.device)
            sums = torch.zeros(p.shape[0], n, dtype=p.dtype, device=p.device).index_add_(1, ids, v)
            counts = torch.zeros(n, dtype=p.dtype, device=p.device).index_add_(0, ids, torch.ones_like(v[0]))
            v = (sums / counts)[:, ids]  # (M, P): each coordinate reads its block's mean
        denom = (v / (1 - b2**t)).sqrt() + EPS
        step = -(lr / (1 - b1**t)) * state["m"] / denom
        return step - lr * wd * p if self.algorithm == "adamw" else step
