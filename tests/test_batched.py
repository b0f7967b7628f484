"""Batched training (attnid.training.batched, .optim, .job) against the tests' reference loop, and the study's maths.

Every run of a batch must see exactly what it sees alone (same parameters, data, updates and
measurements as tests/reference_loop.py with torch.optim), whatever the other runs' update rules and
models (this project's layer and transformer, the real Llama, GPT-2 and Mixtral); a diverged run must not disturb
the others; the properties the study reports must hold where they are exact (a block-scalar preconditioner
keeps the update orthogonal to the orbit; the weight-decay identity; the gauge-invariant overlap).
Tiny sizes, float64, one thread: seconds.
"""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from reference_loop import train
from training_helpers import ROUNDING, one_thread, tiny  # noqa: F401 - one_thread: autouse fixture

from attnid import symmetry
from attnid.layer.layout import Layout
from attnid.layer.spec import AttentionSpec
from attnid.training import analysis
from attnid.training.batched import train_batched
from attnid.training.job import JOB_CPU_LINE, logged_job_cpu
from attnid.training.nets import build
from attnid.training.optim import symmetry_blocks
from attnid.training.overlap import gauge_overlap
from attnid.training.runs import METRIC_COLUMNS, job_params, jobs, run_config, runs
from attnid.training.sweep import sanity_checks

ROOT = Path(__file__).resolve().parents[1]


def assert_same_run(batched: pd.DataFrame, alone: pd.DataFrame, rtol: float = 1e-9):
    """Equal to float rounding: relative rtol, or absolute 1e-13 for numbers at rounding (zero overlaps)."""
    for column in METRIC_COLUMNS:
        a, b = alone[column].to_numpy(float), batched[column].to_numpy(float)
        assert np.array_equal(np.isnan(a), np.isnan(b)), column
        np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-13, equal_nan=True, err_msg=column)


# Adam without L2: with it, a coordinate whose gradient is zero (GPT-2's key bias, invisible under softmax)
# moves by lr lambda theta / eps per step, 10^4 theta here: its rounding-level start grows by 10^4 a step, so
# two exact implementations part at step 3 (a property of Adam + L2, not of either trainer)
HYPER = {
    "sgd": {"lr": 0.5, "weight_decay": 0.02},
    "sgd_momentum": {"lr": 0.05},
    "adam": {"lr": 0.01},
    "adamw": {"lr": 0.01, "weight_decay": 0.1},
}
SETTINGS = [  # (task, model, attention spec)
    ("teacher_student", "own", AttentionSpec(8, 2)),
    ("recall", "own", AttentionSpec(8, 2, causal=True)),
    ("markov", "own", AttentionSpec(8, 2, causal=True)),
    ("recall", "llama", AttentionSpec(8, 2, n_kv_heads=1, rope_dims="full", causal=True)),
    ("markov", "gpt2", AttentionSpec(8, 2, biases="qkvo", causal=True)),
    ("markov", "mixtral", AttentionSpec(8, 2, n_kv_heads=1, rope_dims="full", causal=True)),
]


@pytest.mark.parametrize("task, model, spec", SETTINGS, ids=lambda x: x if isinstance(x, str) else x.label)
def test_each_batched_run_equals_the_reference_loop_alone(task, model, spec):
    """One batch of every algorithm, rebalancing mode and seed (and a run at half the learning rate): each run's
    measurements equal the torch.optim reference loop's for that run alone."""
    extra = {"seq_len": 6} if task == "markov" else {}
    if model != "own":  # the whole-model gauge of a real architecture needs more tokens than d_model
        extra["vocab"] = 9 if task == "markov" else 5
    cfgs = [
        tiny(task=task, model=model, attention=spec, algorithm=alg, seed=s, rebalance=m, noise=0.1 * (task == "teacher_student"),
             name=f"{alg}/{m}/{s}", **hyper, **extra)
        for alg, hyper in HYPER.items() for s in (0, 1) for m in ("none", "project", "balance")
    ]  # fmt: skip
    cfgs.append(cfgs[0].with_(lr=cfgs[0].lr / 2, name="half lr"))  # learning rates differ per run
    for cfg, (metrics, summary) in zip(cfgs, train_batched(cfgs, progress=False)):
        alone, alone_summary = train(cfg, progress=False)
        # recall: the batched trainer computes the last position only, the loop the full model: same numbers
        assert_same_run(metrics, alone, rtol=1e-9)
        assert summary["final_eval_loss"] == pytest.approx(alone_summary["final_eval_loss"], rel=1e-9), cfg.name
        assert summary["diverged_step"] == -1
        assert summary["max_overlap_all"] < ROUNDING if cfg.rebalance == "project" else True


