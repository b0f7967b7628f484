"""Many training runs as one batched model: torch.func over flat parameters stacked on a leading dim.

The runs of one job (attnid.training.runs: every optimizer, rebalancing mode and seed of one task, model and
head count) differ only in numbers, not in shapes, so they train together: run m's parameters are row m of
one flat tensor theta (M, P) (attnid.training.nets.Net: every weight of the model side by side), the loss
and its gradient are one vmapped forward pass over the rows and one backward pass of the summed losses (each
run's gradient its own: loss_m reads row m alone), the optimizer is one
elementwise update of the (M, P) tensor with per-run algorithm and hyperparameters (attnid.training.optim),
and the symmetry tools take every run's attention layer at once (the layer's layout gathered from theta by
its index vector: projection, balancing, conserved quantities). Rebalancing modes are row masks: `project`
runs remove P_T u from their update every step, `balance` runs move to the balanced point every
`rebalance_interval` steps.

Each run sees exactly what it sees alone (same initial parameters, same data stream, same measurements;
the tests compare every run with a torch.optim reference loop of one run, tests/reference_loop.py), so a
run's numbers do not depend on which runs it was batched with; one run is the single-run case, `[cfg]`. A
run whose loss stops being finite is marked diverged at that step (`diverged_step`), frozen, and its later
measurements are NaN, while the others go on.

What a step costs, besides the forward and backward pass: the optimizer (a dozen elementwise operations
on (M, P)); for `project` runs one projector per attention layer (Gram eigendecompositions per KV group,
attnid.symmetry.Projector, batched over the runs); on measured steps only (attnid.training.metrics) the
projector of every run and the conserved quantities, and on the measured steps that are multiples of
`gauge_overlap_every` (and the last) the gauge-invariant overlap (a balance, its group element and a second
projector: the costliest measurement of a step). Nothing waits for the host inside the loop. The process keeps
freed buffers in its heap (attnid.training.heap): a step's buffers of tens of MiB are otherwise faulted in anew
every step.

Measured per (run, measured step, layer): attnid.training.runs.METRIC_COLUMNS (attnid.training.metrics says
what each is; the gauge-invariant overlap is attnid.training.overlap's).
"""

from __future__ import annotations

import math
import time

import pandas as pd
import torch
from torch.func import vmap
from tqdm import tqdm

from .. import symmetry
from ..device import resolve_device
from ..layer.layout import Layout
from .determinism import deterministic
from .gauges import model_gauge
from .heap import keep_buffers_on_heap
from .data import Data
from .metrics import Measurements, chance_levels
from .nets import Net, make_task
from .optim import Optimizer, shared_blocks
from .overlap import gauge_overlap, stacked_projector
from .runs import METRIC_COLUMNS, RunConfig, measured_steps
from .sweep import plateau_change, summarize_run
from .tasks import STREAM_EVAL, STREAM_PROBE

COLUMNS = METRIC_COLUMNS[2:]  # the measurements kept per (run, measured step, layer)
# what a step measures, NaN once the run diverged (the rest: held-out evaluation)
STEP_COLUMNS = tuple(c for c in COLUMNS if c not in ("eval_loss", "eval_accuracy"))
SHARED_FIELDS = ("task", "model", "attention", "seq_len", "noise", "vocab", "pairs", "order", "alpha", "n_layers",
                 "norm", "mlp_ratio", "kv_ratio", "steps", "batch", "rebalance_interval", "probe_batch", "eval_every",
                 "eval_batch", "metrics_every", "gauge_every", "gauge_max_dim", "gauge_overlap_every", "device", "dtype")  # fmt: skip
HYPER = ("lr", "weight_decay", "momentum", "beta1", "beta2")
DATA_AHEAD = 8  # teacher-student training batches drawn and labelled at once (Data)
EVAL_CHUNK = 128  # held-out sequences per forward pass (fewer, larger passes; the same numbers)
EVAL_OUTPUTS = 2**22  # at most this many outputs of all runs per pass (32 MiB in float64)


