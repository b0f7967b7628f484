"""Training: tasks (their loss floors), models, the trainer's measurements on one run, determinism, divergence.

Runs are tiny (d_model 8, tens of steps, float64) so the whole file takes seconds.
"""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from training_helpers import ROUNDING, one_thread, tiny  # noqa: F401 - one_thread: autouse fixture

from attnid import symmetry
from attnid.layer.spec import AttentionSpec
from attnid.training.batched import train_batched
from attnid.training.models import TinyTransformer
from attnid.training.nets import build
from attnid.training.runs import METRIC_COLUMNS, RunConfig, measured_steps
from attnid.training.tasks import AssociativeRecall, MarkovChain, TeacherStudent, generator, next_token_loss

ROOT = Path(__file__).resolve().parents[1]
CONTRACT_METRICS = [
    "task", "model", "optimizer", "rebalance", "heads", "seed", "layer", "step", "loss", "eval_loss",
    "eval_accuracy", "update_norm", "overlap_all", "overlap_query_key", "overlap_value_output", "overlap_gauge",
    "drift_query_key", "drift_value_output", "imbalance_query_key", "imbalance_value_output",
    "rebalance_function_change", "rebalance_norm_removed",
]  # fmt: skip


def random_group_action(spec, theta, seed=0):
    """theta moved along its orbit by a random group element (symmetry.act)."""
    g = torch.Generator().manual_seed(seed)
    eye = lambda n: torch.eye(n, dtype=torch.float64)
    qk = eye(spec.d_head_qk) + 0.3 * torch.randn(
        spec.G, spec.d_head_qk, spec.d_head_qk, generator=g, dtype=torch.float64
    )
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


def test_label_noise_gives_the_teacher_student_loss_its_floor():
    """The teacher itself scores the noise variance (sigma s)^2 on held-out data, s the RMS of its outputs."""
    spec = AttentionSpec(d_model=8, n_heads=2)
    task = TeacherStudent(spec, seq_len=5, seed=0, noise=0.2)
    batch = task.fixed_batch(2048)
    with torch.no_grad():
        clean = task.teacher(batch.inputs)
    assert task.loss_floor == pytest.approx(0.04 * clean.pow(2).mean().item(), rel=0.15)  # s from 256 sequences
    assert task.loss(clean, batch).item() == pytest.approx(task.loss_floor, rel=0.05)
    assert TeacherStudent(spec, 5, 0).loss_floor == 0.0
    assert torch.equal(TeacherStudent(spec, 5, 0, noise=0.2).fixed_batch(4).targets, task.fixed_batch(4).targets)


def test_markov_chain_loss_floor_is_its_entropy_rate():
    """Sequences start stationary; the chain's own next-token probabilities score the entropy rate."""
    task = MarkovChain(vocab=5, order=2, alpha=0.5, seq_len=9, seed=3)
    assert task.transition.sum(-1).allclose(torch.ones(25, dtype=torch.float64))
    tokens = task.fixed_batch(8192).inputs  # (B, T)
    assert tokens.shape == (8192, 9) and int(tokens.max()) < 5
    context = tokens[:, :-2] * 5 + tokens[:, 1:-1]  # (B, T - 2): the context of tokens 2..T-1
    nll = -task.transition[context, tokens[:, 2:]].log()
    assert nll.mean().item() == pytest.approx(task.loss_floor, rel=0.02)
    pair = torch.bincount(context[:, 3], minlength=25).double() / 8192  # a late position is still stationary
    assert (pair - task.stationary).abs().max() < 0.02
    logits = torch.zeros(8192, 9, 5, dtype=torch.float64)  # uniform prediction: log V
    assert task.loss(logits, task.fixed_batch(8192)).item() == pytest.approx(math.log(5))
    first = [task.train_batch(4).inputs for _ in range(3)]
    again = MarkovChain(5, 2, 0.5, 9, seed=3)
    assert all(torch.equal(a, again.train_batch(4).inputs) for a in first)


@pytest.mark.parametrize("start", [1, 2])
def test_next_token_loss_is_the_cross_entropy_of_each_complete_context(start):
    """Position t - 1's logits score token t, for t = start..T-1 only, averaged per sequence; the same as
    F.cross_entropy position by position, value and gradient, and under vmap over runs."""
    g = torch.Generator().manual_seed(start)
    logits = torch.randn(3, 4, 7, 11, generator=g, dtype=torch.float64, requires_grad=True)  # (R, B, T, V)
    tokens = torch.randint(11, (3, 4, 7), generator=g)  # (R, B, T)
    by_position = torch.stack([
        torch.nn.functional.cross_entropy(logits[:, :, t - 1].flatten(0, 1), tokens[:, :, t].flatten(), reduction="none")
        for t in range(start, 7)
    ], -1).view(3, 4, -1).mean(-1)  # fmt: skip
    ours = torch.func.vmap(lambda l, x: next_token_loss(l, x, start))(logits, tokens)  # (R, B)
    assert torch.allclose(ours, by_position, rtol=1e-14, atol=0)
    (grad,) = torch.autograd.grad(ours.sum(), logits, retain_graph=True)
    (expected,) = torch.autograd.grad(by_position.sum(), logits)
    assert torch.allclose(grad, expected, rtol=1e-13, atol=1e-16) and (grad[:, :, -1] == 0).all()
    assert (grad[:, :, : start - 1] == 0).all() and (grad[:, :, start - 1 : -1] != 0).all()
    # the trainer's transform: vmap(grad_and_value) over runs, the loss's closed-form gradient inside it
    per_run = lambda l, x: next_token_loss(l, x, start).sum()
    grads, values = torch.func.vmap(torch.func.grad_and_value(per_run))(logits.detach(), tokens)
    assert torch.allclose(grads, expected, rtol=1e-13, atol=1e-16)
    assert torch.allclose(values, by_position.sum(-1), rtol=1e-14, atol=0)


