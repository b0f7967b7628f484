"""A test helper, not a trainer of the package: one training run with torch.optim, the independent reference
the batched trainer (attnid.training.batched, the package's one trainer) is checked against.

tests/test_batched.py trains runs batched and each run alone here, and asks for the same numbers: the stacked
optimizer (attnid.training.optim) against torch.optim, the stacked measurements against the single-point
symmetry tools (attnid.symmetry.overlap, .imbalance_drift), and a run's independence from the runs it is
batched with.

What a step t does, for the run's flat parameters theta (P,) (attnid.training.nets.Net) and each attention
layer's layout theta_l = theta[index_l] (attnid.layer.layout):

    loss_t        training loss at theta_t on batch t (before the update)
    u_t           = theta_{t+1} - theta_t, the update actually applied (after the optimizer step and, in
                  `project` mode, after removing each layer's tangent part P_T u)
    overlap_*     ||P_T u_t|| / ||u_t|| with T the unidentified (orbit-tangent) subspace of the layer at
                  theta_t, for all of T and for its query-key and value-output parts (attnid.symmetry.overlap)
    drift_*       change of the conserved quantities (W_Q^T W_Q - W_K^T W_K, W_V^T W_V - W_O W_O^T)
                  from theta_0 to theta_{t+1} (after any rebalancing at step t), as returned by
                  attnid.symmetry.imbalance_drift
    rebalance     `balance` mode, at steps with (t+1) % rebalance_interval == 0: every layer is moved
                  to the balanced point of its orbit, theta' = balance(theta_{t+1}); the function change
                  max|F'(probe) - F(probe)| / max|F(probe)| of the model's output F on a fixed probe batch
                  (float rounding) and the norm removed ||theta_l|| - ||theta_l'|| per layer (the balanced
                  point is the smallest on the orbit). `project` mode, every step: the norm removed ||P_T u||.
    eval_*        loss (and accuracy for recall) on a fixed held-out batch at theta_t, every
                  `eval_every` steps and at the last step.

What is kept, on which steps (measured steps only: attnid.training.metrics), is the same as in the
batched trainer; here every measured step takes the gauge-invariant overlap.

Why the geometry is honest: a loss that depends on theta only through the model's function is
invariant under each layer's symmetry group, so its gradient is orthogonal to T. Plain SGD,
u = -lr grad, has overlap zero up to float rounding; momentum (an average of gradients taken at
earlier points, whose tangent spaces differ), Adam (a diagonal preconditioner that does not respect
the orbit), and weight decay (-lr wd theta, whose tangent component is the imbalance) do not.

dtype: float64 by default, so float rounding is ~1e-16 and a zero overlap is visible as such; float32
is allowed (`dtype="float32"`), where the same zero reads ~1e-6 because theta_{t+1} - theta_t loses
digits to the size of theta (the checks' thresholds are multiples of the dtype's eps).

Determinism: every random draw comes from generators seeded by the run seed (attnid.training.tasks), the
global seed is set with torch.manual_seed, and the run trains in deterministic mode
(attnid.training.determinism), so one RunConfig gives bit-identical metrics on one machine
(wall-clock time is reported only in the summary).
"""

from __future__ import annotations

import math
import time

import pandas as pd
import torch
from tqdm import tqdm

from attnid import symmetry
from attnid.device import resolve_device
from attnid.layer.layout import Layout
from attnid.training.determinism import deterministic
from attnid.training.metrics import Measurements, chance_levels
from attnid.training.nets import build
from attnid.training.overlap import gauge_overlap
from attnid.training.runs import METRIC_COLUMNS, RunConfig, measured_steps
from attnid.training.sweep import plateau_change, summarize_run
from attnid.training.tasks import STREAM_PROBE

COLUMNS = METRIC_COLUMNS[2:]


class RunDiverged(FloatingPointError):
    """The training loss became NaN or infinite; the message names the run and the step."""


