"""The training sweep as data, without torch: config section `training:` -> run configs and jobs.

The Snakefile imports this module to list the jobs and their outputs, so it imports nothing
that needs torch (only :mod:`attnid.layer.spec`). A run is a pure function of its :class:`RunConfig`;
a run config holds the attention layer as one :class:`attnid.layer.spec.AttentionSpec` (`attention`),
never as loose fields.

Config (validated by workflow/schemas/config.schema.yaml): global options (seeds, rebalancing
modes and interval, measurement sizes and cadence, dtype, checks) and, per task entry, the task,
the model that learns it (`model`: this project's own layer or transformer, or a real
`transformers` architecture, attnid.training.archs), the attention spec without its head count
(`attention`, keys = AttentionSpec field names), the head counts swept (`heads` -> n_heads), the
task sizes and the optimizers. An optimizer entry has a label (`name`, e.g. `sgd_wd`) and an
algorithm with its hyperparameters, so that "SGD with weight decay" is its own arm of the sweep.
Across the package `optimizer` is always that label (a run key, the summary's column) and
`algorithm` the update rule (RunConfig.algorithm, one of ALGORITHMS).

A task entry is one sweep. Its `task` is the kind of task (one of TASKS: what the data are and what the
loss reads); its optional `name` (default: the kind) labels the sweep, so one kind can be swept twice by one
model, e.g. at a fixed width and at a fixed head size. Everywhere a run or job says `task`, it means this name
(the job's wildcard, the summary's `task` column); RunConfig.task and the summary's `kind` are the kind. The
width: `attention.d_model` fixes it (the head size is d_model / H, the law 1/(2H) at one width), or the entry's
`d_head` fixes the head size and d_model = H d_head (every H has heads of the same size, so every H can learn).
An entry may run its own `seeds` and `rebalance` modes (default: the global lists), e.g. fewer modes where a
run costs the most, and set its own measurement cadence and sizes (GLOBAL_FIELDS: evaluations, metrics, the
whole-model overlap), e.g. fewer held-out evaluations where one costs many training steps.

Runs and jobs:
    run  = (task, model, optimizer, rebalance, heads, seed)   RUN_KEYS; one row of summary.parquet
    job  = (task, model, heads)                               JOB_KEYS; one Snakemake job trains all
           its runs (every optimizer, rebalancing mode and seed) batched in one process
           (attnid.training.batched): the runs of one head count share their shapes, so they are one
           vmapped model, whatever their update rule.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from itertools import product

from ..layer.spec import AttentionSpec

TASKS = ("teacher_student", "recall", "markov", "text")
MODELS = ("own", "llama", "gpt2", "mixtral")  # own: attnid's layer / tiny transformer; the others: training.archs
# sgd_momentum: heavy ball; adam: L2 added to the gradient; adamw: decoupled decay; adam_shared: Adam whose
# second moment is one number per symmetry block (attnid.training.optim), a preconditioner the group commutes with.
ALGORITHMS = ("sgd", "sgd_momentum", "adam", "adamw", "adam_shared")
REBALANCE = ("none", "project", "balance")
DTYPES = ("float64", "float32")
RUN_KEYS = ("task", "model", "optimizer", "rebalance", "heads", "seed")
JOB_KEYS = ("task", "model", "heads")
TRANSFORMER_FIELDS = ("n_layers", "norm", "mlp_ratio", "model", "kv_ratio")
TASK_FIELDS = {  # config key -> RunConfig field, per task (attention, heads, optimizers handled apart)
    "teacher_student": ("seq_len", "batch", "steps", "noise"),
    "recall": ("batch", "steps", "vocab", "pairs", *TRANSFORMER_FIELDS),
    "markov": ("batch", "steps", "vocab", "order", "alpha", "seq_len", *TRANSFORMER_FIELDS),
    "text": ("batch", "steps", "seq_len", *TRANSFORMER_FIELDS),
}
GLOBAL_FIELDS = ("rebalance_interval", "eval_every", "eval_batch", "probe_batch", "metrics_every", "gauge_every",
                 "gauge_overlap_every", "gauge_max_dim", "dtype")
NOT_PER_JOB = ("tasks", "seeds", "rebalance", "checks", "strict", "lr_study", "converged", "target_fraction",
               "corpus")  # the corpus reaches a text job as its input files (rule corpus), not as settings

# Measured per (measured step, attention layer) of a run, in this column order (attnid.training.metrics
# documents each). Runs of real architectures add the whole-model overlaps overlap_model[_<source>].
METRIC_COLUMNS = (
    "layer", "step", "loss", "eval_loss", "eval_accuracy", "update_norm",
    "overlap_all", "overlap_query_key", "overlap_value_output", "overlap_gauge",
    "drift_query_key", "drift_value_output", "imbalance_query_key", "imbalance_value_output",
    "rebalance_function_change", "rebalance_norm_removed",
)  # fmt: skip


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one training run."""

    # what is learned, by what
    task: str = "teacher_student"  # one of TASKS (attnid.training.tasks)
    model: str = "own"  # one of MODELS: 'own' (attnid's layer / transformer) or a real architecture
    attention: AttentionSpec = field(
        default_factory=lambda: AttentionSpec(d_model=16, n_heads=2)
    )  # student layer / each block's layer
    # task sizes
    seq_len: int = 8  # T of the teacher-student, Markov and text sequences (recall: T = 2 pairs + 1, ignored)
    noise: float = 0.0  # teacher-student: label noise std, relative to the RMS of the teacher's outputs
    vocab: int = 16  # recall: key tokens (and as many value tokens); markov: the chain's states
    pairs: int = 4  # recall: key-value pairs per sequence
    order: int = 2  # markov: the chain's order (tokens of context the next token depends on)
    alpha: float = 0.5  # markov: Dirichlet concentration of each context's next-token distribution
    n_layers: int = 2  # transformer blocks
    norm: str = "layernorm"  # own transformer: 'layernorm' or 'rmsnorm' (real architectures: their own)
    mlp_ratio: int = 4  # MLP hidden width / d_model
    kv_ratio: int = 1  # query heads per key/value group where the head count allows (GQA); 1 = MHA
    corpus: str = ""  # text: the built corpus's folder, a relative path (the job sets it from its input)
    # optimisation
    algorithm: str = "sgd"  # one of ALGORITHMS (the sweep's optimizer entry names it; its label is not here)
    lr: float = 0.1  # learning rate (constant)
    weight_decay: float = 0.0  # weight decay on every parameter
    momentum: float = 0.9  # sgd_momentum: heavy-ball coefficient (ignored by the others)
    beta1: float = 0.9  # adam*: first-moment decay
    beta2: float = 0.999  # adam*: second-moment decay
    steps: int = 200  # optimizer steps
    batch: int = 32  # training sequences per step (fresh samples every step)
    seed: int = 0  # seeds the model, the teacher, the data and the probe (attnid.training.tasks.generator)
    # symmetry handling
    rebalance: str = "none"  # 'none', 'project' (remove P_T u from every update) or 'balance' (balanced point)
    rebalance_interval: int = 10  # balance: after the update of step t when (t+1) % interval == 0
    probe_batch: int = 16  # balance: fixed batch on which the function change of a rebalance is measured
    # measurement
    eval_every: int = 50  # held-out evaluation every this many steps (and at the last step)
    eval_batch: int = 256  # held-out sequences (one fixed batch)
    metrics_every: int = 1  # overlap/update/drift metrics every this many steps (and at the last step)
    gauge_every: int = 100  # real architectures: the whole-model overlap (attnid.training.gauges) every this many steps
    gauge_max_dim: int = 20000  # real architectures: no whole-model overlap (NaN) above this orbit dimension
    gauge_overlap_every: int = 1  # overlap_gauge on the measured steps that are multiples of this (and the last)
    # where and how
    device: str = "cpu"  # 'cpu' or 'cuda'
    dtype: str = "float64"  # 'float64' (rounding ~1e-16, default) or 'float32'
    name: str = ""  # label used in progress bars and error messages ('' = built from the fields)

    def __post_init__(self):
        for field_name, allowed in (
            ("task", TASKS),
            ("model", MODELS),
            ("algorithm", ALGORITHMS),
            ("rebalance", REBALANCE),
            ("dtype", DTYPES),
        ):
            if getattr(self, field_name) not in allowed:
                raise ValueError(f"RunConfig.{field_name} must be one of {allowed}, got {getattr(self, field_name)!r}")
        if not isinstance(self.attention, AttentionSpec):
            raise TypeError(f"RunConfig.attention must be an AttentionSpec, got {type(self.attention).__name__}")
        if self.task == "teacher_student" and self.model != "own":
            raise ValueError(f"RunConfig.model: the teacher-student task trains attnid's own layer, got {self.model!r}")
        for field_name in (
            "steps",
            "batch",
            "rebalance_interval",
            "eval_every",
            "metrics_every",
            "eval_batch",
            "probe_batch",
            "kv_ratio",
            "gauge_every",
            "gauge_overlap_every",
        ):
            if getattr(self, field_name) < 1:
                raise ValueError(f"RunConfig.{field_name} must be >= 1, got {getattr(self, field_name)}")
        if not self.lr > 0:
            raise ValueError(f"RunConfig.lr must be > 0, got {self.lr}")
        if self.noise < 0:
            raise ValueError(f"RunConfig.noise must be >= 0, got {self.noise}")
        if self.task == "markov" and not 1 <= self.order < self.seq_len:
            raise ValueError(f"RunConfig.order must be in [1, seq_len), got order {self.order}, seq_len {self.seq_len}")
        if self.task == "text" and not self.corpus:
            raise ValueError("RunConfig.corpus: the text task needs the built corpus's folder (rule corpus)")
        if self.task == "text" and not self.attention.causal:
            raise ValueError("RunConfig.attention.causal: the text task predicts the next token, so attention is causal")
        if not self.name:
            object.__setattr__(
                self,
                "name",
                f"{self.task}/{self.model}/{self.algorithm}/{self.rebalance}/h{self.heads}/s{self.seed}",
            )

    @property
    def heads(self) -> int:
        return self.attention.n_heads

    def to_dict(self) -> dict:
        """Plain data (the spec as its config mapping)."""
        return asdict(self) | {"attention": self.attention.to_config()}

    def with_(self, **changes) -> RunConfig:
        return replace(self, **changes)