def test_a_diverged_run_is_recorded_and_leaves_the_others_untouched():
    good, bad = tiny(algorithm="sgd", lr=0.5), tiny(algorithm="sgd", lr=1e200, seed=1)
    (metrics, _), (bad_metrics, bad_summary) = train_batched([good, bad], progress=False)
    assert_same_run(metrics, train(good, progress=False)[0])
    assert bad_summary["diverged_step"] >= 0 and math.isnan(bad_summary["final_eval_loss"])
    assert bad_metrics.loc[bad_metrics["step"] > bad_summary["diverged_step"], "loss"].isna().all()


def test_shared_second_moment_keeps_updates_orthogonal_without_first_moment_and_adam_does_not():
    """One second moment per symmetry block commutes with the group: with beta1 = 0 the update is a
    positive multiple of the gradient per block, orthogonal to the orbit; coordinatewise Adam is not."""
    spec = AttentionSpec(8, 2, n_kv_heads=1)
    ((shared, _),) = train_batched([tiny(attention=spec, algorithm="adam_shared", lr=0.01, beta1=0.0)], progress=False)
    ((adam, _),) = train_batched([tiny(attention=spec, algorithm="adam", lr=0.01, beta1=0.0)], progress=False)
    assert shared["overlap_all"].max() < ROUNDING
    assert adam["overlap_all"].mean() > 1e-2


@pytest.mark.parametrize("model, spec", [("llama", AttentionSpec(8, 4, n_kv_heads=2, rope_dims="full", causal=True)),
                                         ("gpt2", AttentionSpec(8, 2, biases="qkvo", causal=True))])  # fmt: skip
def test_shared_second_moment_is_orthogonal_inside_real_architectures(model, spec):
    """Through the attention maps the symmetry blocks of Llama's and GPT-2's attention layers are found, so
    adam_shared with beta1 = 0 keeps every attention layer's update orthogonal to its orbit there too."""
    cfg = tiny(task="recall", model=model, attention=spec, algorithm="adam_shared", lr=0.01, beta1=0.0, steps=6)
    ((shared, _),) = train_batched([cfg], progress=False)
    ((adam, _),) = train_batched([cfg.with_(algorithm="adam")], progress=False)
    assert shared["overlap_all"].max() < ROUNDING
    assert adam["overlap_all"].mean() > 1e-2


def test_symmetry_blocks_partition_each_group_into_query_key_and_value_output():
    spec = AttentionSpec(8, 4, n_kv_heads=2, biases="qko")
    ids, n = symmetry_blocks(spec)
    layout = Layout(spec)
    w = layout.unflatten(ids)
    assert n == 2 * 2 + 8 and ids.unique().numel() == n
    assert (
        (w["W_Q"][:2] == 0).all()
        and (w["W_Q"][2:] == 1).all()
        and (w["W_K"][1] == 1).all()
        and (w["b_Q"][3] == 1).all()
    )
    assert (w["W_V"][0] == 2).all() and (w["W_O"][:2] == 2).all() and (w["W_V"][1] == 3).all()
    assert sorted(w["b_O"].tolist()) == list(range(4, 12))
    # a value bias trades against b_O across the groups: the value-output side is one block
    ids, n = symmetry_blocks(AttentionSpec(8, 4, n_kv_heads=2, biases="qkvo"))
    w = Layout(AttentionSpec(8, 4, n_kv_heads=2, biases="qkvo")).unflatten(ids)
    assert n == 3 and all((w[b] == 2).all() for b in ("W_V", "b_V", "W_O", "b_O")) and (w["b_K"][1] == 1).all()


def test_gauge_overlap_does_not_depend_on_the_point_of_the_orbit():
    spec = AttentionSpec(8, 2)
    g = torch.Generator().manual_seed(0)
    theta = Layout(spec).init(g)[None]
    u = torch.randn(theta.shape, generator=g, dtype=torch.float64)
    qk, vo = symmetry.group_element(spec, g, scale=0.4)
    moved, carried = symmetry.act(spec, theta, qk, vo), symmetry.act(spec, u, qk, vo)  # the action is linear
    euclid = lambda t, x: symmetry.project(spec, t[0], x[0]).norm() / x.norm()
    assert abs(euclid(moved, carried) - euclid(theta, u)) > 1e-2  # the Euclidean overlap moves with the gauge
    assert gauge_overlap(spec, moved, carried).item() == pytest.approx(gauge_overlap(spec, theta, u).item(), rel=1e-8)