def train_batched(cfgs: list[RunConfig], progress: bool = True, gauge: bool = True) -> list[tuple[pd.DataFrame, dict]]:
    """Train every run of `cfgs` together; return (metrics, summary) per run.

    metrics: one row per (measured step, attention layer), columns METRIC_COLUMNS (attnid.training.metrics);
    summary: final and mean values of the run (attnid.training.sweep.summarize_run), its config, its share of
    the wall time, and `diverged_step` (-1 when the run never diverged). gauge=False skips the gauge-invariant
    overlap (NaN), e.g. to time fewer measurements.
    """
    _check_batchable(cfgs)
    resolve_device(cfgs[0].device)
    keep_buffers_on_heap()  # a step's large buffers reused, not faulted in anew (attnid.training.heap)
    with deterministic(cfgs[0].device):
        start = time.perf_counter()
        state = BatchedRuns(cfgs, gauge)
        base = cfgs[0]
        desc = f"{base.task}/{base.model}/h{base.heads} x{len(cfgs)}"
        with tqdm(total=base.steps, desc=desc, disable=not progress, mininterval=5.0, ncols=100) as bar:
            for t in range(base.steps):
                state.step(t)
                bar.update()
        return state.results(start)


def _check_batchable(cfgs: list[RunConfig]) -> None:
    for f in SHARED_FIELDS:
        values = {repr(getattr(c, f)) for c in cfgs}
        if len(values) > 1:
            raise ValueError(f"runs batched together must share {f!r}; got {sorted(values)}")


