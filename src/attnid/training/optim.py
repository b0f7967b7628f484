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


CHUNK_BYTES = 1 << 19  # a step's column chunk of one range: 512 KiB a tensor, its handful of tensors within L2


def _segments(keys: list) -> list[tuple[slice, object]]:
    """The maximal ranges of equal keys, [(slice of rows, key)], in order."""
    out, begin = [], 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[begin]:
            out.append((slice(begin, i), keys[begin]))
            begin = i
    return out


def _column_chunks(rows: int, columns: int, itemsize: int) -> list[slice]:
    """Column ranges of a (rows, columns) tensor of about CHUNK_BYTES each (one range when it is smaller).

    An update is a dozen elementwise passes over (rows, P) tensors: at d_model 128 a range of 30 runs holds
    264 MB a tensor, so every pass streams from memory; chunk by chunk the passes after the first read the
    cache. Each coordinate's arithmetic is the same either way (elementwise operations).
    """
    width = max(1, CHUNK_BYTES // max(1, rows * itemsize))
    return [slice(c, min(c + width, columns)) for c in range(0, columns, width)]


class Optimizer:
    """State and step of M runs on flat parameters (M, P), each run with its own algorithm and hyperparameters.

    algorithms: one of attnid.training.runs.ALGORITHMS per run; hyper: per-run tensors (M,) lr, weight_decay,
    momentum, beta1, beta2; shared: (ids (P,), n) from :func:`shared_blocks`, needed when a run is adam_shared.
    The rows are cut into ranges of one family (the SGD family, Adam and AdamW, adam_shared) with the same terms
    (coupled decay, momentum, decoupled decay; a job lists its runs optimizer by optimizer, so a handful of
    ranges), and each range takes its family's step in place on its own state, in the order of operations of
    torch.optim, one column chunk at a time (:func:`_column_chunks`): on a wide model (M P in the tens of
    millions) the dozen passes of a step over whole rows cost as much as the gradient itself.
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
        # per range: its family, and whether its runs have coupled decay, momentum, decoupled decay (a range is runs
        # alike in all four, so it takes only the operations it needs; fixed for the whole run, so no step asks the
        # device)
        family = lambda a: "adam_shared" if a == "adam_shared" else "adam" if a.startswith("adam") else "sgd"
        flags = lambda x: (x != 0).reshape(-1).tolist()
        keys = list(zip([family(a) for a in alg], flags(self.wd_coupled), flags(self.momentum), flags(self.wd_decoupled)))
        self.segments = [(rows, *key) for rows, key in _segments(keys)]
        if "adam_shared" in alg and shared is None:
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
        """u = p_{t+1} - p_t (M, P) for parameters p and gradients g (M, P); p and g are not modified.

        Each range of rows steps column chunk by column chunk (:func:`_column_chunks`); an adam_shared range
        takes its moments first, then its blocks' means of v over the whole row, then the step."""
        self._to(p)
        self.t += 1
        u = torch.empty_like(p)
        for rows, kind, coupled, momentum, decoupled in self.segments:
            self._init_state(rows, kind, momentum, p)
            c = self._coefficients(rows, kind)
            chunks = _column_chunks(rows.stop - rows.start, p.shape[1], p.element_size())
            for cols in chunks:
                p_c = p[rows, cols]
                g_c = torch.addcmul(g[rows, cols], self.wd_coupled[rows], p_c) if coupled else g[rows, cols]  # L2
                if kind == "sgd":
                    self._sgd(rows, cols, g_c, u[rows, cols], momentum, c)
                    continue
                m, v = self.state[f"m{rows.start}"][:, cols], self.state[f"v{rows.start}"][:, cols]
                m.lerp_(g_c, c["1-beta1"])  # Adam's moments in torch.optim.Adam's order
                v.mul_(c["beta2"]).add_(g_c.square().mul_(c["1-beta2"]))
                if kind == "adam":
                    torch.sqrt(v, out=u[rows, cols])
                    self._adam_step(m, p_c, u[rows, cols], decoupled, c)
            if kind == "adam_shared":  # each coordinate reads its block's mean of v
                ids, n = self.shared
                v = self.state[f"v{rows.start}"]
                sums = torch.zeros(v.shape[0], n, dtype=p.dtype, device=p.device).index_add_(1, ids, v)
                u[rows] = (sums / self.counts)[:, ids].sqrt_()
                for cols in chunks:
                    self._adam_step(self.state[f"m{rows.start}"][:, cols], p[rows, cols], u[rows, cols], decoupled, c)
        return u

    def _coefficients(self, rows: slice, kind: str) -> dict[str, torch.Tensor]:
        """The range's per-run factors (rows, 1) of this step, computed once for all its column chunks."""
        if kind == "sgd":
            return {"momentum": self.momentum[rows], "-lr": -self.lr[rows]}
        t, b1, b2, lr = self.t, self.beta1[rows], self.beta2[rows], self.lr[rows]
        return {"1-beta1": 1 - b1, "beta2": b2, "1-beta2": 1 - b2, "sqrt(1-beta2^t)": (1 - b2**t).sqrt(),
                "-lr/(1-beta1^t)": -lr / (1 - b1**t), "lr*decay": lr * self.wd_decoupled[rows]}  # fmt: skip

    def _init_state(self, rows: slice, kind: str, momentum: bool, p: torch.Tensor) -> None:
        """At the first step: the range's momentum buffer (SGD with momentum only) or moments (M_range, P)."""
        if self.t != 1:
            return
        if kind == "sgd":
            if momentum:
                self.state[f"buf{rows.start}"] = torch.empty_like(p[rows])  # b_1 = g_1, written by _sgd
        else:
            self.state[f"m{rows.start}"], self.state[f"v{rows.start}"] = torch.zeros_like(p[rows]), torch.zeros_like(p[rows])

    def _sgd(self, rows: slice, cols: slice, g: torch.Tensor, u: torch.Tensor, momentum: bool, c: dict) -> None:
        """u = -eta b, b = mu b + g (b_1 = g; mu = 0 without momentum) on one column chunk."""
        if momentum:
            buf = self.state[f"buf{rows.start}"][:, cols]
            if self.t == 1:
                buf.copy_(g)
            else:
                buf.mul_(c["momentum"]).add_(g)
            g = buf
        torch.mul(g, c["-lr"], out=u)

    @staticmethod
    def _adam_step(m: torch.Tensor, p: torch.Tensor, u: torch.Tensor, decoupled: bool, c: dict) -> None:
        """u holds sqrt(v) (or its block's mean): denom = u / sqrt(1 - beta2^t) + eps, u = -(eta / (1 - beta1^t))
        m / denom, minus eta lambda p for adamw (the module docstring's step, in torch.optim.Adam's order)."""
        u.div_(c["sqrt(1-beta2^t)"]).add_(EPS)
        torch.div(m, u, out=u)
        u.mul_(c["-lr/(1-beta1^t)"])
        if decoupled:
            u.addcmul_(c["lr*decay"], p, value=-1)