def test_gauge_overlap_is_nan_only_where_the_balanced_point_is_out_of_reach():
    """A run whose W_Q has lost rank has no invertible group element to its balanced point: NaN for it, the
    others measured as on their own (no exception for the whole batch)."""
    spec = AttentionSpec(8, 1)
    g = torch.Generator().manual_seed(1)
    theta = torch.stack([Layout(spec).init(g) for _ in range(3)])
    u = torch.randn(theta.shape, generator=g, dtype=torch.float64)
    w = Layout(spec).unflatten(theta[1])
    w["W_Q"][:, 0] = 0  # rank 7 of 8: the square query map is singular
    theta[1] = Layout(spec).flatten(w)
    out = gauge_overlap(spec, theta, u)
    assert math.isnan(out[1]) and not math.isnan(out[0]) and not math.isnan(out[2])
    assert out[2].item() == pytest.approx(gauge_overlap(spec, theta[2:], u[2:]).item(), rel=1e-12)


def test_weight_decay_shrinks_the_conserved_quantity_by_the_square_of_the_decay_factor():
    """I(theta - eta (g + lambda theta)) = (1 - eta lambda)^2 I(theta) + eta^2 (G_Q^T G_Q - G_K^T G_K): the
    cross term is the pairing of the gradient with the orbit, zero for an invariant loss."""
    cfg = tiny(algorithm="sgd", lr=0.3, weight_decay=0.2, steps=1, metrics_every=1)
    task, net, theta = build(cfg)
    batch = task.train_batch(cfg.batch)
    theta = theta.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(task.loss(net(theta, batch.inputs), batch), [theta])
    new = theta.detach() - cfg.lr * (grad + cfg.weight_decay * theta.detach())
    gram = lambda x: symmetry.imbalance(cfg.attention, x)["query_key"]
    w = Layout(cfg.attention).unflatten(grad)
    G_Q, G_K = symmetry.qk_stack(cfg.attention, w)
    predicted = (1 - cfg.lr * cfg.weight_decay) ** 2 * gram(theta.detach()) + cfg.lr**2 * (G_Q.mT @ G_Q - G_K.mT @ G_K)
    assert torch.allclose(gram(new), predicted, rtol=1e-10, atol=1e-13)


def test_t_interval_and_slopes():
    assert analysis.t_interval([1.0, 2.0, 3.0]) == pytest.approx((2 - 4.303 / math.sqrt(3), 2 + 4.303 / math.sqrt(3)))
    assert math.isnan(analysis.t_interval([1.0])[0])
    lr = pd.DataFrame({"seed": [0] * 3, "lr": [0.1, 0.2, 0.4], "final_drift_query_key": [1.0, 4.0, 16.0],
                       "final_drift_value_output": [2.0, 8.0, 32.0], "diverged": False})  # fmt: skip
    assert analysis.lr_slopes(lr)["slope"].to_numpy() == pytest.approx([2.0, 2.0])


def test_steps_to_target_and_paired_differences():
    steps = np.arange(60)
    rows = []
    for mode, rate in (("none", 0.1), ("balance", 0.2)):
        rows.append(
            pd.DataFrame(
                {
                    "task": "t",
                    "model": "own",
                    "optimizer": "o",
                    "rebalance": mode,
                    "heads": 2,
                    "seed": 0,
                    "step": steps,
                    "loss": np.exp(-rate * steps),
                }
            )
        )
    metrics = pd.concat(rows)
    target = analysis.steps_to_target(metrics, 0.1).set_index("rebalance")["steps_to_target"]
    assert target["balance"] < target["none"] < 60
    summary = target.reset_index().assign(task="t", model="own", optimizer="o", heads=2, seed=0, diverged=False)
    summary["final_eval_loss"] = summary["rebalance"].map({"none": 1.0, "balance": 0.1})
    diffs = analysis.paired_differences(summary)
    assert diffs["log_eval_loss"].tolist() == pytest.approx([-1.0]) and diffs["rebalance"].tolist() == ["balance"]


