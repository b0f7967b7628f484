"""Many training runs as one batched model: torch.func over parameters stacked on a leading dim.

The runs of one job (attnid.training.runs: every seed, rebalancing mode and, where given, learning
rate of one task, optimizer and head count) differ only in numbers, not in shapes, so they train
together: every parameter is stacked to (M, ...) over the M runs, the forward pass is
`vmap(functional_call(model, params_m, inputs_m))`, one backward pass gives every run's gradient
(the runs are independent, so the gradient of the summed losses is each run's own gradient), the
optimizer is functional and per-run (attnid.training.optim), and the symmetry tools take the
stacked (M, P) parameters of a layer at once (projection, balancing, conserved quantities).
Rebalancing modes are masks: `project` runs remove P_T u from their update, `balance` runs move to
the balanced point every `rebalance_interval` steps; the other runs are untouched.

Each run sees exactly what attnid.training.loop gives it alone (same initial parameters, same data
stream, same measurements; the tests compare both), so a run's numbers do not depend on which
runs it was batched with. One exception by design: a run whose loss stops being finite is marked
diverged at that step (`diverged_step`), frozen, and its later metrics are NaN, while the others
go on (the loop instead raises RunDiverged).

Measured per (run, step, layer), besides METRIC_COLUMNS (see attnid.training.loop):
    imbalance_query_key, imbalance_value_output
                  ||I(theta_{t+1})||_F / scale(theta_0): the size of the conserved quantities
                  (attnid.symmetry.imbalance), whose decay under weight decay is predicted exactly
    overlap_gauge the gauge-invariant overlap: theta_t moved to the balanced point of its orbit,
                  theta_b = g theta_t (g a group element), the update carried along, u_b = g u_t
                  (the action is linear), and the overlap of u_b with T at theta_b. Any other point
                  h theta_t of the orbit with its update h u_t gives the same number (balancing
                  h theta_t reaches theta_b up to an orthogonal map, which keeps norms and overlaps).
"""

from __future__ import annotations

import copy
import math
import sys
import time

import pandas as pd
import torch
from torch.func import functional_call, stack_module_state, vmap
from tqdm import tqdm

from .. import symmetry
from ..attention import attention
from ..device import resolve_device
from ..layout import Layout
from .loop import PARTS, _Deterministic, build
from .optim import Optimizer, symmetry_blocks
from .runs import METRIC_COLUMNS, RunConfig
from .sweep import summarize
from .tasks import STREAM_EVAL, STREAM_PROBE, TeacherStudent

EXTRA_COLUMNS = ("imbalance_query_key", "imbalance_value_output", "overlap_gauge")
SHARED_FIELDS = ("task", "attention", "seq_len", "vocab", "pairs", "n_layers", "norm", "mlp_ratio", "optimizer",
                 "steps", "batch", "rebalance_interval", "probe_batch", "eval_every", "eval_batch", "metrics_every",
                 "device", "dtype")  # fmt: skip
HYPER = ("lr", "weight_decay", "momentum", "beta1", "beta2")


def _check_batchable(cfgs: list[RunConfig]) -> None:
    for f in SHARED_FIELDS:
        values = {repr(getattr(c, f)) for c in cfgs}
        if len(values) > 1:
            raise ValueError(f"runs batched together must share {f!r}; got {sorted(values)}")


