"""Training: tasks, models, the training loop's measurements, determinism, divergence, the sweep.

Runs are tiny (d_model 8, tens of steps, float64) so the whole file takes seconds.
"""

import math
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from attnid import symmetry
from attnid.models import TinyTransformer
from attnid.spec import AttentionSpec
from attnid.sweep import macro_name, run_config, runs, sanity_checks, training_macros
from attnid.tasks import AssociativeRecall, TeacherStudent, generator
from attnid.train import METRIC_COLUMNS, RunConfig, RunDiverged, train

ROOT = Path(__file__).resolve().parents[1]
CONTRACT_METRICS = [
    "task", "optimizer", "rebalance", "heads", "seed", "layer", "step", "loss", "eval_loss", "eval_accuracy", "lr",
    "update_norm", "overlap_all", "overlap_query_key", "overlap_value_output", "chance_all", "chance_query_key",
    "chance_value_output", "drift_query_key", "drift_value_output", "rebalance_function_change", "rebalance_norm_removed",
]  # fmt: skip
ROUNDING = 1e-10  # float64: overlaps and function changes at rounding are ~1e-15


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models run fastest on one thread (and the machine is shared)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny(**changes) -> RunConfig:
    base = dict(task="teacher_student", d_model=8, heads=2, seq_len=4, batch=8, steps=12, eval_every=5, eval_batch=16, probe_batch=4, rebalance_interval=4)
    if changes.get("task") == "recall":
        base.update(d_model=8, vocab=6, pairs=2, mlp_ratio=2, causal=True)
    base.update(changes)
    return RunConfig(**base)


def random_group_action(spec, theta, seed=0):
    """theta moved along its orbit by a random group element (symmetry.act)."""
    g = torch.Generator().manual_seed(seed)
    eye = lambda n: torch.eye(n, dtype=torch.float64)  # noqa: E731
    qk = eye(spec.d_head_qk) + 0.3 * torch.randn(spec.G, spec.d_head_qk, spec.d_head_qk, generator=g, dtype=torch.float64)
    vo = eye(spec.d_head_v) + 0.3 * torch.randn(spec.G, spec.d_head_v, spec.d_head_v, generator=g, dtype=torch.float64)
    return symmetry.act(spec, theta, qk, vo)


# --- tasks and models -------------------------------------------------------------------------


def test_recall_batches_ask_for_the_value_of_a_key_in_context():
    task = AssociativeRecall(vocab=6, pairs=3, seed=1)
    batch = task.train_batch(64)
    tokens, target = batch.inputs, batch.targets  # (B, 7), (B,)
    assert tokens.shape == (64, 7)
    keys, values, query = tokens[:, 0:6:2], tokens[:, 1:6:2], tokens[:, -1]
    assert (keys < 6).all() and (values >= 6).all() and (values < 12).all()
    assert all(len(set(row.tolist())) == 3 for row in keys)  # distinct keys
    position = (keys == query[:, None]).int().argmax(dim=1)
    assert ((keys == query[:, None]).sum(dim=1) == 1).all()
    assert torch.equal(values[torch.arange(64), position] - 6, target)
    assert torch.equal(task.fixed_batch(8).inputs, AssociativeRecall(6, 3, seed=1).fixed_batch(8).inputs)


def test_teacher_student_loss_is_invariant_under_the_student_group():
    spec = AttentionSpec(d_model=8, n_heads=2)
    task = TeacherStudent(spec, seq_len=5, seed=0)
    batch = task.fixed_batch(16)
    theta = task.teacher.layout.init(generator(3, 0))
    moved = random_group_action(spec, theta)
    assert (moved - theta).norm() > 0.1
    from attnid.attention import attention

    loss = task.loss(attention(theta, batch.inputs, spec), batch)
    assert abs(task.loss(attention(moved, batch.inputs, spec), batch) - loss) < 1e-12 * loss


def test_transformer_function_is_invariant_per_attention_layer():
    spec = AttentionSpec(d_model=8, n_heads=2, causal=True)
    torch.manual_seed(0)
    model = TinyTransformer(spec, n_tokens=12, seq_len=5, generator=generator(0, 0), norm="rmsnorm", mlp_ratio=2)
    tokens = torch.randint(0, 12, (4, 5), generator=generator(0, 1))
    before = model(tokens)
    with torch.no_grad():
        for i, layer in enumerate(model.attention_layers()):
            layer.theta.copy_(random_group_action(spec, layer.theta, seed=i))
    assert (model(tokens) - before).abs().max() < 1e-12 * before.abs().max()


# --- the training loop --------------------------------------------------------------------------


