"""One training run with torch.optim, with the symmetry geometry of every attention layer measured at every step.

The reference implementation: one model, torch.optim, one process per run. The sweep trains the
same runs batched (attnid.training.batched), and the tests check that both give the same numbers.

Usage:

    from attnid.spec import AttentionSpec
    from attnid.training.loop import train
    from attnid.training.runs import RunConfig
    metrics, summary = train(RunConfig(attention=AttentionSpec(d_model=16, n_heads=4), optimizer="adam", lr=1e-2))

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
global seed is set with torch.manual_seed, and torch.use_deterministic_algorithms is on during the
run, so one RunConfig gives bit-identical metrics on one machine (wall-clock time is reported only
in the summary).
"""

from __future__ import annotations

import math
import os
import sys
import time

import pandas as pd
import torch
from tqdm import tqdm

from .. import symmetry
from ..device import resolve_device
from .models import Student, TinyTransformer
from .runs import METRIC_COLUMNS, RunConfig
from .sweep import summarize
from .tasks import STREAM_MODEL, STREAM_PROBE, AssociativeRecall, TeacherStudent, generator

DTYPES = {"float64": torch.float64, "float32": torch.float32}
PARTS = ("all", *symmetry.PARTS)  # overlap of the whole update and of each part


class RunDiverged(FloatingPointError):
    """The training loss became NaN or infinite; the message names the run and the step."""


def build(cfg: RunConfig):
    """(task, model) of a run, both on cfg.device in cfg.dtype, initialised from cfg.seed.

    The model is drawn in float64 and rounded to cfg.dtype, so a float32 run starts where the float64
    run starts, rounded (with the tasks' data drawn the same way, the two dtypes are paired)."""
    dtype = DTYPES[cfg.dtype]
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
    if cfg.optimizer == "adam_shared":
        raise ValueError("optimizer 'adam_shared' has no torch.optim form; train it with attnid.training.batched")
    params = list(params)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=0.0, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "sgd_momentum":
        return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), weight_decay=cfg.weight_decay)
    return torch.optim.AdamW(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), weight_decay=cfg.weight_decay)


class _Deterministic:
    """Turn on torch.use_deterministic_algorithms for the run and restore the previous setting."""

    def __init__(self, device: str):
        self.device = device

    def __enter__(self):
        if self.device.startswith("cuda"):
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # required by deterministic cuBLAS
        self.before = (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        )
        torch.use_deterministic_algorithms(True, warn_only=True)

    def __exit__(self, *exc):
        torch.use_deterministic_algorithms(self.before[0], warn_only=self.before[1])


def _evaluate(task, model, batch) -> tuple[float, float]:
    with torch.no_grad():
        out = model(batch.inputs)
        return task.loss(out, batch).item(), task.accuracy(out, batch)


