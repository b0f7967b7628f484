"""One training run with torch.optim, with the symmetry geometry of every attention layer measured at every step.

The reference implementation: one model, torch.optim, one process per run. The sweep trains the
same runs batched (attnid.training.batched), and the tests check that both give the same numbers.

Usage:

    from attnid.spec import AttentionSpec
    from attnid.training.loop import train
    from attnid.training.runs import RunConfig
    metrics, summary = train(RunConfig(attention=AttentionSpec(d_model=16, n_heads=4), algorithm="adam", lr=1e-2))

What a step t records, per attention layer with flat parameters theta (P,) (attnid.layout):

    loss_t        training loss at theta_t on batch t (before the update)
    u_t           = theta_{t+1} - theta_t, the update actually applied to the layer (after the
                  optimizer step and, in `project` mode, after removing its tangent part)
    update_norm   ||u_t||
    overlap_*     ||P_T u_t|| / ||u_t|| with T the unidentified (orbit-tangent) subspace at theta_t,
                  for all of T and for its query-key and value-output parts (attnid.symmetry.overlap)
    chance_*      sqrt(dim T / #coordinates): the expected overlap of a random direction
    drift_*       change of the conserved quantities (W_Q^T W_Q - W_K^T W_K, W_V^T W_V - W_O W_O^T)
                  from theta_0 to theta_{t+1} (after any rebalancing at step t), as returned by
                  attnid.symmetry.imbalance_drift
    rebalance_*   `balance` mode, at steps with (t+1) % rebalance_interval == 0: the layer is moved
                  to the balanced point of its orbit, theta' = balance(theta_{t+1});
                  function_change = max|F'(probe) - F(probe)| / max|F(probe)| for the whole model's
                  output F on a fixed probe batch (should be float rounding), norm_removed =
                  ||theta_{t+1}|| - ||theta'|| (the balanced point is the smallest on the orbit).
                  `project` mode, every step: norm_removed = ||P_T u|| (the part taken out of the
                  optimizer's update); function_change is NaN (projection is not a symmetry move).
    eval_*        loss (and accuracy for recall) on a fixed held-out batch at theta_t, every
                  `eval_every` steps and at the last step; NaN elsewhere.

Why the geometry is honest: a loss that depends on theta only through the model's function is
invariant under each layer's symmetry group, so its gradient is orthogonal to T. Plain SGD,
u = -lr grad, has overlap zero up to float rounding; momentum (an average of gradients taken at
earlier points, whose tangent spaces differ), Adam (a diagonal preconditioner that does not respect
the orbit), and weight decay (-lr wd theta, whose tangent component is the imbalance) do not.

dtype: float64 by default for both tasks, so float rounding is ~1e-13 and a zero overlap is
visible as such; float32 is allowed (`dtype="float32"`, e.g. on a GPU), where the same zero reads
~1e-5 because theta_{t+1} - theta_t loses digits to the size of theta.

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

from .. import symmetry
from ..device import resolve_device
from .determinism import deterministic
from .metrics import measurement_tensors, metrics_table
from .models import Student, TinyTransformer
from .runs import METRIC_COLUMNS, RunConfig
from .sweep import summarize_run
from .tasks import STREAM_MODEL, STREAM_PROBE, AssociativeRecall, TeacherStudent, generator

TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32}  # RunConfig.dtype -> torch dtype


class RunDiverged(FloatingPointError):
    """The training loss became NaN or infinite; the message names the run and the step."""


def build(cfg: RunConfig):
    """(task, model) of a run, both on cfg.device in cfg.dtype, initialised from cfg.seed.

    The model is drawn in float64 and rounded to cfg.dtype, so a float32 run starts where the float64
    run starts, rounded (with the tasks' data drawn the same way, the two dtypes are paired)."""
    dtype = TORCH_DTYPES[cfg.dtype]
    spec = cfg.attention
    torch.manual_seed(cfg.seed)
    if cfg.task == "teacher_student":
        task = TeacherStudent(spec, cfg.seq_len, cfg.seed, dtype=dtype, device=cfg.device)
        model = Student(spec, generator(cfg.seed, STREAM_MODEL), dtype=torch.float64)
    else:
        task = AssociativeRecall(cfg.vocab, cfg.pairs, cfg.seed, device=cfg.device)
        model = TinyTransformer(
            spec, task.n_tokens, task.seq_len, generator(cfg.seed, STREAM_MODEL), n_layers=cfg.n_layers,
            norm=cfg.norm, mlp_ratio=cfg.mlp_ratio, dtype=torch.float64,
        )  # fmt: skip
    return task, model.to(dtype=dtype, device=cfg.device)


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

    metrics: one row per (step, attention layer), columns METRIC_COLUMNS (see the module docstring).
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
    """One run's model, optimizer and measurements {column: (S, L)}, and one method per part of a step."""

    def __init__(self, cfg: RunConfig):
        self.cfg, self.spec = cfg, cfg.attention
        self.task, self.model = build(cfg)
        self.layers = self.model.attention_layers()
        self.optimizer = make_optimizer(cfg, self.model.parameters())
        self.eval_data = self.task.fixed_batch(cfg.eval_batch)
        self.probe = self.task.fixed_batch(cfg.probe_batch, STREAM_PROBE) if cfg.rebalance == "balance" else None
        theta0 = [layer.theta.detach() for layer in self.layers]
        self.reference = [symmetry.imbalance_reference(self.spec, theta) for theta in theta0]  # conserved quantities
        shape = (cfg.steps, len(self.layers))
        self.rows = measurement_tensors(METRIC_COLUMNS[2:], shape, self.spec, cfg.lr, cfg.device)

    def _evaluate(self) -> tuple[float, float]:
        with torch.no_grad():
            out = self.model(self.eval_data.inputs)
            return self.task.loss(out, self.eval_data).item(), self.task.accuracy(out, self.eval_data)

    def step(self, t: int, bar) -> None:
        """Step t: evaluate at theta_t (every eval_every steps and at the last), the optimizer step on batch t,
        the applied update u_t of every layer (projected in `project` mode) with its measurements, the
        rebalance in `balance` mode, the conserved quantities at theta_{t+1}."""
        cfg, rows, last = self.cfg, self.rows, t == self.cfg.steps - 1
        measure = t % cfg.metrics_every == 0 or last
        if t % cfg.eval_every == 0 or last:
            loss, accuracy = self._evaluate()
            rows["eval_loss"][t], rows["eval_accuracy"][t] = loss, accuracy
            bar.set_postfix(eval_loss=f"{loss:.3g}", refresh=False)
        before = [layer.theta.detach().clone() for layer in self.layers]  # theta_t, (P,) each
        rows["loss"][t] = self._optimizer_step(t)
        with torch.no_grad():
            if measure or cfg.rebalance == "project":
                self._updates(before, t, measure)
            if cfg.rebalance == "balance" and (t + 1) % cfg.rebalance_interval == 0:
                self._rebalance(t)
            if measure:
                for i, layer in enumerate(self.layers):
                    drift = symmetry.imbalance_drift(self.spec, None, layer.theta, reference=self.reference[i])
                    for part, value in drift.items():
                        rows[f"drift_{part}"][t, i] = value

    def _optimizer_step(self, t: int) -> torch.Tensor:
        """The loss at theta_t on training batch t, then one torch.optim step; RunDiverged if it is not finite."""
        batch = self.task.train_batch(self.cfg.batch)
        loss = self.task.loss(self.model(batch.inputs), batch)
        if not torch.isfinite(loss):
            raise RunDiverged(f"run {self.cfg.name} diverged: training loss is {loss.item()} at step {t}")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def _updates(self, before: list[torch.Tensor], t: int, measure: bool) -> None:
        """Per layer u = theta_{t+1} - theta_t; `project` mode applies u - P_T u instead (norm_removed =
        ||P_T u||); on `measure` steps the applied update's norm and overlaps ||P_T u|| / ||u||."""
        rows = self.rows
        for i, layer in enumerate(self.layers):
            projector = symmetry.Projector(self.spec, before[i])  # P_T at theta_t, set up once for this step
            u = layer.theta - before[i]  # (P,) the optimizer's update
            if self.cfg.rebalance == "project":
                tangent = projector(u)  # P_T u
                layer.theta.copy_(before[i] + (u - tangent))
                rows["rebalance_norm_removed"][t, i] = tangent.norm()
                u = layer.theta - before[i]  # the update actually applied (after rounding)
            if measure:
                rows["update_norm"][t, i] = u.norm()
                for key, value in symmetry.overlap(self.spec, before[i], u, projector=projector).items():
                    rows[f"overlap_{key}"][t, i] = value

    def _rebalance(self, t: int) -> None:
        """Each layer in turn to the balanced point of its orbit, theta' = balance(theta); function_change =
        max|F' - F| / max|F| of the model's output on the probe batch, norm_removed = ||theta|| - ||theta'||."""
        for i, layer in enumerate(self.layers):
            out_before = self.model(self.probe.inputs)
            norm_before = layer.theta.norm()
            layer.theta.copy_(symmetry.balance(self.spec, layer.theta))
            out_after = self.model(self.probe.inputs)
            self.rows["rebalance_function_change"][t, i] = (out_after - out_before).abs().max() / out_before.abs().max()
            self.rows["rebalance_norm_removed"][t, i] = norm_before - layer.theta.norm()

    def result(self, start: float) -> tuple[pd.DataFrame, dict]:
        """(metrics, summary) after the last step, with the held-out loss at theta_S."""
        cfg, S = self.cfg, self.cfg.steps
        final_eval_loss, final_eval_accuracy = self._evaluate()
        if not math.isfinite(final_eval_loss):
            raise RunDiverged(f"run {cfg.name} diverged: held-out loss is {final_eval_loss} after the last step {S-1}")
        metrics = metrics_table(self.rows, METRIC_COLUMNS[2:])
        summary = summarize_run(metrics)
        summary.update(
            final_eval_loss=final_eval_loss,
            final_eval_accuracy=final_eval_accuracy if self.task.has_accuracy else math.nan,
            steps=S,
            parameters_per_layer=int(self.layers[0].theta.numel()),
            attention_layers=len(self.layers),
            seconds=time.perf_counter() - start,
            config=cfg.to_dict(),
        )
        return metrics, summary