class _Data:
    """The runs' tasks, deduplicated by seed (runs with one seed share their data stream).

    Teacher-student targets are computed for all seeds at once (the teachers stacked, vmapped).
    """

    def __init__(self, tasks: list, seeds: list[int]):
        first = {s: i for i, s in reversed(list(enumerate(seeds)))}
        self.unique = sorted(first.values())  # one task per distinct seed
        self.index = torch.tensor([self.unique.index(first[s]) for s in seeds])  # run -> its seed's slot
        self.tasks = [tasks[i] for i in self.unique]
        if isinstance(self.tasks[0], TeacherStudent):
            spec, layout = self.tasks[0].spec, self.tasks[0].teacher.layout
            self.teachers = torch.stack([t.teacher.theta.detach() for t in self.tasks])  # (U, P)
            self.teacher = vmap(lambda theta, x: attention(theta, x, spec, layout))

    def _stack(self, inputs: list, targets: list | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.stack(inputs)  # (U, B, ...)
        if targets is None:  # teacher-student
            with torch.no_grad():
                y = self.teacher(self.teachers, x)
        else:
            y = torch.stack(targets)
        return x[self.index], y[self.index]  # (M, B, ...)

    def train(self, batch: int):
        if isinstance(self.tasks[0], TeacherStudent):
            return self._stack([t.draw_inputs(batch) for t in self.tasks])
        batches = [t.train_batch(batch) for t in self.tasks]
        return self._stack([b.inputs for b in batches], [b.targets for b in batches])

    def fixed(self, batch: int, stream: int):
        if isinstance(self.tasks[0], TeacherStudent):
            return self._stack([t.draw_inputs(batch, stream) for t in self.tasks])
        batches = [t.fixed_batch(batch, stream) for t in self.tasks]
        return self._stack([b.inputs for b in batches], [b.targets for b in batches])


def gauge_overlap(spec, theta: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Overlap of u at theta after both are moved to the balanced point of the orbit; (M,) for (M, P).

    The group element is read off the stacked query-key and value-output matrices by least squares,
    M = Q^+ Q_b and N = V^+ V_b per group (exact when Q and V have full column rank, the generic case
    for head sizes up to d_model).
    """
    (Q, V), (Qb, Vb) = _stacks(spec, theta), _stacks(spec, symmetry.balance(spec, theta))
    M = torch.linalg.lstsq(Q, Qb).solution  # (M, G, k, k)
    N = torch.linalg.lstsq(V, Vb).solution  # (M, G, v, v)
    theta_b = symmetry.act(spec, theta, M, N)
    u_b = symmetry.act(spec, u, M, N)
    return (project(spec, theta_b, u_b).norm(dim=-1) / u_b.norm(dim=-1)).to(torch.float64)


def _stacks(spec, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The stacked query and value matrices Q (M, G, r m_q, k), V (M, G, d + [b_V], v) in float64."""
    w = Layout(spec).unflatten(theta.to(symmetry.COMPUTE_DTYPE))
    return symmetry.qk_stack(spec, w)[0], symmetry.vo_stack(spec, w)[0]


def imbalance_reference(spec, theta0: torch.Tensor) -> dict:
    """The conserved quantities at theta_0 (M, P) and their scales (M,), as attnid.symmetry.imbalance_drift
    measures them: scale = ||Q^T Q||_F + ||K^T K||_F (query-key), ||V^T V||_F + ||O^T O||_F (value-output)."""
    w = Layout(spec).unflatten(theta0.to(symmetry.COMPUTE_DTYPE))
    (Q, K), (V, O) = symmetry.qk_stack(spec, w), symmetry.vo_stack(spec, w)
    gram = lambda x: (x.mT @ x).flatten(1).norm(dim=1)  # (M, G, n, k) -> (M,)
    scale = {"query_key": gram(Q) + gram(K), "value_output": gram(V) + gram(O)}
    return {"imbalance": symmetry.imbalance(spec, theta0), "scale": scale}


def projector(spec, theta: torch.Tensor):
    """u (M, P) -> P_T u at the stacked points theta (M, P), set up once (per run where the batched
    projector does not apply: the value-bias constraint is assembled per point)."""
    if spec.has_bias("v"):
        each = [symmetry.Projector(spec, t) for t in theta]
        return lambda u: torch.stack([proj(x) for proj, x in zip(each, u)])
    return symmetry.Projector(spec, theta)


def project(spec, theta: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """P_T u for stacked (M, P) points and vectors."""
    return projector(spec, theta)(u)


def train_batched(cfgs: list[RunConfig], progress: bool = True, gauge: bool = True) -> list[tuple[pd.DataFrame, dict]]:
    """Train every run of `cfgs` together; return (metrics, summary) per run, as attnid.training.loop.train.

    summary also holds `diverged_step` (-1 when the run never diverged). gauge=False skips the
    gauge-invariant overlap (NaN), e.g. to time the same measurements as the loop.
    """
    _check_batchable(cfgs)
    resolve_device(cfgs[0].device)
    with _Deterministic(cfgs[0].device):
        return _train(cfgs, progress, gauge)


def _train(cfgs: list[RunConfig], progress: bool, gauge: bool) -> list[tuple[pd.DataFrame, dict]]:
    start = time.perf_counter()
    base, M = cfgs[0], len(cfgs)
    spec, S, device = base.attention, base.steps, base.device
    built = [build(cfg) for cfg in cfgs]
    model = copy.deepcopy(built[0][1]).to("meta")  # the architecture; parameters come from `params`
    params, buffers = stack_module_state([m for _, m in built])  # {name: (M, ...)}
    params = {k: v.detach() for k, v in params.items()}
    layers = [n for n in params if n.endswith("attn.theta")]  # attention layers, in model order
    L = len(layers)
    data = _Data([t for t, _ in built], [c.seed for c in cfgs])
    task = built[0][0]
    hyper = {h: torch.tensor([getattr(c, h) for c in cfgs], dtype=torch.float64) for h in HYPER}
    shared = {n: symmetry_blocks(spec) for n in layers} if base.optimizer == "adam_shared" else None
    optimizer = Optimizer(base.optimizer, params, hyper, shared)

    recall = base.task == "recall"
    read_last = {"last_only": True} if recall else {}  # the recall loss reads the last position only

    def forward(p: dict, inputs: torch.Tensor) -> torch.Tensor:  # (M, B, T, d) or (M, B, 1, n_tokens)
        return vmap(lambda pm, bm, x: functional_call(model, (pm, bm), (x,), read_last))(p, buffers, inputs)

    def per_sample(out: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:  # (M, B)
        if not recall:
            return (out - targets).pow(2).flatten(2).mean(2)
        logits = out[:, :, -1, task.vocab :]  # (M, B, vocab): value tokens at the query position
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none").view(M, -1)

    def losses(p: dict, inputs, targets) -> torch.Tensor:  # (M,)
        out = forward(p, inputs)
        return (out - targets).pow(2).flatten(1).mean(1) if not recall else per_sample(out, targets).mean(1)

    def evaluate(p: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Held-out loss and accuracy (M,), in chunks of the training batch (the same numbers, less memory)."""
        loss, correct = [], []
        with torch.no_grad():
            for start in range(0, base.eval_batch, base.batch):
                x, y = eval_in[:, start : start + base.batch], eval_target[:, start : start + base.batch]
                out = forward(p, x)
                loss.append(per_sample(out, y))
                if recall:
                    correct.append(out[:, :, -1, task.vocab :].argmax(-1) == y)
        accuracy = torch.cat(correct, 1).double().mean(1) if recall else torch.full((M,), math.nan, dtype=torch.float64)
        return torch.cat(loss, 1).mean(1), accuracy

    eval_in, eval_target = data.fixed(base.eval_batch, STREAM_EVAL)
    modes = [c.rebalance for c in cfgs]
    projected = torch.tensor([m == "project" for m in modes], device=device)
    balanced = [i for i, m in enumerate(modes) if m == "balance"]
    probe_in = data.fixed(base.probe_batch, STREAM_PROBE)[0][balanced] if balanced else None
    chance = {part: symmetry.chance_overlap(spec, None if part == "all" else part) for part in PARTS}
    masks = {part: symmetry.part_mask(spec, part, device=device) for part in symmetry.PARTS}
    references = [imbalance_reference(spec, params[n]) for n in layers]
    initial = {n: params[n].clone() for n in layers}

    nan = float("nan")
    columns = (*METRIC_COLUMNS[2:], *EXTRA_COLUMNS)
    rows = {c: torch.full((M, S, L), nan, dtype=torch.float64, device=device) for c in columns}
    for part, value in chance.items():
        rows[f"chance_{part}"].fill_(value)
    rows["lr"].copy_(hyper["lr"].to(device)[:, None, None].expand(M, S, L))
    alive = torch.ones(M, dtype=torch.bool, device=device)
    diverged_step = torch.full((M,), -1, dtype=torch.long)

    bar = tqdm(total=S, desc=f"{base.task}/{base.optimizer}/h{spec.n_heads} x{M}", file=sys.stderr,
               disable=not progress, mininterval=2.0, ncols=100)  # fmt: skip
    for t in range(S):
        measure = t % base.metrics_every == 0 or t == S - 1
        if t % base.eval_every == 0 or t == S - 1:
            rows["eval_loss"][:, t], rows["eval_accuracy"][:, t] = (
                x[:, None].to(torch.float64) for x in evaluate(params)
            )
        inputs, targets = data.train(base.batch)
        p = {k: v.requires_grad_(True) for k, v in params.items()}
        loss = losses(p, inputs, targets)
        grads = dict(zip(p, torch.autograd.grad(torch.where(alive, loss, 0).sum(), list(p.values()))))
        params = {k: v.detach() for k, v in p.items()}
        loss = loss.detach()
        newly = alive & ~torch.isfinite(loss)
        if newly.any():
            diverged_step[newly.cpu()] = t
            alive &= ~newly
        rows["loss"][:, t] = torch.where(alive, loss, nan)[:, None]
        with torch.no_grad():
            updates = optimizer.updates(params, grads)
            for k in params:
                u = updates[k]
                if k in layers and (measure or projected.any()):
                    i = layers.index(k)
                    live = alive[:, None]
                    theta = torch.where(live, params[k], initial[k])  # a diverged run is measured at a finite stand-in
                    u = torch.where(live, u, 0)
                    proj = projector(spec, theta)  # P_T at theta_t, set up once for this step
                    tangent = proj(u)  # (M, P)
                    u = torch.where(projected[:, None], u - tangent, u)
                    rows["rebalance_norm_removed"][projected, t, i] = tangent[projected].norm(dim=-1).to(torch.float64)
                    if measure:
                        applied = torch.where(projected[:, None], proj(u), tangent) if projected.any() else tangent
                        norm = u.norm(dim=-1)
                        rows["update_norm"][:, t, i] = norm
                        rows["overlap_all"][:, t, i] = applied.norm(dim=-1) / norm
                        for part, mask in masks.items():
                            rows[f"overlap_{part}"][:, t, i] = applied[:, mask].norm(dim=-1) / u[:, mask].norm(dim=-1)
                        if gauge:
                            rows["overlap_gauge"][:, t, i] = gauge_overlap(spec, theta, u)
                keep = alive.reshape(-1, *[1] * (u.dim() - 1))
                params[k] = torch.where(keep, params[k] + u, params[k])
            members = [i for i in balanced if alive[i]]
            if members and (t + 1) % base.rebalance_interval == 0:
                for i, k in enumerate(layers):
                    sub = {n: v[members] for n, v in params.items()}
                    out_before = _sub_forward(
                        model, sub, buffers, members, probe_in[[balanced.index(j) for j in members]]
                    )
                    norm_before = params[k][members].norm(dim=-1)
                    params[k][members] = symmetry.balance(spec, params[k][members])
                    sub[k] = params[k][members]
                    out_after = _sub_forward(
                        model, sub, buffers, members, probe_in[[balanced.index(j) for j in members]]
                    )
                    change = (out_after - out_before).flatten(1).abs().amax(1) / out_before.flatten(1).abs().amax(1)
                    rows["rebalance_function_change"][members, t, i] = change.to(torch.float64)
                    rows["rebalance_norm_removed"][members, t, i] = (norm_before - params[k][members].norm(dim=-1)).to(
                        torch.float64
                    )
            if measure:
                for i, k in enumerate(layers):
                    current = symmetry.imbalance(spec, params[k])
                    for part in symmetry.PARTS:
                        scale = references[i]["scale"][part]
                        now, then = current[part].flatten(1), references[i]["imbalance"][part].flatten(1)  # (M, n)
                        rows[f"drift_{part}"][:, t, i] = (now - then).norm(dim=1) / scale
                        rows[f"imbalance_{part}"][:, t, i] = now.norm(dim=1) / scale
        if not alive.all():
            for c in columns:
                if c not in ("eval_loss", "eval_accuracy", "lr") and not c.startswith("chance"):
                    rows[c][~alive, t] = nan
        bar.update()
    bar.close()

    final_loss, final_acc = evaluate(params)
    seconds = time.perf_counter() - start
    out = []
    host = {c: v.cpu() for c, v in rows.items()}
    for m, cfg in enumerate(cfgs):
        metrics = pd.DataFrame(
            {"layer": torch.arange(L).repeat(S).numpy(), "step": torch.arange(S).repeat_interleave(L).numpy(),
             **{c: host[c][m].reshape(-1).numpy() for c in columns}}  # row-major (step, layer)
        )[[*METRIC_COLUMNS, *EXTRA_COLUMNS]]  # fmt: skip
        summary = summarize(metrics)
        dead = int(diverged_step[m]) >= 0
        initial = {
            part: float(sum(ref["imbalance"][part][m].norm() / ref["scale"][part][m] for ref in references) / L)
            for part in symmetry.PARTS
        }  # ||I(theta_0)|| / scale, mean over layers
        summary.update(
            initial_imbalance_query_key=initial["query_key"],
            initial_imbalance_value_output=initial["value_output"],
            final_eval_loss=nan if dead else float(final_loss[m]),
            final_eval_accuracy=float(final_acc[m]) if task.has_accuracy and not dead else nan,
            diverged_step=int(diverged_step[m]),
            steps=S,
            parameters_per_layer=int(params[layers[0]].shape[-1]),
            attention_layers=L,
            seconds=seconds / M,  # this run's share of the batched job
            config=cfg.to_dict(),
        )
        out.append((metrics, summary))
    return out


def _sub_forward(model, params: dict, buffers: dict, members: list[int], inputs: torch.Tensor) -> torch.Tensor:
    """The model's output for a subset of the runs (their stacked parameters `params`)."""
    sub_buffers = {n: v[members] for n, v in buffers.items()}
    return vmap(lambda pm, bm, x: functional_call(model, (pm, bm), (x,)))(params, sub_buffers, inputs)