def _max_rel_change(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    return (after - before).abs().max() / before.abs().max()


def train(cfg: RunConfig, progress: bool = True) -> tuple[pd.DataFrame, dict]:
    """Run `cfg`; return (metrics, summary).

    metrics: one row per (step, attention layer), columns METRIC_COLUMNS (see the module docstring).
    summary: final and mean values of the run (see `summarize`), its config, and its wall time.
    Raises RunDiverged (naming the run and step) when the training loss is not finite.
    """
    resolve_device(cfg.device)  # a clear DeviceError when the config asks for CUDA on a machine without it
    with _Deterministic(cfg.device):
        return _train(cfg, progress)


def _train(cfg: RunConfig, progress: bool) -> tuple[pd.DataFrame, dict]:
    start = time.perf_counter()
    spec = cfg.attention
    task, model = build(cfg)
    layers = model.attention_layers()
    L, S = len(layers), cfg.steps
    optimizer = make_optimizer(cfg, model.parameters())
    eval_data = task.fixed_batch(cfg.eval_batch)
    probe = task.fixed_batch(cfg.probe_batch, STREAM_PROBE) if cfg.rebalance == "balance" else None

    chance = {part: symmetry.chance_overlap(spec, None if part == "all" else part) for part in PARTS}
    reference = [
        symmetry.imbalance_reference(spec, layer.theta.detach()) for layer in layers
    ]  # conserved quantities at theta_0
    nan = float("nan")
    # Per-(step, layer) measurements, kept on the device (no host sync in the loop) and fetched at the end.
    rows = {c: torch.full((S, L), nan, dtype=torch.float64, device=cfg.device) for c in METRIC_COLUMNS[2:]}
    for part, value in chance.items():
        rows[f"chance_{part}"].fill_(value)
    rows["lr"].fill_(cfg.lr)

    bar = tqdm(
        total=S, desc=cfg.name, file=sys.stderr, disable=not progress, mininterval=2.0, dynamic_ncols=False, ncols=100
    )
    for t in range(S):
        measure = t % cfg.metrics_every == 0 or t == S - 1
        if t % cfg.eval_every == 0 or t == S - 1:
            eval_loss, eval_acc = _evaluate(task, model, eval_data)
            rows["eval_loss"][t] = eval_loss
            rows["eval_accuracy"][t] = eval_acc
            bar.set_postfix(eval_loss=f"{eval_loss:.3g}", refresh=False)

        before = [layer.theta.detach().clone() for layer in layers]  # theta_t, (P,) each
        batch = task.train_batch(cfg.batch)
        loss = task.loss(model(batch.inputs), batch)
        if not torch.isfinite(loss):
            bar.close()
            raise RunDiverged(f"run {cfg.name} diverged: training loss is {loss.item()} at step {t}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        rows["loss"][t] = loss.detach()

        with torch.no_grad():
            for i, layer in enumerate(layers):
                if not (measure or cfg.rebalance == "project"):
                    continue
                projector = symmetry.Projector(spec, before[i])  # P_T at theta_t, set up once for this step
                u = layer.theta - before[i]  # (P,) the optimizer's update
                if cfg.rebalance == "project":
                    tangent = projector(u)  # P_T u
                    layer.theta.copy_(before[i] + (u - tangent))
                    rows["rebalance_norm_removed"][t, i] = tangent.norm()
                    u = layer.theta - before[i]  # the update actually applied (after rounding)
                if measure:
                    rows["update_norm"][t, i] = u.norm()
                    for part, value in symmetry.overlap(spec, before[i], u, projector=projector).items():
                        rows[f"overlap_{part}"][t, i] = value
            if cfg.rebalance == "balance" and (t + 1) % cfg.rebalance_interval == 0:
                for i, layer in enumerate(layers):
                    out_before = model(probe.inputs)
                    norm_before = layer.theta.norm()
                    layer.theta.copy_(symmetry.balance(spec, layer.theta))
                    rows["rebalance_function_change"][t, i] = _max_rel_change(out_before, model(probe.inputs))
                    rows["rebalance_norm_removed"][t, i] = norm_before - layer.theta.norm()
            if measure:
                for i, layer in enumerate(layers):
                    for part, value in symmetry.imbalance_drift(
                        spec, None, layer.theta, reference=reference[i]
                    ).items():
                        rows[f"drift_{part}"][t, i] = value
        bar.update()
    bar.close()

    final_eval_loss, final_eval_accuracy = _evaluate(task, model, eval_data)  # at theta_S, after the last update
    if not math.isfinite(final_eval_loss):
        raise RunDiverged(f"run {cfg.name} diverged: held-out loss is {final_eval_loss} after the last step {S - 1}")
    columns = {c: v.cpu().reshape(-1).numpy() for c, v in rows.items()}  # row-major: (step, layer)
    metrics = pd.DataFrame(
        {"layer": torch.arange(L).repeat(S).numpy(), "step": torch.arange(S).repeat_interleave(L).numpy(), **columns}
    )[list(METRIC_COLUMNS)]
    summary = summarize(metrics)
    summary.update(
        final_eval_loss=final_eval_loss,
        final_eval_accuracy=final_eval_accuracy if task.has_accuracy else nan,
        steps=S,
        parameters_per_layer=int(layers[0].theta.numel()),
        attention_layers=L,
        seconds=time.perf_counter() - start,
        config=cfg.to_dict(),
    )
    return metrics, summary
