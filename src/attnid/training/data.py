"""The data of a batch of runs: every run's task, deduplicated by seed, drawn as stacked (M, ...) batches.

Runs with one seed share their data stream (attnid.training.tasks: every draw comes from generators seeded by
the run seed), so a job draws each seed's batches once and gives every run its seed's: the batched trainer
(attnid.training.batched) sees, per run, exactly the batches the run draws alone.
"""

from __future__ import annotations

import torch
from torch.func import vmap

from .tasks import TeacherStudent


class Data:
    """The runs' tasks, deduplicated by seed (runs with one seed share their data stream).

    Teacher-student targets are computed for all seeds at once (the teachers stacked, vmapped), with each
    seed's label noise added, for the next `ahead` training batches at once (each seed's stream drawn in its
    own order, so every batch is the one it draws alone; the teacher's outputs of a sequence do not depend on
    the sequences computed with it).
    """

    def __init__(self, tasks: list, seeds: list[int]):
        first = {s: i for i, s in reversed(list(enumerate(seeds)))}
        self.unique = sorted(first.values())  # one task per distinct seed
        self.index = torch.tensor([self.unique.index(first[s]) for s in seeds])  # run -> its seed's slot
        self.tasks = [tasks[i] for i in self.unique]
        self.regression = isinstance(self.tasks[0], TeacherStudent)
        if self.regression:
            from ..layer.forward import attention

            spec, layout = self.tasks[0].spec, self.tasks[0].teacher.layout
            self.teachers = torch.stack([t.teacher.theta.detach() for t in self.tasks])  # (U, P)
            self.noise = torch.tensor([t.noise_std for t in self.tasks], dtype=self.teachers.dtype)
            self.teacher = vmap(lambda theta, x: attention(theta, x, spec, layout))
        self._queue = []  # teacher-student training batches drawn ahead: [(x, y) (M, B, ...)]

    def _regression(self, draws: list) -> tuple[torch.Tensor, torch.Tensor]:
        """draws: per seed, a list of (x, eps) (B, T, d) batches -> (x, y) (steps, M, B, T, d)."""
        steps = len(draws[0])
        x = torch.stack([torch.cat([x for x, _ in seed]) for seed in draws])  # (U, steps B, T, d)
        with torch.no_grad():
            y = self.teacher(self.teachers, x)
        if draws[0][0][1] is not None:
            eps = torch.stack([torch.cat([e for _, e in seed]) for seed in draws])
            y = y + self.noise.to(y).reshape(-1, 1, 1, 1) * eps
        lead = (x.shape[0], steps, -1)
        x, y = x.reshape(*lead, *x.shape[2:]).transpose(0, 1), y.reshape(*lead, *y.shape[2:]).transpose(0, 1)
        return x[:, self.index], y[:, self.index]  # (steps, M, B, ...)

    def train(self, batch: int, ahead: int = 1):
        """The next training batch of every run, (inputs, targets) (M, B, ...); teacher-student draws `ahead`
        batches when none is left (the class docstring)."""
        if self.regression:
            if not self._queue:
                x, y = self._regression([[t.draw(batch) for _ in range(ahead)] for t in self.tasks])
                self._queue = list(zip(x.unbind(), y.unbind()))[::-1]
            return self._queue.pop()
        batches = [t.train_batch(batch) for t in self.tasks]
        return torch.stack([b.inputs for b in batches])[self.index], torch.stack([b.targets for b in batches])[self.index]

    def fixed(self, batch: int, stream: int):
        if self.regression:
            x, y = self._regression([[t.draw(batch, stream)] for t in self.tasks])
            return x[0], y[0]
        batches = [t.fixed_batch(batch, stream) for t in self.tasks]
        return torch.stack([b.inputs for b in batches])[self.index], torch.stack([b.targets for b in batches])[self.index]