def test_metrics_have_the_contract_columns_and_shapes():
    metrics, summary = train(tiny(task="recall", optimizer="adam", lr=1e-2), progress=False)
    assert list(metrics.columns) == list(METRIC_COLUMNS) == CONTRACT_METRICS[5:]
    assert len(metrics) == 12 * 2 and set(metrics["layer"]) == {0, 1}
    assert metrics["eval_loss"].notna().sum() == 2 * 4  # steps 0, 5, 10 and the last
    assert metrics["eval_accuracy"].between(0, 1).sum() == 8
    assert metrics[["loss", "update_norm", "overlap_all", "drift_query_key"]].notna().all().all()
    assert metrics["rebalance_function_change"].isna().all()
    spec = tiny().spec
    assert metrics["chance_all"].iloc[0] == pytest.approx(math.sqrt(symmetry.subspace_dim(spec) / 4 / spec.d_model**2))
    assert summary["final_eval_accuracy"] >= 0 and summary["steps"] == 12


def test_plain_sgd_has_zero_overlap_and_momentum_adam_weight_decay_do_not():
    overlap = {}
    for name, changes in {
        "sgd": dict(optimizer="sgd", lr=0.5),
        "sgd_wd": dict(optimizer="sgd", lr=0.5, weight_decay=0.05),
        "momentum": dict(optimizer="sgd_momentum", lr=0.05),
        "adam": dict(optimizer="adam", lr=0.01),
    }.items():
        metrics, _ = train(tiny(**changes), progress=False)
        overlap[name] = metrics["overlap_all"]
    assert overlap["sgd"].max() < ROUNDING
    assert overlap["sgd_wd"].min() > 1e-3
    assert overlap["momentum"].iloc[1:].min() > 1e-3  # step 0: the momentum buffer is the gradient itself
    assert overlap["adam"].mean() > 1e-2


def test_project_removes_the_tangent_part_and_reports_it():
    metrics, _ = train(tiny(optimizer="adam", lr=0.01, rebalance="project"), progress=False)
    assert metrics["overlap_all"].max() < ROUNDING
    assert metrics["overlap_query_key"].max() < ROUNDING and metrics["overlap_value_output"].max() < ROUNDING
    assert (metrics["rebalance_norm_removed"] > 1e-4).all()
    # the conserved quantities stay (nearly) conserved when every update is orthogonal to the orbit
    free, _ = train(tiny(optimizer="adam", lr=0.01), progress=False)
    assert metrics["drift_query_key"].iloc[-1] < 0.2 * free["drift_query_key"].iloc[-1]


def test_balance_keeps_the_function_and_zeroes_the_imbalance():
    metrics, summary = train(tiny(task="recall", optimizer="adam", lr=1e-2, rebalance="balance"), progress=False)
    events = metrics.dropna(subset=["rebalance_function_change"])
    assert sorted(events["step"].unique()) == [3, 7, 11]  # (t + 1) % 4 == 0
    assert len(events) == 3 * 2  # both layers at every rebalance
    assert events["rebalance_function_change"].max() < ROUNDING
    assert summary["max_rebalance_function_change"] < ROUNDING
    assert (events["rebalance_norm_removed"] >= -1e-12).all() and events["rebalance_norm_removed"].max() > 0


def test_same_config_gives_bit_identical_metrics():
    for cfg in (tiny(optimizer="adamw", lr=1e-2, weight_decay=0.1, rebalance="balance"), tiny(task="recall", optimizer="sgd_momentum", lr=0.05, rebalance="project")):
        first, _ = train(cfg, progress=False)
        second, _ = train(cfg, progress=False)
        pd.testing.assert_frame_equal(first, second, check_exact=True)
    other, _ = train(cfg.with_(seed=1), progress=False)
    assert not other["loss"].equals(second["loss"])


def test_divergence_names_the_run_and_the_step():
    cfg = tiny(optimizer="sgd", lr=1e200, name="ts/huge/none/h2/s0")
    with pytest.raises(RunDiverged, match=r"run ts/huge/none/h2/s0 diverged: .* at step \d+"):
        train(cfg, progress=False)


class FakeSnakemake:
    """What workflow/scripts/train_run.py reads from Snakemake's `snakemake` object."""

    def __init__(self, tmp_path, training, wildcards):
        from types import SimpleNamespace

        run = tmp_path / "run"
        self.log = [str(tmp_path / "run.log")]
        self.threads = 1
        self.wildcards = wildcards
        self.params = SimpleNamespace(training=training, device="cpu")
        self.output = SimpleNamespace(metrics=str(run / "metrics.parquet"), summary=str(run / "summary.json"))


@pytest.mark.parametrize("lr", [1.0, 1e200])
def test_train_run_script_writes_everything_or_nothing(tmp_path, lr):
    import json
    import runpy
    import sys

    training = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())["training"]
    training["tasks"][0]["optimizers"][0]["lr"] = lr
    wildcards = {"task": "teacher_student", "optimizer": "sgd", "rebalance": "none", "heads": "2", "seed": "0"}
    fake = FakeSnakemake(tmp_path, training, wildcards)
    stderr = sys.stderr
    try:
        if lr > 1e100:
            with pytest.raises(RunDiverged, match="teacher_student/sgd/none/h2/s0"):
                runpy.run_path(str(ROOT / "workflow/scripts/train_run.py"), init_globals={"snakemake": fake})
        else:
            runpy.run_path(str(ROOT / "workflow/scripts/train_run.py"), init_globals={"snakemake": fake})
    finally:
        sys.stderr.close()
        sys.stderr = stderr
    run = tmp_path / "run"
    if lr > 1e100:
        assert not run.exists() or not any(run.iterdir())  # no output at all, not even a temporary file
        return
    metrics = pd.read_parquet(fake.output.metrics)
    assert list(metrics.columns) == CONTRACT_METRICS
    summary = json.loads(Path(fake.output.summary).read_text())
    assert summary["optimizer"] == "sgd" and summary["heads"] == 2 and summary["max_overlap_all"] < ROUNDING
    assert "100%" in Path(fake.log[0]).read_text()  # the progress bar went to the log


