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
import time

import pandas as pd
import torch
from torch.func import functional_call, stack_module_state, vmap
from tqdm import tqdm

from .. import symmetry
from ..attention import attention
from ..device import resolve_device
from ..layout import Layout
from .determinism import deterministic
from .loop import build
from .metrics import measurement_tensors, metrics_table
from .optim import Optimizer, symmetry_blocks
from .runs import METRIC_COLUMNS, RunConfig
from .sweep import summarize_run
from .tasks import STREAM_EVAL, STREAM_PROBE, TeacherStudent

EXTRA_COLUMNS = ("imbalance_query_key", "imbalance_value_output", "overlap_gauge")
COLUMNS = (*METRIC_COLUMNS[2:], *EXTRA_COLUMNS)  # the measurements kept per (run, step, layer)
# what a step measures, NaN once the run diverged (the rest: held-out evaluation and constants)
STEP_COLUMNS = tuple(c for c in COLUMNS if c not in ("eval_loss", "eval_accuracy", "lr") and "chance" not in c)
SHARED_FIELDS = ("task", "attention", "seq_len", "vocab", "pairs", "n_layers", "norm", "mlp_ratio", "algorithm",
                 "steps", "batch", "rebalance_interval", "probe_batch", "eval_every", "eval_batch", "metrics_every",
                 "device", "dtype")  # fmt: skip
HYPER = ("lr", "weight_decay", "momentum", "beta1", "beta2")


def train_batched(cfgs: list[RunConfig], progress: bool = True, gauge: bool = True) -> list[tuple[pd.DataFrame, dict]]:
    """Train every run of `cfgs` together; return (metrics, summary) per run, as attnid.training.loop.train.

    summary also holds `diverged_step` (-1 when the run never diverged). gauge=False skips the
    gauge-invariant overlap (NaN), e.g. to time the same measurements as the loop.
    """
    _check_batchable(cfgs)
    resolve_device(cfgs[0].device)
    with deterministic(cfgs[0].device):
        start = time.perf_counter()
        state = _BatchedRuns(cfgs, gauge)
        base = cfgs[0]
        desc = f"{base.task}/{base.algorithm}/h{base.heads} x{len(cfgs)}"
        with tqdm(total=base.steps, desc=desc, disable=not progress, mininterval=2.0, ncols=100) as bar:
            for t in range(base.steps):
                state.step(t)
                bar.update()
        return state.results(start)


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