def section_model(section: dict) -> str:
    return section.get("model", "own")


def section_name(section: dict) -> str:
    """The sweep's name: the entry's `name`, else its task kind (module docstring)."""
    return section.get("name", section["task"])


def task_section(training: dict, task: str, model: str = "own") -> dict:
    """The `tasks` entry of one (sweep name, model) (tasks and optimizers are lists, so presets replace them
    whole)."""
    for section in training["tasks"]:
        if section_name(section) == task and section_model(section) == model:
            return section
    raise KeyError(f"training.tasks has no entry named {task!r} with model {model!r}")


def optimizer_entry(section: dict, name: str) -> dict:
    for entry in section["optimizers"]:
        if entry["name"] == name:
            return entry
    raise KeyError(f"training.tasks[{section['task']}].optimizers has no optimizer named {name!r}")


def optimizer_lr(entry: dict, heads) -> float:
    """The learning rate of an optimizer entry at `heads` query heads: its `lr_at_heads` value for that head
    count where it has one (a sweep at a fixed head size grows the width with H, and plain SGD's stable step
    with it), else `lr` (attnid.workflow_config refuses a head count the sweep does not train)."""
    at = {int(h): float(lr) for h, lr in entry.get("lr_at_heads", {}).items()}
    return at.get(int(heads), entry["lr"])


