"""Every trained model as a function of one flat parameter vector, and the task it learns.

A run's parameters are one flat vector theta (P,): the module's `named_parameters()` side by side, each
row-major (tied weights once). :class:`Net` holds what is common to every run of a job: the module (its own
parameters are placeholders: every call goes through `torch.func.functional_call` with a run's theta), the
names and shapes that cut theta into the module's parameters, and the attention layers as attnid's layout
sees them: per layer its AttentionSpec and the index vector of that layout's coordinates in theta
(attnid.training.archs.attention_maps for real architectures; a contiguous slice `blocks.i.attn.theta`
for this project's own models). The trainer (attnid.training.batched, M runs as one vmapped model) and the
tests' reference loop (tests/reference_loop.py, one run with torch.optim) both use it, so a run is the same
function in both.

    own model, teacher_student   attnid.training.models.Student (one attention layer)
    own model, recall / markov / text   attnid.training.models.TinyTransformer
    llama, gpt2 (recall/markov/text)    the real `transformers` class (attnid.training.archs)

`last_only`: the recall loss reads the last position only; the own transformer then computes the last
block's query, MLP and unembedding at that position alone, a real architecture its logits there
(`logits_to_keep=1`): the same numbers up to rounding.
"""

from __future__ import annotations

import torch

from ..float64 import KeepFloat64
from . import archs
from .models import Student, TinyTransformer
from .runs import RunConfig
from .tasks import STREAM_MODEL, AssociativeRecall, MarkovChain, TeacherStudent, TextCorpus, generator

TORCH_DTYPES = {"float64": torch.float64, "float32": torch.float32}  # RunConfig.dtype -> torch dtype


def make_task(cfg: RunConfig):
    """The run's task object (data from its seed), on its device and dtype."""
    dtype = TORCH_DTYPES[cfg.dtype]
    if cfg.task == "teacher_student":
        return TeacherStudent(cfg.attention, cfg.seq_len, cfg.seed, dtype=dtype, device=cfg.device, noise=cfg.noise)
    if cfg.task == "recall":
        return AssociativeRecall(cfg.vocab, cfg.pairs, cfg.seed, device=cfg.device)
    if cfg.task == "text":
        return TextCorpus(cfg.corpus, cfg.seq_len, cfg.seed, device=cfg.device)
    return MarkovChain(cfg.vocab, cfg.order, cfg.alpha, cfg.seq_len, cfg.seed, device=cfg.device)


def _own_module(cfg: RunConfig, task, seed: int) -> torch.nn.Module:
    """This project's model of the run, initialised from `seed` (attention from the model stream, the rest
    under torch.manual_seed(seed), as attnid.training.models documents), float64."""
    torch.manual_seed(seed)
    if cfg.task == "teacher_student":
        return Student(cfg.attention, generator(seed, STREAM_MODEL), dtype=torch.float64)
    return TinyTransformer(
        cfg.attention, task.n_tokens, task.seq_len, generator(seed, STREAM_MODEL), n_layers=cfg.n_layers,
        norm=cfg.norm, mlp_ratio=cfg.mlp_ratio, dtype=torch.float64,
    )  # fmt: skip


class Net:
    """The architecture of a run as a pure function of its flat parameters (module docstring)."""

    def __init__(self, cfg: RunConfig, task=None):
        self.cfg, self.spec, self.kind = cfg, cfg.attention, cfg.model
        task = task or make_task(cfg)
        self.dtype = TORCH_DTYPES[cfg.dtype]
        self.last_only = bool(getattr(task, "reads_last", False))
        self.seq_len = task.seq_len
        if cfg.model == "own":
            module = _own_module(cfg, task, cfg.seed)
        else:
            module = archs.build_module(cfg.model, cfg.attention, task.n_tokens, task.seq_len, cfg.n_layers, cfg.mlp_ratio)
        self.module = module.to(dtype=self.dtype, device=cfg.device)
        named = list(self.module.named_parameters())
        self.names = [n for n, _ in named]
        self.shapes = [tuple(p.shape) for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.size = sum(self.sizes)
        if cfg.model == "own":
            offsets = dict(zip(self.names, torch.tensor([0, *self.sizes]).cumsum(0).tolist()))
            self.layers = [
                torch.arange(offsets[n], offsets[n] + s) for n, s in zip(self.names, self.sizes) if n.endswith("attn.theta")
            ]
        else:
            self.layers = archs.attention_maps(cfg.model, self.module, cfg.attention)
        self.layers = [idx.to(cfg.device) for idx in self.layers]
        self._keep = KeepFloat64 if cfg.model != "own" and self.dtype == torch.float64 else None

    def init(self, seed: int) -> torch.Tensor:
        """The run's initial theta (P,) for `seed`, drawn in float64 and rounded to the run's dtype (so a float32
        run starts where the float64 run starts, rounded)."""
        if self.kind == "own":
            module = _own_module(self.cfg.with_(seed=seed), make_task(self.cfg.with_(seed=seed)), seed)
            flat = torch.cat([p.detach().reshape(-1) for _, p in module.named_parameters()])
        else:
            params = archs.init_params(self.module, seed)
            flat = torch.cat([params[n].reshape(-1) for n in self.names])
        return flat.to(dtype=self.dtype, device=self.cfg.device)

    def params(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        """{name: view} of theta (P,)."""
        return {n: t.view(s) for n, t, s in zip(self.names, torch.split(theta, self.sizes), self.shapes)}

    def __call__(self, theta: torch.Tensor, inputs: torch.Tensor, last_only: bool | None = None) -> torch.Tensor:
        """The output of the run at theta (P,) on inputs (B, ...): (B, T, d) for the layer, logits otherwise
        ((B, 1, V) with last_only, default: what the task reads)."""
        last = self.last_only if last_only is None else last_only
        params = self.params(theta)
        if self.kind == "own":
            kwargs = {"last_only": True} if last and self.cfg.task != "teacher_student" else {}
            return torch.func.functional_call(self.module, params, (inputs,), kwargs)
        if self._keep is None:
            return archs.forward_plain(self.module, params, inputs, last)
        return archs.forward(self.module, params, inputs, last)


def build(cfg: RunConfig):
    """(task, net, theta_0) of a run: its task, its architecture as a function of flat parameters and its
    initial point (P,), on cfg.device in cfg.dtype, initialised from cfg.seed (drawn in float64 and rounded,
    so a float32 run starts where the float64 run starts, rounded; the tasks' data are drawn the same way)."""
    task = make_task(cfg)
    net = Net(cfg, task)
    return task, net, net.init(cfg.seed)