def test_teacher_student_loss_is_invariant_under_the_student_group():
    spec = AttentionSpec(d_model=8, n_heads=2)
    task = TeacherStudent(spec, seq_len=5, seed=0)
    batch = task.fixed_batch(16)
    theta = task.teacher.layout.init(generator(3, 0))
    moved = random_group_action(spec, theta)
    assert (moved - theta).norm() > 0.1
    from attnid.layer.forward import attention

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


@pytest.mark.parametrize(
    "spec",
    [
        AttentionSpec(8, 2, causal=True),
        AttentionSpec(8, 4, n_kv_heads=2, rope_dims="full", biases="qkvo", causal=True),
        AttentionSpec(8, 2, d_head_qk=6, d_head_v=3, qk_norm="rms_all", softcap=5.0, rope_dims=2),
        AttentionSpec(8, 2, sinks=True, causal=True),  # no last-row path: the full layer's last row
    ],
    ids=lambda s: s.label,
)
def test_last_position_forward_and_gradient_equal_the_full_model(spec):
    """last_only computes the last position's logits and every parameter's gradient of a loss that reads
    them exactly as the full forward does (up to summation order)."""
    torch.manual_seed(0)
    model = TinyTransformer(spec, n_tokens=12, seq_len=7, generator=generator(0, 0), mlp_ratio=2)
    tokens = torch.randint(0, 12, (5, 7), generator=generator(0, 1))
    full, last = model(tokens)[:, -1:], model(tokens, last_only=True)
    assert last.shape == (5, 1, 12)
    assert (last - full).abs().max() <= 1e-12 * full.abs().max()
    weights = torch.randn(5, 1, 12, generator=generator(0, 2), dtype=torch.float64)
    grads = [torch.autograd.grad((out * weights).sum(), list(model.parameters())) for out in (full, last)]
    for name, g_full, g_last in zip(dict(model.named_parameters()), *grads):
        assert (g_last - g_full).abs().max() <= 1e-12 * g_full.abs().max(), name
    # the first block's attention matters through keys and values at every position
    assert grads[1][[n for n, _ in model.named_parameters()].index("blocks.0.attn.theta")].abs().max() > 1e-3


def test_a_float32_run_starts_from_the_float64_run_rounded():
    for task in ("teacher_student", "recall"):
        (task64, _, theta64), (task32, _, theta32) = (build(tiny(task=task, dtype=d)) for d in ("float64", "float32"))
        assert theta32.dtype == torch.float32 and torch.equal(theta32, theta64.float())
        b64, b32 = task64.train_batch(4), task32.train_batch(4)
        assert torch.equal(b32.inputs, b64.inputs.to(b32.inputs.dtype))
        assert b32.targets.dtype == b64.targets.dtype if task == "recall" else b32.targets.dtype == torch.float32


# --- the trainer on one run ----------------------------------------------------------------------


def train(cfg, progress=False):
    """(metrics, summary) of one run: the single-run case of the package's trainer (attnid.training.batched)."""
    ((metrics, summary),) = train_batched([cfg], progress=progress)
    return metrics, summary


def test_metrics_have_the_contract_columns_and_shapes():
    metrics, summary = train(tiny(task="recall", algorithm="adam", lr=1e-2), progress=False)
    assert list(metrics.columns) == list(METRIC_COLUMNS) == CONTRACT_METRICS[6:]
    assert len(metrics) == 12 * 2 and set(metrics["layer"]) == {0, 1}
    assert metrics["eval_loss"].notna().sum() == 2 * 4  # steps 0, 5, 10 and the last
    assert metrics["eval_accuracy"].between(0, 1).sum() == 8
    assert metrics[["loss", "update_norm", "overlap_all", "drift_query_key", "overlap_gauge"]].notna().all().all()
    assert metrics["rebalance_function_change"].isna().all()
    spec = tiny().attention
    assert summary["chance_all"] == pytest.approx(math.sqrt(symmetry.subspace_dim(spec) / 4 / spec.d_model**2))
    assert summary["final_eval_accuracy"] >= 0 and summary["steps"] == 12
    assert math.isfinite(summary["plateau_change"]) and summary["loss_floor"] == 0.0


