r"""Training along the quotient: remove each update's tangent part, and balance now and then.

    opt = GaugeProjected(torch.optim.AdamW(model.parameters(), lr=1e-3), gauge, model)
    loss.backward(); opt.step()           # the inner step, then u - P u applied instead of u
    opt.overlaps[-1]                      # ||P u|| / ||u|| (and per source) of the step just taken

    trainer = Trainer(..., callbacks=[GaugeCallback(gauge, balance_every=100)])

Both snapshot the parameters before the inner optimizer's step, take the update u = theta_new - theta_old,
project it at theta_old (the gauge's point: `attnid.gauge.Gauge.project`) and subtract P u, then re-read the
point (`refresh_every` steps; 1 keeps every projection exact, more reuse a factorisation at a point the model
has left). A plain gradient step has overlap at rounding (the loss is invariant, so its gradient is
orthogonal to the orbit); momentum, Adam's preconditioning, weight decay and finite steps are what move
along the orbit. `balance_every` moves the weights to the balanced point of their orbit (same function) every
so many steps (`BalanceHook` for a plain loop).
"""

from __future__ import annotations

import torch

from .toolkit import Gauge


def remove_tangent(gauge: Gauge, model: torch.nn.Module, before: dict) -> dict:
    """Replace the update theta - before of `model` (in place) by its part off the orbit; returns the overlaps."""
    params = dict(model.named_parameters())
    update = {n: p.detach() - before[n] for n, p in params.items()}
    tangent, overlaps = gauge.split(update)
    with torch.no_grad():
        for n, p in params.items():
            p.sub_(tangent[n])
    return overlaps


def snapshot(model: torch.nn.Module) -> dict:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


class GaugeProjected(torch.optim.Optimizer):
    """Any torch optimizer with the tangent part of each update removed (module docstring). It shares the
    inner optimizer's param_groups and state, so learning-rate schedulers and checkpoints see the inner one."""

    def __init__(self, optimizer: torch.optim.Optimizer, gauge: Gauge, model: torch.nn.Module, refresh_every: int = 1):
        # no Optimizer.__init__: the parameters, groups and state are the inner optimizer's
        self.optimizer, self.gauge, self.model = optimizer, gauge, model
        self.refresh_every, self.steps = refresh_every, 0
        self.overlaps: list[dict] = []

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @param_groups.setter
    def param_groups(self, value):
        self.optimizer.param_groups = value

    @property
    def state(self):
        return self.optimizer.state

    @property
    def defaults(self):
        return self.optimizer.defaults

    def zero_grad(self, set_to_none: bool = True):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict):
        self.optimizer.load_state_dict(state_dict)

    def add_param_group(self, group):
        self.optimizer.add_param_group(group)

    def step(self, closure=None):
        before = snapshot(self.model)
        loss = self.optimizer.step(closure)
        self.overlaps.append(remove_tangent(self.gauge, self.model, before))
        self.steps += 1
        if self.steps % self.refresh_every == 0:
            self.gauge.refresh(self.model)
        return loss

    def __repr__(self):
        return f"GaugeProjected({self.optimizer!r}, dim {self.gauge.dim})"


class BalanceHook:
    """hook(step): balance the model's weights every `every` steps (a plain training loop)."""

    def __init__(self, gauge: Gauge, model: torch.nn.Module, every: int):
        self.gauge, self.model, self.every = gauge, model, every
        self.reports: list[dict] = []

    def __call__(self, step: int) -> None:
        if self.every and step % self.every == 0:
            self.gauge.refresh(self.model)
            self.reports.append(self.gauge.balance_(self.model))


try:  # the Trainer callback, where transformers is installed
    from transformers import TrainerCallback as _Callback
except ImportError:  # pragma: no cover
    _Callback = object


class GaugeCallback(_Callback):
    """A `transformers` TrainerCallback: removes the tangent part of every optimizer step (project=True) and
    balances every `balance_every` steps; `overlaps` holds each step's overlaps."""

    def __init__(self, gauge: Gauge, project: bool = True, balance_every: int = 0, refresh_every: int = 1):
        self.gauge, self.project, self.balance_every, self.refresh_every = gauge, project, balance_every, refresh_every
        self.overlaps: list[dict] = []
        self.reports: list[dict] = []
        self._before = None

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if self.project:
            self._before = snapshot(model)

    def on_optimizer_step(self, args, state, control, model=None, **kwargs):
        if self.project and self._before is not None:
            self.overlaps.append(remove_tangent(self.gauge, model, self._before))
            self._before = None
            if (len(self.overlaps) % self.refresh_every) == 0:
                self.gauge.refresh(model)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.balance_every and state.global_step % self.balance_every == 0:
            self.gauge.refresh(model)
            self.reports.append(self.gauge.balance_(model))