def section_steps(section: dict, heads) -> int:
    """A sweep's optimizer steps at `heads` query heads: its `steps_at_heads` value for that head count where it
    has one (a head count that learns more slowly at the sweep's rates), else `steps`."""
    at = {int(h): int(n) for h, n in (section.get("steps_at_heads") or {}).items()}
    return at.get(int(heads), int(section["steps"]))


def kv_heads(heads: int, kv_ratio: int) -> int:
    """Key/value groups of `heads` query heads at `kv_ratio` query heads per group (MHA where it does not divide)."""
    return heads // kv_ratio if kv_ratio > 1 and heads % kv_ratio == 0 else heads


def attention_spec(section: dict, heads: int) -> AttentionSpec:
    """The AttentionSpec of a task section at `heads` query heads (real architectures: attnid.training.archs
    fixes what the architecture does: RoPE and GQA for Llama and Mixtral, biases for GPT-2)."""
    fields = {**section.get("attention", {}), "n_heads": int(heads)}
    if "d_head" in section:  # a fixed head size: the width grows with H
        if "d_model" in fields:
            raise KeyError(f"training.tasks[{section_name(section)}]: give attention.d_model or d_head, not both")
        fields["d_model"] = int(heads) * int(section["d_head"])
    ratio = section.get("kv_ratio", 1)
    if ratio > 1 and "n_kv_heads" not in fields:
        fields["n_kv_heads"] = kv_heads(int(heads), ratio)
    model = section_model(section)
    if model in ("llama", "mixtral"):
        fields.update(rope_dims="full", causal=True)
    elif model == "gpt2":
        fields.update(biases="qkvo", causal=True)
    return AttentionSpec.from_config(fields)


def jobs(training: dict) -> list[dict]:
    """Wildcards of every job (JOB_KEYS), in a stable order."""
    return [
        {"task": section_name(s), "model": section_model(s), "heads": int(h)} for s in training["tasks"] for h in s["heads"]
    ]


