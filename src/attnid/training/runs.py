"""The training sweep as data, without torch: config section `training:` -> run configs and jobs.

The Snakefile imports this module to list the jobs and their outputs, so it imports nothing
that needs torch (only :mod:`attnid.spec`). A run is a pure function of its :class:`RunConfig`;
a run config holds the attention layer as one :class:`attnid.spec.AttentionSpec` (`attention`),
never as loose fields.

Config (validated by workflow/schemas/config.schema.yaml): global options (seeds, rebalancing
modes and interval, measurement sizes, dtype, checks) and, per task, the attention spec without
its head count (`attention`, keys = AttentionSpec field names), the head counts swept
(`heads` -> n_heads), the task sizes and the optimizers. An optimizer entry has a label (`name`,
e.g. `sgd_wd`) and an algorithm with its hyperparameters, so that "SGD with weight decay" is its
own arm of the sweep. Across the package `optimizer` is always that label (a wildcard, a run key,
the summary's column) and `algorithm` the update rule (RunConfig.algorithm, one of ALGORITHMS).

Runs and jobs:
    run  = (task, optimizer, rebalance, heads, seed)         RUN_KEYS; one row of summary.parquet
    job  = (task, optimizer)                                  JOB_KEYS; one Snakemake job trains all
           its runs (every head count, seed and rebalancing mode) batched in one process
           (attnid.training.batched), which saves the per-job start-up and vectorises the seeds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from itertools import product

from ..spec import AttentionSpec

TASKS = ("teacher_student", "recall")
# sgd_momentum: heavy ball; adam: L2 added to the gradient; adamw: decoupled decay; adam_shared: Adam whose
# second moment is one number per symmetry block (attnid.training.optim), a preconditioner the group commutes with.
ALGORITHMS = ("sgd", "sgd_momentum", "adam", "adamw", "adam_shared")
REBALANCE = ("none", "project", "balance")
DTYPES = ("float64", "float32")
RUN_KEYS = ("task", "optimizer", "rebalance", "heads", "seed")
JOB_KEYS = ("task", "optimizer")
TASK_FIELDS = {  # config key -> RunConfig field, per task (attention, heads, optimizers handled apart)
    "teacher_student": ("seq_len", "batch", "steps"),
    "recall": ("batch", "steps", "vocab", "pairs", "n_layers", "norm", "mlp_ratio"),
}
GLOBAL_FIELDS = ("rebalance_interval", "eval_every", "eval_batch", "probe_batch", "metrics_every", "dtype")
NOT_PER_JOB = ("tasks", "seeds", "rebalance", "checks", "strict", "lr_study")  # keys that do not change a job's runs

# Per-(step, layer) measurements of a run, in this column order (attnid.training.loop documents each).
METRIC_COLUMNS = (
    "layer", "step", "loss", "eval_loss", "eval_accuracy", "lr", "update_norm",
    "overlap_all", "overlap_query_key", "overlap_value_output",
    "chance_all", "chance_query_key", "chance_value_output",
    "drift_query_key", "drift_value_output",
    "rebalance_function_change", "rebalance_norm_removed",
)  # fmt: skip


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one training run."""

    # what is learned
    task: str = "teacher_student"  # 'teacher_student' (one attention layer) or 'recall' (tiny transformer)
    attention: AttentionSpec = field(
        default_factory=lambda: AttentionSpec(d_model=16, n_heads=2)
    )  # student layer / each block's layer
    # task sizes
    seq_len: int = 8  # T of the teacher-student inputs (recall: T = 2 pairs + 1, this field is ignored)
    vocab: int = 16  # recall: number of key tokens (and of value tokens)
    pairs: int = 4  # recall: key-value pairs per sequence
    n_layers: int = 2  # recall: transformer blocks
    norm: str = "layernorm"  # recall: 'layernorm' or 'rmsnorm'
    mlp_ratio: int = 4  # recall: MLP hidden width / d_model
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
    metrics_every: int = 1  # overlap/update/drift metrics every this many steps (NaN in between)
    # where and how
    device: str = "cpu"  # 'cpu' or 'cuda'
    dtype: str = "float64"  # 'float64' (rounding ~1e-13, default) or 'float32'
    name: str = ""  # label used in progress bars and error messages ('' = built from the fields)

    def __post_init__(self):
        for field_name, allowed in (
            ("task", TASKS),
            ("algorithm", ALGORITHMS),
            ("rebalance", REBALANCE),
            ("dtype", DTYPES),
        ):
            if getattr(self, field_name) not in allowed:
                raise ValueError(f"RunConfig.{field_name} must be one of {allowed}, got {getattr(self, field_name)!r}")
        if not isinstance(self.attention, AttentionSpec):
            raise TypeError(f"RunConfig.attention must be an AttentionSpec, got {type(self.attention).__name__}")
        for field_name in (
            "steps",
            "batch",
            "rebalance_interval",
            "eval_every",
            "metrics_every",
            "eval_batch",
            "probe_batch",
        ):
            if getattr(self, field_name) < 1:
                raise ValueError(f"RunConfig.{field_name} must be >= 1, got {getattr(self, field_name)}")
        if not self.lr > 0:
            raise ValueError(f"RunConfig.lr must be > 0, got {self.lr}")
        if not self.name:
            object.__setattr__(
                self, "name", f"{self.task}/{self.algorithm}/{self.rebalance}/h{self.heads}/s{self.seed}"
            )

    @property
    def heads(self) -> int:
        return self.attention.n_heads

    def to_dict(self) -> dict:
        """Plain data (the spec as its config mapping)."""
        return asdict(self) | {"attention": self.attention.to_config()}

    def with_(self, **changes) -> RunConfig:
        return replace(self, **changes)