def test_sanity_checks_leave_diverged_runs_out():
    summary = pd.DataFrame([
        {"algorithm": "sgd", "weight_decay": 0.0, "rebalance": "none", "max_overlap_all": 1e-15, "mean_overlap_all": 1e-15, "max_rebalance_function_change": math.nan, "diverged": False},
        {"algorithm": "sgd", "weight_decay": 0.0, "rebalance": "none", "max_overlap_all": math.nan, "mean_overlap_all": math.nan, "max_rebalance_function_change": math.nan, "diverged": True},
    ])  # fmt: skip
    checks = sanity_checks(summary, rounding=1e-9, nonzero=1e-3)
    assert checks["passed"].all() and checks.loc[0, "runs"] == 1


@pytest.mark.parametrize("preset", ["config.yaml", "smoke.yaml", "paper.yaml", "large.yaml"])
def test_presets_validate_and_every_run_has_a_config(preset):
    from snakemake.utils import update_config, validate

    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())  # a preset overrides the default key by key,
    update_config(config, yaml.safe_load((ROOT / "config" / preset).read_text()))  # as `--configfile` does
    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    training = config["training"]
    all_runs = runs(training)
    assert len(all_runs) == len({tuple(r.values()) for r in all_runs}) > 0
    assert sum(len(runs(training, **j)) for j in jobs(training)) == len(all_runs)
    for r in all_runs:
        cfg = run_config(job_params(training, r["task"], r["model"], r["heads"]), "cpu", corpus="corpus", **r)
        assert cfg.attention.n_heads == r["heads"] and cfg.name.startswith(r["task"])
        assert cfg.corpus == ("corpus" if cfg.task == "text" else "")  # only a text run reads the corpus
    optimizers = {(s["task"], s.get("model", "own")): [o["name"] for o in s["optimizers"]] for s in training["tasks"]}
    assert len({tuple(names) for names in optimizers.values()}) == 1  # the same optimizer set on every task
    assert len(training["seeds"]) >= {"smoke.yaml": 1, "config.yaml": 3}.get(preset, 10)


def test_schema_rejects_unknown_training_keys_by_name():
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["training"]["tasks"][0]["optimizers"][0]["learning_rate"] = 0.1
    with pytest.raises(WorkflowError, match="learning_rate"):
        validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["training"]["tasks"][0]["attention"]["heads"] = 4  # n_heads is swept by `heads`, not a spec key here
    with pytest.raises(WorkflowError, match="heads"):
        validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))


def test_the_run_list_imports_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import yaml\nfrom attnid.training.runs import jobs, runs, run_config\n"
        f"t = yaml.safe_load(open({str(ROOT / 'config/config.yaml')!r}))['training']\n"
        "print(len(jobs(t)), len(runs(t)), run_config(t, 'cpu', **runs(t)[0]).attention.label)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[2].startswith("d8_h1")


def test_train_job_script_writes_both_tables_and_records_divergence(tmp_path):
    import resource
    import runpy
    from types import SimpleNamespace

    training = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())["training"]
    section = training["tasks"][0]
    section["heads"] = [2]
    section["optimizers"] = [{"name": "sgd", "algorithm": "sgd", "lr": 1e200}]
    training["seeds"], training["rebalance"] = [0], ["none", "project"]
    wildcards = SimpleNamespace(task="teacher_student", model="own", heads="2")
    fake = SimpleNamespace(
        log=[str(tmp_path / "job.log")], threads=1, wildcards=wildcards, input={},  # no corpus: not a text job
        params=SimpleNamespace(training=training, device="cpu"),
        output=SimpleNamespace(metrics=str(tmp_path / "m.parquet"), summary=str(tmp_path / "s.parquet")),
    )  # fmt: skip
    stderr = sys.stderr
    try:
        runpy.run_path(str(ROOT / "workflow/scripts/train_job.py"), init_globals={"snakemake": fake})
    finally:
        sys.stderr.close()
        sys.stderr = stderr
    summary = pd.read_parquet(fake.output.summary)
    assert len(summary) == 2 and summary["diverged"].all()
    log = Path(fake.log[0]).read_text()
    assert "diverged at step" in log
    # the log's last line: the process's own CPU seconds (Snakemake's sampled cpu_time misses a job's end)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    assert 0 < logged_job_cpu(log) <= usage.ru_utime + usage.ru_stime
    assert log.rstrip().splitlines()[-1].startswith(JOB_CPU_LINE)
    assert logged_job_cpu("10 runs in 1.0 s\n") is None
    columns = ["task", "model", "optimizer", "rebalance", "heads", "seed"]
    assert list(pd.read_parquet(fake.output.metrics).columns[:6]) == columns