def runs(training: dict, task: str | None = None, model: str | None = None, heads: int | None = None) -> list[dict]:
    """Wildcards of every run (RUN_KEYS) of the sweep, or of one job, in a stable order."""
    out = []
    for job in jobs(training):
        if task not in (None, job["task"]) or model not in (None, job["model"]):
            continue
        if heads is not None and int(heads) != job["heads"]:
            continue
        section = task_section(training, job["task"], job["model"])
        modes, seeds = section.get("rebalance", training["rebalance"]), section.get("seeds", training["seeds"])
        for opt, rebalance, seed in product(section["optimizers"], modes, seeds):
            out.append({"task": job["task"], "model": job["model"], "optimizer": opt["name"],
                        "rebalance": rebalance, "heads": job["heads"], "seed": int(seed)})  # fmt: skip
    return out


def job_cost(training: dict, task: str, model: str = "own", heads=1) -> float:
    """A job's matrix-product work in FLOPs, roughly: 6 x (its runs x steps x tokens a batch) x (the weights a
    token meets: n_layers (4 + 3 mlp_ratio) d^2 and the vocab's table). For ordering jobs only (the workflow
    starts the longest first, so the widest job does not start last and run alone); nothing reads it as a
    measurement (benchmarks/sweep.py has the measured floor)."""
    section = task_section(training, task, model)
    d = attention_spec(section, heads).d_model
    tokens = section.get("batch", 1) * section.get("seq_len", 2 * section.get("pairs", 1) + 2)
    vocab = section.get("vocab") or (training.get("corpus") or {}).get("vocab_size", 0)  # a table of vocab x d
    if section["task"] == "teacher_student":  # vectors in and out, no table
        vocab = 0
    weights = section.get("n_layers", 1) * (4 + 3 * section.get("mlp_ratio", 0)) * d * d + vocab * d
    return 6.0 * len(runs(training, task, model, heads)) * section_steps(section, heads) * tokens * weights


def job_priorities(training: dict) -> dict[tuple, int]:
    """{(task, model, heads): rank} of every job by :func:`job_cost`, 1 the cheapest (equal costs, equal ranks):
    the workflow's priorities, so the longest job starts first."""
    costs = {(j["task"], j["model"], j["heads"]): job_cost(training, **j) for j in jobs(training)}
    order = sorted(set(costs.values()))
    return {key: order.index(cost) + 1 for key, cost in costs.items()}


def job_params(training: dict, task: str, model: str = "own", heads=None) -> dict:
    """The part of `training:` that defines one job's runs (editing another job's settings reruns only that job:
    a job's `steps_at_heads` and `lr_at_heads` are resolved to its own head count, where the sweep has them)."""
    section = dict(task_section(training, task, model))
    if heads is not None:
        section["heads"] = [int(heads)]
        if "steps_at_heads" in section:
            section["steps"] = section_steps(section, heads)
            del section["steps_at_heads"]
        section["optimizers"] = [
            {k: v for k, v in opt.items() if k != "lr_at_heads"} | {"lr": optimizer_lr(opt, heads)}
            if "lr_at_heads" in opt else opt
            for opt in section["optimizers"]
        ]  # fmt: skip
    common = {k: v for k, v in training.items() if k not in NOT_PER_JOB}
    return common | {"seeds": list(training["seeds"]), "rebalance": list(training["rebalance"]), "tasks": [section]}


def run_config(
    training: dict, device: str, task: str, optimizer: str, rebalance: str, heads, seed, model: str = "own",
    corpus: str = "",
) -> RunConfig:
    """The RunConfig of one run of the sweep (wildcards as strings or ints); `corpus` the built corpus's
    folder, which a text run reads (other tasks ignore it)."""
    section = task_section(training, task, model)
    opt = optimizer_entry(section, optimizer)
    fields = {f: section[f] for f in TASK_FIELDS[section["task"]] if f in section}
    fields.update({f: section.get(f, training.get(f)) for f in GLOBAL_FIELDS if f in section or f in training})
    fields["steps"] = section_steps(section, heads)
    return RunConfig(
        task=section["task"], attention=attention_spec(section, heads), seed=int(seed), rebalance=rebalance,
        device=device,
        algorithm=opt["algorithm"], lr=optimizer_lr(opt, heads), weight_decay=opt.get("weight_decay", 0.0),
        momentum=opt.get("momentum", 0.9), beta1=opt.get("beta1", 0.9), beta2=opt.get("beta2", 0.999),
        corpus=corpus if section["task"] == "text" else "", name=f"{task}/{model}/{optimizer}/{rebalance}/h{heads}/s{seed}", **fields,
    )  # fmt: skip


def measured_steps(steps: int, metrics_every: int, eval_every: int, gauge_every: int | None = None) -> list[int]:
    """The steps whose measurements are kept: every metrics_every-th, eval_every-th (and gauge_every-th) step
    and the last."""
    every = [metrics_every, eval_every] + ([gauge_every] if gauge_every else [])
    return sorted({t for t in range(steps) if any(t % e == 0 for e in every)} | {steps - 1})