def task_section(training: dict, task: str) -> dict:
    """The `tasks` entry of one task (tasks and optimizers are lists, so presets replace them whole)."""
    for section in training["tasks"]:
        if section["task"] == task:
            return section
    raise KeyError(f"training.tasks has no entry for task {task!r}")


def optimizer_entry(section: dict, name: str) -> dict:
    for entry in section["optimizers"]:
        if entry["name"] == name:
            return entry
    raise KeyError(f"training.tasks[{section['task']}].optimizers has no optimizer named {name!r}")


def attention_spec(section: dict, heads: int) -> AttentionSpec:
    """The AttentionSpec of a task section at `heads` query heads."""
    return AttentionSpec.from_config({**section["attention"], "n_heads": int(heads)})


def jobs(training: dict) -> list[dict]:
    """Wildcards of every job (JOB_KEYS), in a stable order."""
    return [{"task": s["task"], "optimizer": o["name"]} for s in training["tasks"] for o in s["optimizers"]]


def runs(training: dict, task: str | None = None, optimizer: str | None = None) -> list[dict]:
    """Wildcards of every run (RUN_KEYS) of the sweep, or of one job, in a stable order."""
    out = []
    for job in jobs(training):
        if task not in (None, job["task"]) or optimizer not in (None, job["optimizer"]):
            continue
        section = task_section(training, job["task"])
        for rebalance, heads, seed in product(training["rebalance"], section["heads"], training["seeds"]):
            out.append({**job, "rebalance": rebalance, "heads": int(heads), "seed": int(seed)})
    return out


def job_params(training: dict, task: str, optimizer: str) -> dict:
    """The part of `training:` that defines one job's runs (editing another job's settings reruns only that job)."""
    section = task_section(training, task)
    section = dict(section, optimizers=[optimizer_entry(section, optimizer)])
    common = {k: v for k, v in training.items() if k not in NOT_PER_JOB}
    return common | {"seeds": list(training["seeds"]), "rebalance": list(training["rebalance"]), "tasks": [section]}


def run_config(training: dict, device: str, task: str, optimizer: str, rebalance: str, heads, seed) -> RunConfig:
    """The RunConfig of one run of the sweep (wildcards as strings or ints)."""
    section = task_section(training, task)
    opt = optimizer_entry(section, optimizer)
    fields = {f: section[f] for f in TASK_FIELDS[task] if f in section}
    fields.update({f: training[f] for f in GLOBAL_FIELDS if f in training})
    return RunConfig(
        task=task, attention=attention_spec(section, heads), seed=int(seed), rebalance=rebalance, device=device,
        algorithm=opt["algorithm"], lr=opt["lr"], weight_decay=opt.get("weight_decay", 0.0),
        momentum=opt.get("momentum", 0.9), beta1=opt.get("beta1", 0.9), beta2=opt.get("beta2", 0.999),
        name=f"{task}/{optimizer}/{rebalance}/h{heads}/s{seed}", **fields,
    )  # fmt: skip