class _Model:
    """The runs' common architecture as a function of their stacked parameters {name: (M, ...)}.

    The output of run m is functional_call(module, (params_m, buffers_m), inputs_m), vmapped over m.
    Losses per run, means over its batch: teacher-student, the squared error over every output entry;
    recall, the cross-entropy of the value tokens' logits at the query (last) position, which is all
    the model computes for a training step (`last_only`).
    """

    def __init__(self, module: torch.nn.Module, buffers: dict, recall: bool, vocab: int):
        self.module = copy.deepcopy(module).to("meta")  # the architecture; parameters come from the caller
        self.buffers, self.recall, self.vocab = buffers, recall, vocab
        self.read_last = {"last_only": True} if recall else {}

    def outputs(self, params: dict, inputs: torch.Tensor, members: list[int] | None = None) -> torch.Tensor:
        """The whole output of the runs `members` (all runs when None; params are theirs) on inputs (m, B, ...)."""
        buffers = self.buffers if members is None else {n: v[members] for n, v in self.buffers.items()}
        return vmap(lambda pm, bm, x: functional_call(self.module, (pm, bm), (x,)))(params, buffers, inputs)

    def _forward(self, params: dict, inputs: torch.Tensor) -> torch.Tensor:  # (M, B, T, d) or (M, B, 1, n_tokens)
        read = lambda pm, bm, x: functional_call(self.module, (pm, bm), (x,), self.read_last)
        return vmap(read)(params, self.buffers, inputs)

    def _answer_logits(self, out: torch.Tensor) -> torch.Tensor:  # (M, B, vocab): value tokens, query position
        return out[:, :, -1, self.vocab :]

    def _per_sample(self, out: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:  # (M, B)
        if not self.recall:
            return (out - targets).pow(2).flatten(2).mean(2)
        logits = self._answer_logits(out)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
        return loss.view(out.shape[0], -1)

    def losses(self, params: dict, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:  # (M,)
        out = self._forward(params, inputs)
        return self._per_sample(out, targets).mean(1) if self.recall else (out - targets).pow(2).flatten(1).mean(1)

    def evaluate(self, params: dict, inputs: torch.Tensor, targets: torch.Tensor, chunk: int):
        """Held-out loss and accuracy (M,) (NaN accuracy for teacher-student), computed in chunks of
        `chunk` sequences (the same numbers, less memory)."""
        loss, correct = [], []
        with torch.no_grad():
            for start in range(0, inputs.shape[1], chunk):
                x, y = inputs[:, start : start + chunk], targets[:, start : start + chunk]
                out = self._forward(params, x)
                loss.append(self._per_sample(out, y))
                if self.recall:
                    correct.append(self._answer_logits(out).argmax(-1) == y)
        nan = torch.full((inputs.shape[0],), math.nan, dtype=torch.float64)
        accuracy = torch.cat(correct, 1).double().mean(1) if self.recall else nan
        return torch.cat(loss, 1).mean(1), accuracy


class _BatchedRuns:
    """M runs of one shape as stacked state, and one method per part of a training step.

    params {name: (M, ...)}; `layers` the names of the attention layers' flat parameters theta
    (M, P), in model order; rows {column: (M, S, L)} the measurements (attnid.training.metrics).
    """

    def __init__(self, cfgs: list[RunConfig], gauge: bool):
        base = self.base = cfgs[0]
        self.cfgs, self.M, self.spec, self.gauge, device = cfgs, len(cfgs), base.attention, gauge, base.device
        built = [build(cfg) for cfg in cfgs]
        params, buffers = stack_module_state([m for _, m in built])  # {name: (M, ...)}
        self.params = {k: v.detach() for k, v in params.items()}
        self.layers = [n for n in self.params if n.endswith("attn.theta")]
        self.task = built[0][0]
        self.model = _Model(built[0][1], buffers, base.task == "recall", base.vocab)
        self.data = _Data([t for t, _ in built], [c.seed for c in cfgs])
        self.hyper = {h: torch.tensor([getattr(c, h) for c in cfgs], dtype=torch.float64) for h in HYPER}
        shared = {n: symmetry_blocks(self.spec) for n in self.layers} if base.algorithm == "adam_shared" else None
        self.optimizer = Optimizer(base.algorithm, self.params, self.hyper, shared)
        self.eval_in, self.eval_target = self.data.fixed(base.eval_batch, STREAM_EVAL)
        modes = [c.rebalance for c in cfgs]
        self.projected = torch.tensor([m == "project" for m in modes], device=device)
        self.balanced = [i for i, m in enumerate(modes) if m == "balance"]
        self.probe_in = self.data.fixed(base.probe_batch, STREAM_PROBE)[0][self.balanced] if self.balanced else None
        self.masks = {part: symmetry.part_mask(self.spec, part, device=device) for part in symmetry.PARTS}
        self.references = [symmetry.imbalance_reference(self.spec, self.params[n]) for n in self.layers]
        self.theta0 = {n: self.params[n].clone() for n in self.layers}  # where a diverged run is measured
        shape = (self.M, base.steps, len(self.layers))
        self.rows = measurement_tensors(COLUMNS, shape, self.spec, self.hyper["lr"], device)
        self.alive = torch.ones(self.M, dtype=torch.bool, device=device)
        self.diverged_step = torch.full((self.M,), -1, dtype=torch.long)

    def step(self, t: int) -> None:
        """Step t: evaluate at theta_t (every eval_every steps and at the last), the gradient on batch t,
        the update u_t (projected in `project` runs) with its measurements, theta_{t+1} = theta_t + u_t,
        the rebalance of `balance` runs, the conserved quantities at theta_{t+1}."""
        base, last = self.base, t == self.base.steps - 1
        measure = t % base.metrics_every == 0 or last
        if t % base.eval_every == 0 or last:
            loss, accuracy = self.model.evaluate(self.params, self.eval_in, self.eval_target, base.batch)
            self.rows["eval_loss"][:, t], self.rows["eval_accuracy"][:, t] = (
                x[:, None].to(torch.float64) for x in (loss, accuracy)
            )
        grads = self._gradients(t)
        with torch.no_grad():
            self._update(grads, t, measure)
            if (t + 1) % base.rebalance_interval == 0:
                self._rebalance(t)
            if measure:
                self._measure_conserved(t)
        if not self.alive.all():  # a diverged run's measurements are NaN from its divergence on
            for c in STEP_COLUMNS:
                self.rows[c][~self.alive, t] = math.nan

    def _gradients(self, t: int) -> dict:
        """Each run's gradient at theta_t on training batch t (zero for a diverged run); the loss is
        recorded, and a run whose loss is not finite is marked diverged at step t."""
        inputs, targets = self.data.train(self.base.batch)
        p = {k: v.requires_grad_(True) for k, v in self.params.items()}
        loss = self.model.losses(p, inputs, targets)  # (M,)
        grads = dict(zip(p, torch.autograd.grad(torch.where(self.alive, loss, 0).sum(), list(p.values()))))
        self.params = {k: v.detach() for k, v in p.items()}
        loss = loss.detach()
        newly = self.alive & ~torch.isfinite(loss)
        if newly.any():
            self.diverged_step[newly.cpu()] = t
            self.alive &= ~newly
        self.rows["loss"][:, t] = torch.where(self.alive, loss, math.nan)[:, None]
        return grads

    def _update(self, grads: dict, t: int, measure: bool) -> None:
        """theta_{t+1} = theta_t + u_t for every live run, u_t the optimizer's update (attention layers:
        without its tangent part P_T u in `project` runs, measured on `measure` steps)."""
        updates = self.optimizer.updates(self.params, grads)
        for k in self.params:
            u = updates[k]
            if k in self.layers and (measure or self.projected.any()):
                u = self._attention_update(k, u, t, measure)
            keep = self.alive.reshape(-1, *[1] * (u.dim() - 1))
            self.params[k] = torch.where(keep, self.params[k] + u, self.params[k])

    def _attention_update(self, k: str, u: torch.Tensor, t: int, measure: bool) -> torch.Tensor:
        """The update (M, P) of attention layer `k` as applied: u - P_T u in `project` runs, norm_removed =
        ||P_T u||; on `measure` steps its norm and overlaps ||P_T u|| / ||u|| (whole, per part, gauge)."""
        i, rows, projected, live = self.layers.index(k), self.rows, self.projected, self.alive[:, None]
        theta = torch.where(live, self.params[k], self.theta0[k])  # a diverged run is measured at a finite stand-in
        u = torch.where(live, u, 0)
        proj = stacked_projector(self.spec, theta)  # P_T at theta_t, set up once for this step
        tangent = proj(u)  # (M, P)
        u = torch.where(projected[:, None], u - tangent, u)
        rows["rebalance_norm_removed"][projected, t, i] = tangent[projected].norm(dim=-1).to(torch.float64)
        if not measure:
            return u
        applied = torch.where(projected[:, None], proj(u), tangent) if projected.any() else tangent  # P_T u_applied
        norm = u.norm(dim=-1)
        rows["update_norm"][:, t, i] = norm
        rows["overlap_all"][:, t, i] = applied.norm(dim=-1) / norm
        for part, mask in self.masks.items():
            rows[f"overlap_{part}"][:, t, i] = applied[:, mask].norm(dim=-1) / u[:, mask].norm(dim=-1)
        if self.gauge:
            rows["overlap_gauge"][:, t, i] = gauge_overlap(self.spec, theta, u)
        return u

    def _rebalance(self, t: int) -> None:
        """Move every live `balance` run to the balanced point of each layer's orbit, theta' = balance(theta);
        function_change = max|F' - F| / max|F| on the probe batch, norm_removed = ||theta|| - ||theta'||."""
        members = [i for i in self.balanced if self.alive[i]]
        if not members:
            return
        probe = self.probe_in[[self.balanced.index(j) for j in members]]
        for i, k in enumerate(self.layers):
            sub = {n: v[members] for n, v in self.params.items()}
            out_before = self.model.outputs(sub, probe, members)
            norm_before = self.params[k][members].norm(dim=-1)
            self.params[k][members] = symmetry.balance(self.spec, self.params[k][members])
            sub[k] = self.params[k][members]
            out_after = self.model.outputs(sub, probe, members)
            change = (out_after - out_before).flatten(1).abs().amax(1) / out_before.flatten(1).abs().amax(1)
            self.rows["rebalance_function_change"][members, t, i] = change.to(torch.float64)
            removed = norm_before - self.params[k][members].norm(dim=-1)
            self.rows["rebalance_norm_removed"][members, t, i] = removed.to(torch.float64)

    def _measure_conserved(self, t: int) -> None:
        """drift = ||I(theta_{t+1}) - I(theta_0)||_F / scale and imbalance = ||I(theta_{t+1})||_F / scale per part
        (attnid.symmetry.imbalance_reference: scale(theta_0))."""
        for i, k in enumerate(self.layers):
            current, ref = symmetry.imbalance(self.spec, self.params[k]), self.references[i]
            for part in symmetry.PARTS:
                now, then = current[part].flatten(1), ref["imbalance"][part].flatten(1)  # (M, n)
                self.rows[f"drift_{part}"][:, t, i] = (now - then).norm(dim=1) / ref["scale"][part]
                self.rows[f"imbalance_{part}"][:, t, i] = now.norm(dim=1) / ref["scale"][part]

    def results(self, start: float) -> list[tuple[pd.DataFrame, dict]]:
        """(metrics, summary) of every run, after the last step (held-out loss at theta_S)."""
        final_loss, final_accuracy = self.model.evaluate(self.params, self.eval_in, self.eval_target, self.base.batch)
        seconds = (time.perf_counter() - start) / self.M  # each run's share of the batched job
        host = {c: v.cpu() for c, v in self.rows.items()}
        out = []
        for m, cfg in enumerate(self.cfgs):
            metrics = metrics_table({c: host[c][m] for c in COLUMNS}, COLUMNS)
            out.append((metrics, self._summary(m, metrics, float(final_loss[m]), float(final_accuracy[m]), seconds)))
        return out

    def _summary(self, m: int, metrics: pd.DataFrame, final_loss: float, final_accuracy: float, seconds: float) -> dict:
        """Run m's summary: attnid.training.sweep.summarize_run, the held-out numbers after the last step
        (NaN for a diverged run), ||I(theta_0)|| / scale averaged over the layers, sizes and time."""
        dead, L = int(self.diverged_step[m]) >= 0, len(self.layers)
        initial = {
            part: float(sum(ref["imbalance"][part][m].norm() / ref["scale"][part][m] for ref in self.references) / L)
            for part in symmetry.PARTS
        }
        summary = summarize_run(metrics)
        summary.update(
            initial_imbalance_query_key=initial["query_key"],
            initial_imbalance_value_output=initial["value_output"],
            final_eval_loss=math.nan if dead else final_loss,
            final_eval_accuracy=final_accuracy if self.task.has_accuracy and not dead else math.nan,
            diverged_step=int(self.diverged_step[m]),
            steps=self.base.steps,
            parameters_per_layer=int(self.params[self.layers[0]].shape[-1]),
            attention_layers=L,
            seconds=seconds,
            config=self.cfgs[m].to_dict(),
        )
        return summary


def stacked_projector(spec, theta: torch.Tensor):
    """u (M, P) -> P_T u at the stacked points theta (M, P), set up once (per run where the batched
    projector does not apply: the value-bias constraint is assembled per point)."""
    if spec.has_bias("v"):
        each = [symmetry.Projector(spec, t) for t in theta]
        return lambda u: torch.stack([proj(x) for proj, x in zip(each, u)])
    return symmetry.Projector(spec, theta)


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
    return (stacked_projector(spec, theta_b)(u_b).norm(dim=-1) / u_b.norm(dim=-1)).to(torch.float64)


def _stacks(spec, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The stacked query and value matrices Q (M, G, r m_q, k), V (M, G, d + [b_V], v) in float64."""
    w = Layout(spec).unflatten(theta.to(symmetry.COMPUTE_DTYPE))
    return symmetry.qk_stack(spec, w)[0], symmetry.vo_stack(spec, w)[0]