def test_plain_sgd_has_zero_overlap_and_momentum_adam_weight_decay_do_not():
    overlap = {}
    for name, changes in {
        "sgd": {"algorithm": "sgd", "lr": 0.5},
        "sgd_wd": {"algorithm": "sgd", "lr": 0.5, "weight_decay": 0.05},
        "momentum": {"algorithm": "sgd_momentum", "lr": 0.05},
        "adam": {"algorithm": "adam", "lr": 0.01},
    }.items():
        metrics, _ = train(tiny(**changes), progress=False)
        overlap[name] = metrics["overlap_all"]
    assert overlap["sgd"].max() < ROUNDING
    assert overlap["sgd_wd"].min() > 1e-3
    assert overlap["momentum"].iloc[1:].min() > 1e-3  # step 0: the momentum buffer is the gradient itself
    assert overlap["adam"].mean() > 1e-2


def test_project_removes_the_tangent_part_and_reports_it():
    metrics, _ = train(tiny(algorithm="adam", lr=0.01, rebalance="project"), progress=False)
    assert metrics["overlap_all"].max() < ROUNDING
    assert metrics["overlap_query_key"].max() < ROUNDING and metrics["overlap_value_output"].max() < ROUNDING
    assert (metrics["rebalance_norm_removed"] > 1e-4).all()
    # the conserved quantities stay (nearly) conserved when every update is orthogonal to the orbit
    free, _ = train(tiny(algorithm="adam", lr=0.01), progress=False)
    assert metrics["drift_query_key"].iloc[-1] < 0.2 * free["drift_query_key"].iloc[-1]


def test_balance_keeps_the_function_and_zeroes_the_imbalance():
    metrics, summary = train(tiny(task="recall", algorithm="adam", lr=1e-2, rebalance="balance"), progress=False)
    events = metrics.dropna(subset=["rebalance_function_change"])
    assert sorted(events["step"].unique()) == [3, 7, 11]  # (t + 1) % 4 == 0
    assert len(events) == 3 * 2  # both layers at every rebalance
    assert events["rebalance_function_change"].max() < ROUNDING
    assert summary["max_rebalance_function_change"] < ROUNDING
    assert (events["rebalance_norm_removed"] >= -1e-12).all() and events["rebalance_norm_removed"].max() > 0


def test_same_config_gives_bit_identical_metrics():
    for cfg in (
        tiny(algorithm="adamw", lr=1e-2, weight_decay=0.1, rebalance="balance"),
        tiny(task="recall", algorithm="sgd_momentum", lr=0.05, rebalance="project"),
    ):
        first, _ = train(cfg, progress=False)
        second, _ = train(cfg, progress=False)
        pd.testing.assert_frame_equal(first, second, check_exact=True)
    other, _ = train(cfg.with_(seed=1), progress=False)
    assert not other["loss"].equals(second["loss"])


def test_divergence_is_recorded_at_its_step():
    """A run whose loss stops being finite is marked diverged at that step (the job's log names it:
    tests/test_batched.py), its held-out numbers and later measurements NaN, the ones before it kept."""
    cfg = tiny(algorithm="sgd", lr=1e200, name="ts/huge/none/h2/s0")
    metrics, summary = train(cfg)
    step = summary["diverged_step"]
    assert 0 <= step < cfg.steps and math.isnan(summary["final_eval_loss"])
    assert metrics.loc[metrics["step"] > step, "loss"].isna().all()
    assert metrics.loc[metrics["step"] < step, "loss"].notna().all()


def test_metrics_every_keeps_only_the_measured_steps_and_the_same_trajectory():
    every, _ = train(tiny(algorithm="adam", lr=0.01), progress=False)
    thinned, _ = train(tiny(algorithm="adam", lr=0.01, metrics_every=5, eval_every=10), progress=False)
    assert thinned["step"].tolist() == measured_steps(12, 5, 10) == [0, 5, 10, 11]
    same = every.set_index("step").loc[thinned["step"]]
    for column in ("overlap_all", "drift_query_key", "update_norm"):
        np.testing.assert_allclose(thinned[column], same[column], rtol=1e-12)
    # the training loss of a measured step is the mean over the steps since the previous one
    window = every["loss"].groupby(pd.cut(every["step"], [-1, 0, 5, 10, 11])).mean().to_numpy()
    np.testing.assert_allclose(thinned["loss"], window, rtol=1e-12)


def test_bad_run_config_names_the_field():
    with pytest.raises(ValueError, match="algorithm"):
        RunConfig(algorithm="lbfgs")
    with pytest.raises(ValueError, match="rebalance"):
        RunConfig(rebalance="sometimes")
    with pytest.raises(TypeError, match="attention"):
        RunConfig(attention={"d_model": 8, "n_heads": 2})


def test_run_config_holds_one_attention_spec():
    cfg = tiny(task="recall")
    assert cfg.heads == cfg.attention.n_heads == 2 and cfg.attention.causal
    assert AttentionSpec.from_config(cfg.to_dict()["attention"]) == cfg.attention