class BatchedRuns:
    """M runs of one shape as stacked state, and one method per part of a training step.

    theta (M, P) the runs' flat parameters; `net.layers` the index vectors of the attention layers' layouts
    in theta, in model order; `meas` the measurements (attnid.training.metrics).
    """

    def __init__(self, cfgs: list[RunConfig], gauge: bool = True):
        base = self.base = cfgs[0]
        self.cfgs, self.M, self.spec, self.gauge, device = cfgs, len(cfgs), base.attention, gauge, base.device
        seeds = [c.seed for c in cfgs]
        tasks = {s: make_task(c) for s, c in zip(seeds, cfgs)}
        self.net = Net(base, tasks[seeds[0]])
        self.task = tasks[seeds[0]]
        init = {s: self.net.init(s) for s in tasks}
        self.theta = torch.stack([init[s] for s in seeds])  # (M, P)
        self.data = Data([tasks[s] for s in seeds], seeds)
        self.floor = torch.tensor([getattr(tasks[s], "loss_floor", math.nan) for s in seeds], dtype=torch.float64)
        self.hyper = {h: torch.tensor([getattr(c, h) for c in cfgs], dtype=torch.float64) for h in HYPER}
        algorithms = [c.algorithm for c in cfgs]
        layers = [(self.spec, idx.cpu()) for idx in self.net.layers]
        shared = shared_blocks(layers, self.net.size) if "adam_shared" in algorithms else None
        self.optimizer = Optimizer(algorithms, self.hyper, shared)
        self.eval_in, self.eval_target = self.data.fixed(base.eval_batch, STREAM_EVAL)
        modes = [c.rebalance for c in cfgs]
        self.projected = torch.tensor([m == "project" for m in modes], device=device)
        self.projected_rows, self.any_projected = self.projected.nonzero()[:, 0], "project" in modes
        self.balanced = [i for i, m in enumerate(modes) if m == "balance"]
        self.probe_in = self.data.fixed(base.probe_batch, STREAM_PROBE)[0][self.balanced] if self.balanced else None
        self.masks = {  # each part's coordinates of a layer, a slice where contiguous (the usual layout)
            part: _as_slice(symmetry.part_mask(self.spec, part, device=device).nonzero()[:, 0])
            for part in symmetry.PARTS
        }
        self.references = [symmetry.imbalance_reference(self.spec, self.theta[:, idx]) for idx in self.net.layers]
        self.theta0 = self.theta.clone()  # where a diverged run is measured
        self.model_gauge = model_gauge(self.net, base.gauge_max_dim) if gauge else None  # real architectures: the whole model's orbit
        every = base.gauge_every if self.model_gauge is not None else None
        self.steps = measured_steps(base.steps, base.metrics_every, base.eval_every, every)
        self.measured = set(self.steps)
        self.gauged = {t for t in self.steps if every and (t % every == 0 or t == base.steps - 1)}
        every_overlap = base.gauge_overlap_every
        self.gauge_overlap_steps = overlap_gauge_steps(self.steps, base.steps, every_overlap) if gauge else set()
        self.meas = Measurements(COLUMNS, self.M, self.steps, len(self.net.layers), device)
        self.columns = [_as_slice(idx) for idx in self.net.layers]  # the same columns, a view where contiguous
        self.alive = torch.ones(self.M, dtype=torch.bool, device=device)
        self.all_alive = True  # no run has diverged (the masks by `alive` change nothing then)
        self.diverged_step = torch.full((self.M,), -1, dtype=torch.long)
        net, per_sample = self.net, self.task.per_sample_loss
        loss = lambda th, x, y: per_sample(net(th, x), y).mean()
        # loss_m reads row m alone, so one backward pass of sum_m loss_m gives every run its own gradient: for
        # attnid's attention layer bitwise vmap(grad_and_value)'s, through norms and MLPs 1e-16 from it (functorch's
        # transform runs other backward kernels; tests/test_trainer_speed_invariants.py), 10-20% faster
        self._loss = vmap(loss)  # (M,)
        self._out = vmap(lambda th, x: net(th, x, last_only=False))
        self._read = vmap(lambda th, x: net(th, x))

    # one step -----------------------------------------------------------------------------------------
    def step(self, t: int) -> None:
        """Step t: evaluate at theta_t (on eval steps), the gradient on batch t, the update u_t (projected in
        `project` runs; measured on measured steps), theta_{t+1} = theta_t + u_t, the rebalance of `balance`
        runs, and on measured steps the conserved quantities at theta_{t+1} and the window's values."""
        base, last = self.base, t == self.base.steps - 1
        measure = t in self.measured
        if t % base.eval_every == 0 or last:
            loss, accuracy = self.evaluate(self.theta)
            self.meas.set("eval_loss", t, loss)
            self.meas.set("eval_accuracy", t, accuracy)
        grads = self._gradients(t)
        with torch.no_grad():
            self._update(grads, t, measure)
            if (t + 1) % base.rebalance_interval == 0:
                self._rebalance(t)
            if measure:
                self._measure_conserved(t)
                self.meas.close_window(t)
                if not self.all_alive:  # a diverged run's measurements are NaN from its divergence on
                    self.meas.blank(t, ~self.alive, STEP_COLUMNS)

    def _gradients(self, t: int) -> torch.Tensor:
        """Each run's gradient (M, P) at theta_t on training batch t (zero for a diverged run); the loss is
        added to the window, and a run whose loss is not finite is marked diverged at step t."""
        inputs, targets = self.data.train(self.base.batch, min(DATA_AHEAD, self.base.steps - t))
        theta = self.theta.detach().requires_grad_(True)
        with torch.enable_grad():
            loss = self._loss(theta, inputs, targets)
            (grads,) = torch.autograd.grad(loss.sum(), theta)
        loss = loss.detach()
        newly = self.alive & ~torch.isfinite(loss)
        if newly.any():
            self.diverged_step[newly.cpu()] = t
            self.alive &= ~newly
            self.all_alive = False
        self.meas.add_loss(loss, self.alive)
        return grads if self.all_alive else torch.where(self.alive[:, None], grads, 0)

    def _update(self, grads: torch.Tensor, t: int, measure: bool) -> None:
        """theta_{t+1} = theta_t + u_t for every live run, u_t the optimizer's update (attention layers:
        without its tangent part P_T u in `project` runs, measured on `measure` steps)."""
        u = self.optimizer.update(self.theta, grads)
        if measure or self.any_projected:
            for i, idx in enumerate(self.columns):
                u_layer = self._attention_update(i, idx, u[:, idx], t, measure)
                if self.any_projected:
                    u[:, idx] = u_layer
        if t in self.gauged:
            self._measure_model(u, t)
        self.theta = self.theta + u if self.all_alive else torch.where(self.alive[:, None], self.theta + u, self.theta)

    def _measure_model(self, u: torch.Tensor, t: int) -> None:
        """overlap_model[_<source>]: the applied update of every live run against the whole model's orbit at
        theta_t (attnid.training.gauges), the same value on every layer's row."""
        live = self.alive.nonzero()[:, 0]
        for source, values in self.model_gauge.overlaps(self.theta[live], u[live]).items():
            column = "overlap_model" if source == "all" else f"overlap_model_{source}"
            self.meas.ensure(column)
            self.meas.set(column, t, values, rows=live.cpu())

    def _attention_update(self, i: int, idx, u: torch.Tensor, t: int, measure: bool) -> torch.Tensor:
        """The update (M, P_layer) of attention layer i as applied: u - P_T u in `project` runs (norm removed:
        ||P_T u||); on measured steps its norm and overlaps ||P_T u|| / ||u|| (whole, per part, gauge)."""
        theta = self.theta[:, idx]
        if not self.all_alive:
            live = self.alive[:, None]
            theta = torch.where(live, theta, self.theta0[:, idx])  # a diverged run at a finite stand-in
            u = torch.where(live, u, 0)
        rows = slice(None) if measure else self.projected_rows
        proj = stacked_projector(self.spec, theta[rows])  # P_T at theta_t, set up once for this step
        tangent = proj(u[rows])
        if not measure:  # only the projected runs
            u = u.clone()
            u[rows] = u[rows] - tangent
            self.meas.add_removed(rows, i, tangent.norm(dim=-1))
            return u
        projected = self.projected
        if self.any_projected:
            self.meas.add_removed(projected, i, tangent[projected].norm(dim=-1))
            u = torch.where(projected[:, None], u - tangent, u)
            applied = torch.where(projected[:, None], proj(u), tangent)  # P_T of the update as applied
        else:
            applied = tangent
        norm = u.norm(dim=-1)
        self.meas.set("update_norm", t, norm, i)
        self.meas.set("overlap_all", t, applied.norm(dim=-1) / norm, i)
        for part, mask in self.masks.items():
            self.meas.set(f"overlap_{part}", t, applied[:, mask].norm(dim=-1) / u[:, mask].norm(dim=-1), i)
        if t in self.gauge_overlap_steps:
            self.meas.set("overlap_gauge", t, gauge_overlap(self.spec, theta, u), i)
        return u

    def _rebalance(self, t: int) -> None:
        """Move every live `balance` run to the balanced point of each layer's orbit, theta' = balance(theta);
        function change = max|F' - F| / max|F| of the whole output on the probe batch, norm removed =
        ||theta_layer|| - ||theta_layer'|| per layer."""
        members = [i for i in self.balanced if self.alive[i]]
        if not members:
            return
        probe = self.probe_in[[self.balanced.index(j) for j in members]]
        rows = torch.tensor(members, device=self.theta.device)
        before = self._out(self.theta[rows], probe)
        for i, idx in enumerate(self.net.layers):
            old = self.theta[rows][:, idx]
            new = symmetry.balance(self.spec, old)
            self.theta[rows[:, None], idx[None, :]] = new
            self.meas.add_removed(rows, i, old.norm(dim=-1) - new.norm(dim=-1))
        after = self._out(self.theta[rows], probe)
        change = (after - before).flatten(1).abs().amax(1) / before.flatten(1).abs().amax(1)
        self.meas.add_change(rows, change)

    def _measure_conserved(self, t: int) -> None:
        """drift = ||I(theta_{t+1}) - I(theta_0)||_F / scale and imbalance = ||I(theta_{t+1})||_F / scale per part
        (attnid.symmetry.imbalance_reference: scale(theta_0))."""
        for i, idx in enumerate(self.columns):
            current, ref = symmetry.imbalance(self.spec, self.theta[:, idx]), self.references[i]
            for part in symmetry.PARTS:
                now, then = current[part].flatten(1), ref["imbalance"][part].flatten(1)  # (M, n)
                self.meas.set(f"drift_{part}", t, (now - then).norm(dim=1) / ref["scale"][part], i)
                self.meas.set(f"imbalance_{part}", t, now.norm(dim=1) / ref["scale"][part], i)

    # held-out and results ---------------------------------------------------------------------------
    def evaluate(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Held-out loss and accuracy (M,) at theta (NaN accuracy without one), in chunks of EVAL_CHUNK sequences,
        fewer where the runs' outputs would pass EVAL_OUTPUTS, never fewer than `batch` (a sequence's output does
        not depend on the others of its chunk)."""
        loss, correct = [], []
        width = getattr(self.task, "n_tokens", self.spec.d_model) * (1 if self.net.last_only else self.net.seq_len)
        chunk = max(self.base.batch, min(EVAL_CHUNK, EVAL_OUTPUTS // (theta.shape[0] * width)))  # sequences a pass
        per_sample = self.task.per_sample_loss
        with torch.no_grad():
            for start in range(0, self.eval_in.shape[1], chunk):
                x, y = self.eval_in[:, start : start + chunk], self.eval_target[:, start : start + chunk]
                out = self._read(theta, x)
                loss.append(vmap(per_sample)(out, y))
                if self.task.has_accuracy:
                    correct.append(vmap(self.task.correct)(out, y))
        nan = torch.full((theta.shape[0],), math.nan, dtype=torch.float64)
        accuracy = torch.cat(correct, 1).double().mean(1) if correct else nan
        return torch.cat(loss, 1).mean(1).to(torch.float64), accuracy

    def results(self, start: float) -> list[tuple[pd.DataFrame, dict]]:
        """(metrics, summary) of every run, after the last step (held-out loss at theta_S)."""
        final_loss, final_accuracy = self.evaluate(self.theta)
        seconds = (time.perf_counter() - start) / self.M  # each run's share of the batched job
        out = []
        for m in range(self.M):
            metrics = self.meas.table(m)
            out.append((metrics, self._summary(m, metrics, float(final_loss[m]), float(final_accuracy[m]), seconds)))
        return out

    def _summary(self, m: int, metrics: pd.DataFrame, final_loss: float, final_accuracy: float, seconds: float) -> dict:
        """Run m's summary: attnid.training.sweep.summarize_run, the held-out numbers after the last step
        (NaN for a diverged run), ||I(theta_0)|| / scale averaged over the layers, sizes and time."""
        dead, L = int(self.diverged_step[m]) >= 0, len(self.net.layers)
        initial = {
            part: float(sum(ref["imbalance"][part][m].norm() / ref["scale"][part][m] for ref in self.references) / L)
            for part in symmetry.PARTS
        }
        summary = summarize_run(metrics, self.base.steps)
        summary.update({f"chance_{k}": v for k, v in chance_levels(self.spec).items()})
        summary.update(
            initial_imbalance_query_key=initial["query_key"],
            initial_imbalance_value_output=initial["value_output"],
            final_eval_loss=math.nan if dead else final_loss,
            final_eval_accuracy=final_accuracy if self.task.has_accuracy and not dead else math.nan,
            loss_floor=float(self.floor[m]),
            plateau_change=math.nan if dead else plateau_change(metrics, final_loss, self.base.steps),
            diverged_step=int(self.diverged_step[m]),
            steps=self.base.steps,
            parameters=self.net.size,
            parameters_per_layer=Layout(self.spec).size,
            attention_layers=L,
            seconds=seconds,
            config=self.cfgs[m].to_dict(),
        )
        return summary


def _as_slice(idx: torch.Tensor) -> torch.Tensor | slice:
    """idx (n,) as the slice it spans when it is one contiguous increasing run (indexing by it then copies
    nothing), else idx."""
    first = int(idx[0]) if idx.numel() else 0
    if idx.numel() and torch.equal(idx.cpu(), torch.arange(first, first + idx.numel())):
        return slice(first, first + idx.numel())
    return idx


def overlap_gauge_steps(measured: list[int], steps: int, every: int) -> set[int]:
    """The measured steps that take the gauge-invariant overlap: multiples of `every` and the last step."""
    return {t for t in measured if t % every == 0 or t == steps - 1}