def make_optimizer(cfg: RunConfig, params) -> torch.optim.Optimizer:
    """The torch.optim form of cfg.algorithm (attnid.training.optim gives the same updates, stacked)."""
    if cfg.algorithm == "adam_shared":
        raise ValueError("algorithm 'adam_shared' has no torch.optim form; train it with attnid.training.batched")
    params = list(params)
    if cfg.algorithm == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=0.0, weight_decay=cfg.weight_decay)
    if cfg.algorithm == "sgd_momentum":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    if cfg.algorithm == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), weight_decay=cfg.weight_decay)


def train(cfg: RunConfig, progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Run `cfg`; return (metrics, summary).

    metrics: one row per (measured step, attention layer), columns METRIC_COLUMNS (attnid.training.metrics).
    summary: final and mean values of the run (attnid.training.sweep.summarize_run), its config and wall time.
    Raises RunDiverged (naming the run and step) when the training loss is not finite.
    """
    resolve_device(cfg.device)  # a clear DeviceError when the config asks for CUDA on a machine without it
    with deterministic(cfg.device):
        start = time.perf_counter()
        run = _Run(cfg)
        with tqdm(total=cfg.steps, desc=cfg.name, disable=not progress, mininterval=2.0, ncols=100) as bar:
            for t in range(cfg.steps):
                run.step(t, bar)
                bar.update()
        return run.result(start)


class _Run:
    """One run's parameters (leaf tensors, the optimizer's), its measurements, one method per part of a step."""

    def __init__(self, cfg: RunConfig):
        self.cfg, self.spec = cfg, cfg.attention
        self.task, self.net, theta0 = build(cfg)
        self.leaves = [t.clone().requires_grad_(True) for t in self.net.params(theta0).values()]
        self.optimizer = make_optimizer(cfg, self.leaves)
        self.eval_data = self.task.fixed_batch(cfg.eval_batch)
        self.probe = self.task.fixed_batch(cfg.probe_batch, STREAM_PROBE) if cfg.rebalance == "balance" else None
        self.reference = [symmetry.imbalance_reference(self.spec, theta0[idx]) for idx in self.net.layers]
        self.steps = measured_steps(cfg.steps, cfg.metrics_every, cfg.eval_every)
        self.measured = set(self.steps)
        self.meas = Measurements(COLUMNS, 1, self.steps, len(self.net.layers), cfg.device)
        self.one = torch.ones(1, dtype=torch.bool, device=cfg.device)

    def theta(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1) for p in self.leaves])

    def _set(self, theta: torch.Tensor) -> None:
        with torch.no_grad():
            for p, new in zip(self.leaves, torch.split(theta, self.net.sizes)):
                p.copy_(new.view(p.shape))

    def _forward(self, inputs, last_only=None) -> torch.Tensor:
        params = dict(zip(self.net.names, self.leaves))
        theta = torch.cat([p.reshape(-1) for p in params.values()])
        return self.net(theta, inputs, last_only)

    def _evaluate(self) -> tuple[float, float]:
        with torch.no_grad():
            out = self._forward(self.eval_data.inputs)
            return self.task.loss(out, self.eval_data).item(), self.task.accuracy(out, self.eval_data)

    def step(self, t: int, bar) -> None:
        """Step t: evaluate at theta_t (every eval_every steps and at the last), the optimizer step on batch t,
        the applied update u_t of every layer (projected in `project` mode) with its measurements, the
        rebalance in `balance` mode, the conserved quantities at theta_{t+1}."""
        cfg, last = self.cfg, t == self.cfg.steps - 1
        measure = t in self.measured
        if t % cfg.eval_every == 0 or last:
            loss, accuracy = self._evaluate()
            self.meas.set("eval_loss", t, torch.tensor([loss], dtype=torch.float64))
            self.meas.set("eval_accuracy", t, torch.tensor([accuracy], dtype=torch.float64))
            bar.set_postfix(eval_loss=f"{loss:.3g}", refresh=False)
        before = self.theta()  # theta_t
        self.meas.add_loss(self._optimizer_step(t)[None], self.one)
        with torch.no_grad():
            if measure or cfg.rebalance == "project":
                self._updates(before, t, measure)
            if cfg.rebalance == "balance" and (t + 1) % cfg.rebalance_interval == 0:
                self._rebalance()
            if measure:
                theta = self.theta()
                for i, idx in enumerate(self.net.layers):
                    drift = symmetry.imbalance_drift(self.spec, None, theta[idx], reference=self.reference[i])
                    size = symmetry.imbalance(self.spec, theta[idx])
                    for part, value in drift.items():
                        self.meas.set(f"drift_{part}", t, torch.tensor([value], dtype=torch.float64), i)
                        scale = self.reference[i]["scale"][part]
                        self.meas.set(f"imbalance_{part}", t, (size[part].norm() / scale)[None], i)
                self.meas.close_window(t)

    def _optimizer_step(self, t: int) -> torch.Tensor:
        """The loss at theta_t on training batch t, then one torch.optim step; RunDiverged if it is not finite."""
        batch = self.task.train_batch(self.cfg.batch)
        loss = self.task.loss(self._forward(batch.inputs), batch)
        if not torch.isfinite(loss):
            raise RunDiverged(f"run {self.cfg.name} diverged: training loss is {loss.item()} at step {t}")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def _updates(self, before: torch.Tensor, t: int, measure: bool) -> None:
        """Per layer u = theta_{t+1} - theta_t; `project` mode applies u - P_T u instead (norm removed
        ||P_T u||); on `measure` steps the applied update's norm and overlaps ||P_T u|| / ||u||."""
        after = self.theta()
        for i, idx in enumerate(self.net.layers):
            projector = symmetry.Projector(self.spec, before[idx])  # P_T at theta_t, set up once for this step
            u = after[idx] - before[idx]  # the optimizer's update of the layer
            if self.cfg.rebalance == "project":
                tangent = projector(u)
                after[idx] = before[idx] + (u - tangent)
                self.meas.add_removed(slice(None), i, tangent.norm()[None])
                u = after[idx] - before[idx]  # the update actually applied (after rounding)
            if measure:
                self.meas.set("update_norm", t, u.norm()[None], i)
                for key, value in symmetry.overlap(self.spec, before[idx], u, projector=projector).items():
                    self.meas.set(f"overlap_{key}", t, torch.tensor([value], dtype=torch.float64), i)
                self.meas.set("overlap_gauge", t, gauge_overlap(self.spec, before[idx][None], u[None]), i)
        if self.cfg.rebalance == "project":
            self._set(after)

    def _rebalance(self) -> None:
        """Every layer to the balanced point of its orbit, theta' = balance(theta); the function change
        max|F' - F| / max|F| of the model's output on the probe batch, the norm removed per layer."""
        out_before = self._forward(self.probe.inputs, last_only=False)
        theta = self.theta()
        for i, idx in enumerate(self.net.layers):
            new = symmetry.balance(self.spec, theta[idx])
            self.meas.add_removed(slice(None), i, (theta[idx].norm() - new.norm())[None])
            theta[idx] = new
        self._set(theta)
        out_after = self._forward(self.probe.inputs, last_only=False)
        change = (out_after - out_before).abs().max() / out_before.abs().max()
        self.meas.add_change(slice(None), change[None])

    def result(self, start: float) -> tuple[pd.DataFrame, dict]:
        """(metrics, summary) after the last step, with the held-out loss at theta_S."""
        cfg, S = self.cfg, self.cfg.steps
        final_eval_loss, final_eval_accuracy = self._evaluate()
        if not math.isfinite(final_eval_loss):
            raise RunDiverged(f"run {cfg.name} diverged: held-out loss is {final_eval_loss} after the last step {S-1}")
        metrics = self.meas.table(0)
        summary = summarize_run(metrics, S)
        summary.update({f"chance_{k}": v for k, v in chance_levels(self.spec).items()})
        summary.update(
            final_eval_loss=final_eval_loss,
            final_eval_accuracy=final_eval_accuracy if self.task.has_accuracy else math.nan,
            loss_floor=getattr(self.task, "loss_floor", math.nan),
            plateau_change=plateau_change(metrics, final_eval_loss, S),
            steps=S,
            parameters=self.net.size,
            parameters_per_layer=Layout(self.spec).size,
            attention_layers=len(self.net.layers),
            seconds=time.perf_counter() - start,
            config=cfg.to_dict(),
        )
        return metrics, summary