def test_metrics_every_thins_the_measurements_only():
    every, _ = train(tiny(optimizer="adam", lr=0.01), progress=False)
    thinned, _ = train(tiny(optimizer="adam", lr=0.01, metrics_every=5), progress=False)
    assert thinned["overlap_all"].notna().sum() == 4  # steps 0, 5, 10, 11
    pd.testing.assert_series_equal(every["loss"], thinned["loss"])  # same trajectory


def test_bad_run_config_names_the_field():
    with pytest.raises(ValueError, match="optimizer"):
        RunConfig(optimizer="lbfgs")
    with pytest.raises(ValueError, match="rebalance"):
        RunConfig(rebalance="sometimes")


# --- the sweep: config, checks, macros ----------------------------------------------------------


@pytest.mark.parametrize("preset", ["config.yaml", "smoke.yaml", "paper.yaml"])
def test_presets_validate_and_give_run_configs(preset):
    from snakemake.utils import validate

    config = yaml.safe_load((ROOT / "config" / preset).read_text())
    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    training = config["training"]
    wildcards = runs(training)
    assert len(wildcards) == len({tuple(w.values()) for w in wildcards}) > 0
    for w in wildcards:
        cfg = run_config(training, "cpu", **{k: str(v) for k, v in w.items()})
        assert cfg.spec.n_heads == w["heads"] and cfg.name.startswith(w["task"])
    if preset == "config.yaml":
        assert len(wildcards) <= 40  # the default sweep stays within minutes on 2 cores


def test_schema_rejects_unknown_training_keys_by_name():
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["training"]["tasks"][0]["optimizers"][0]["learning_rate"] = 0.1
    with pytest.raises(WorkflowError, match="learning_rate"):
        validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["training"]["tasks"][1]["vocab"] = "sixteen"
    with pytest.raises(WorkflowError, match="sixteen"):
        validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))


def fake_summary(overrides=None):
    rows = [
        dict(task="t", optimizer="sgd", algorithm="sgd", weight_decay=0.0, rebalance="none", max_overlap_all=1e-15, mean_overlap_all=1e-15, max_rebalance_function_change=math.nan),
        dict(task="t", optimizer="adam", algorithm="adam", weight_decay=0.0, rebalance="none", max_overlap_all=0.3, mean_overlap_all=0.2, max_rebalance_function_change=math.nan),
        dict(task="t", optimizer="adam", algorithm="adam", weight_decay=0.0, rebalance="project", max_overlap_all=1e-15, mean_overlap_all=1e-15, max_rebalance_function_change=math.nan),
        dict(task="t", optimizer="adam", algorithm="adam", weight_decay=0.0, rebalance="balance", max_overlap_all=0.3, mean_overlap_all=0.2, max_rebalance_function_change=1e-15),
    ]
    df = pd.DataFrame(rows)
    for (i, col), value in (overrides or {}).items():
        df.loc[i, col] = value
    return df


def test_sanity_checks_report_failures_instead_of_hiding_them():
    assert sanity_checks(fake_summary(), rounding=1e-9, nonzero=1e-3)["passed"].all()
    for row, column, value in [(0, "max_overlap_all", 1e-4), (1, "mean_overlap_all", 1e-5), (2, "max_overlap_all", 1e-4), (3, "max_rebalance_function_change", 1e-4)]:
        checks = sanity_checks(fake_summary({(row, column): value}), rounding=1e-9, nonzero=1e-3)
        assert list(checks["passed"]) == [i != row for i in range(4)], checks
    missing = sanity_checks(fake_summary({(3, "max_rebalance_function_change"): math.nan}), 1e-9, 1e-3)
    assert not missing["passed"].iloc[3]  # a missing measurement fails


def test_macros_have_letter_only_names():
    assert macro_name("sgd_momentum") == "SGDMomentum" and macro_name("adamw") == "AdamW" and macro_name("sgd_wd") == "SGDWD"
    summary = fake_summary()
    checks = sanity_checks(summary, 1e-9, 1e-3)
    text = training_macros(summary.assign(task="teacher_student"), checks)
    assert r"\newcommand{\OverlapSGD}" in text and r"\newcommand{\OverlapAdam}{0.2}" in text
    assert r"\newcommand{\TrainingChecksPassed}{4/4}" in text
