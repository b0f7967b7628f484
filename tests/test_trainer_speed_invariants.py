"""What the batched trainer's shortcuts must keep: the same numbers as the plain computation they replace.

The gauge-invariant overlap on its own cadence (`gauge_overlap_every`) is measured on exactly the steps the
cadence names and nowhere else, with the values the every-step run has there, and the rest of the run is
untouched; the whole-model overlap of many runs (`ModelGauge.overlaps`, the generators' rows and one solve per
run) equals the per-run overlap through the adjoint and one apply per source (`Gauge.overlap`), to rounding.
Tiny sizes, float64, one thread: seconds.
"""

import math

import numpy as np
import pytest
import torch
from training_helpers import one_thread, tiny  # noqa: F401 - one_thread: autouse fixture

from attnid.gauge import operator
from attnid.layer.layout import Layout
from attnid.layer.spec import AttentionSpec
from attnid.training.batched import BatchedRuns, overlap_gauge_steps, train_batched
from attnid.training.runs import METRIC_COLUMNS, RunConfig, run_config

REAL = [  # (task, model, spec, vocab): the whole-model gauge needs more tokens than d_model
    ("markov", "gpt2", AttentionSpec(8, 2, biases="qkvo", causal=True), 9),
    ("recall", "llama", AttentionSpec(8, 2, n_kv_heads=1, rope_dims="full", causal=True), 5),
]


def cadence_runs(**changes) -> list[RunConfig]:
    return [tiny(algorithm=a, rebalance=m, seed=s, lr=lr, name=f"{a}/{m}/{s}", **changes)
            for a, lr in (("sgd", 0.5), ("adam", 0.01)) for m in ("none", "project", "balance") for s in (0, 1)]  # fmt: skip


@pytest.mark.parametrize("metrics_every, every", [(1, 3), (2, 3), (1, 1)])
def test_gauge_overlap_cadence_keeps_exactly_its_steps_and_changes_nothing_else(metrics_every, every):
    """overlap_gauge is measured on the measured steps that are multiples of the cadence and the last, with the
    every-step run's values there; NaN elsewhere; every other column equal to the every-step run's."""
    cfgs = cadence_runs(metrics_every=metrics_every)
    full = train_batched(cfgs, progress=False)
    thinned = train_batched([c.with_(gauge_overlap_every=every) for c in cfgs], progress=False)
    steps = cfgs[0].steps
    for (a, _), (b, summary) in zip(full, thinned):
        measured = sorted(set(a["step"]))
        want = {t for t in measured if t % every == 0} | {steps - 1}
        assert set(b.loc[b["overlap_gauge"].notna(), "step"]) == want
        kept = b["step"].isin(want)
        np.testing.assert_array_equal(b.loc[kept, "overlap_gauge"], a.loc[kept, "overlap_gauge"])
        for column in METRIC_COLUMNS:
            if column != "overlap_gauge":
                np.testing.assert_array_equal(b[column].to_numpy(float), a[column].to_numpy(float), err_msg=column)
        assert summary["mean_overlap_gauge"] == pytest.approx(a.loc[kept, "overlap_gauge"].mean(), rel=1e-12)
    assert overlap_gauge_steps([0, 2, 3, 4, 6, 9, 11], 12, 3) == {0, 3, 6, 9, 11}


def test_gauge_overlap_cadence_comes_from_the_config_and_must_be_positive():
    training = {"seeds": [0], "rebalance": ["none"], "rebalance_interval": 10, "eval_every": 5, "eval_batch": 8,
                "probe_batch": 4, "metrics_every": 1, "gauge_overlap_every": 7, "dtype": "float64",
                "tasks": [{"task": "teacher_student", "attention": {"d_model": 8}, "heads": [2], "seq_len": 4,
                           "batch": 8, "steps": 20, "optimizers": [{"name": "sgd", "algorithm": "sgd", "lr": 0.1}]}]}  # fmt: skip
    cfg = run_config(training, "cpu", task="teacher_student", optimizer="sgd", rebalance="none", heads=2, seed=0)
    assert cfg.gauge_overlap_every == 7
    assert RunConfig().gauge_overlap_every == 1  # every measured step unless a preset says otherwise
    with pytest.raises(ValueError, match="gauge_overlap_every"):
        tiny(gauge_overlap_every=0)


@pytest.mark.parametrize("large", [None, 0, 3000], ids=["rows", "all-large", "some-large"])
@pytest.mark.parametrize("task, model, spec, vocab", REAL, ids=lambda x: x if isinstance(x, str) else "")
def test_batched_whole_model_overlap_equals_the_per_run_one(task, model, spec, vocab, large, monkeypatch):
    """ModelGauge.overlaps of several runs at their own points equals ModelGauge.overlap of each run through
    the plain path (adjoint, solve, one apply per source), source by source; also where some or all groups are
    large (LARGE_GROUP lowered: the Gram and the overlaps take their adjoint and apply, never their rows). The
    residual rotations, with a closed-form Gram, take that path at every size."""
    if large is not None:
        monkeypatch.setattr(operator, "LARGE_GROUP", large)
    extra = {"seq_len": 6} if task == "markov" else {}
    cfgs = [tiny(task=task, model=model, attention=spec, vocab=vocab, seed=s, **extra) for s in range(3)]
    state = BatchedRuns(cfgs)
    g = torch.Generator().manual_seed(0)
    theta = state.theta + 0.1 * torch.randn(state.theta.shape, generator=g, dtype=state.theta.dtype)  # generic points
    u = torch.randn(theta.shape, generator=g, dtype=theta.dtype)
    u[1] = state.optimizer.update(state.theta, state._gradients(0))[1]  # a gradient step
    batched = state.model_gauge.overlaps(theta, u)
    proj = state.model_gauge.gauge.projection
    n_large = sum(rows is None for rows in proj.rows())
    closed = sum(g.gram is not None for g in proj.T.groups)  # a closed-form Gram: through its adjoint at any size
    assert closed < len(proj.T.groups)
    assert n_large == {None: closed, 0: len(proj.T.groups)}.get(large, n_large) and (large != 3000 or closed < n_large < len(proj.T.groups))
    for m in range(len(cfgs)):
        alone = state.model_gauge.overlap(theta[m], u[m])
        assert list(batched) == list(alone)  # 'all' first, then the sources in the same order
        for source, value in alone.items():
            assert float(batched[source][m]) == pytest.approx(value, rel=1e-10, abs=1e-14), source
    assert all(0 < float(batched["all"][m]) < 1 for m in range(len(cfgs)))


def test_source_overlaps_of_a_zero_update_are_nan_and_of_a_tangent_are_one():
    """The dense path's edge cases: u = 0 has no overlap (NaN, as the plain path), and a tangent vector
    T^T c lies wholly in the span (overlap 1); its own source carries all of it."""
    task, model, spec, vocab = REAL[0]
    state = BatchedRuns([tiny(task=task, model=model, attention=spec, vocab=vocab, seq_len=6)])
    mg = state.model_gauge
    mg.overlap(state.theta[0], torch.ones_like(state.theta[0]))  # sets the point
    proj = mg.gauge.projection
    zero = proj.source_overlaps(torch.zeros(2, proj.T.P, dtype=torch.float64))
    assert all(math.isnan(v) for values in zero.values() for v in values.tolist())
    c = torch.zeros(proj.T.n, dtype=torch.float64)
    first = proj.T.slices()[0]
    c[first] = torch.randn(first.stop - first.start, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    tangent = proj.T.apply(c)
    out = proj.source_overlaps(tangent)
    assert float(out["all"]) == pytest.approx(1.0, rel=1e-10)
    assert float(out[proj.T.groups[0].source]) == pytest.approx(1.0, rel=1e-8)


def _batch_gradients(cfgs):
    """(the trainer's gradients and losses, vmap(grad_and_value)'s) of the runs `cfgs` away from their init."""
    from torch.func import grad_and_value, vmap

    state = BatchedRuns(cfgs)
    state.theta = state.theta + 0.3 * torch.randn(state.theta.shape, generator=torch.Generator().manual_seed(2),
                                                  dtype=state.theta.dtype)  # fmt: skip
    x, y = state.data.train(cfgs[0].batch)
    net, per_sample = state.net, state.task.per_sample_loss
    reference = vmap(grad_and_value(lambda th, x, y: per_sample(net(th, x), y).mean()))(state.theta, x, y)
    state.data.train = lambda *args: (x, y)  # the same batch for both
    plain = (state._gradients(0), state.meas.loss_sum.clone())
    state.theta[1:] *= 1.5  # every other run elsewhere: run 0's gradient is its own
    assert torch.equal(state._gradients(0)[0], plain[0][0])
    return plain, reference


@pytest.mark.parametrize("spec", [AttentionSpec(8, 1), AttentionSpec(8, 2), AttentionSpec(8, 8),
                                  AttentionSpec(8, 4, n_kv_heads=2, rope_dims="full", biases="qkvo", causal=True)],
                         ids=lambda s: s.label)  # fmt: skip
def test_the_teacher_students_plain_backward_is_bitwise_grad_and_value(spec):
    """The trainer takes one backward pass of the summed vmapped losses instead of vmap(grad_and_value): for the
    teacher-student layer the same gradients bit for bit."""
    cfgs = [tiny(attention=spec, seed=s, algorithm=a, noise=0.5) for s in (0, 1) for a in ("sgd", "adam")]
    (plain, loss), (grads, expected) = _batch_gradients(cfgs)
    assert torch.equal(plain, grads)
    assert torch.equal(loss, expected)


@pytest.mark.parametrize("model", ["own", "llama", "gpt2", "mixtral"])
def test_every_models_plain_backward_is_grad_and_value_to_rounding(model):
    """Through norms, MLPs, experts and the next-token loss's closed-form gradient the backward pass of the summed
    losses is vmap(grad_and_value)'s to rounding (other kernels), and a run's gradient is its own: bit for bit the
    same wherever the other runs are (`_batch_gradients`)."""
    spec = AttentionSpec(8, 2, causal=True) if model == "own" else {
        "llama": AttentionSpec(8, 4, n_kv_heads=2, rope_dims="full", causal=True), "gpt2": AttentionSpec(8, 2, biases="qkvo", causal=True),
        "mixtral": AttentionSpec(8, 4, n_kv_heads=2, rope_dims="full", causal=True)}[model]  # fmt: skip
    run = lambda seed, algorithm: tiny(task="markov", model=model, attention=spec, vocab=9, seq_len=6, order=1,
                                       n_layers=1, seed=seed, algorithm=algorithm)  # fmt: skip
    cfgs = [run(s, a) for s in (0, 1) for a in ("sgd", "adam")]
    (plain, loss), (grads, expected) = _batch_gradients(cfgs)
    assert torch.allclose(plain, grads, rtol=1e-12, atol=1e-15 * grads.abs().max())
    assert torch.allclose(loss, expected, rtol=1e-14, atol=0)


def test_the_optimizers_column_chunks_change_no_bit(monkeypatch):
    """The optimizer steps each range of runs one column chunk at a time (attnid.training.optim._column_chunks):
    every coordinate's arithmetic is the one of the whole row, so the updates are bitwise those of one chunk,
    for every algorithm, interleaved, with adam_shared's block means over the whole row (an attention layer in
    the middle of the vector, its blocks split across chunks)."""
    from attnid.training import optim

    spec = AttentionSpec(8, 4, n_kv_heads=2, biases="qkvo")
    layer = torch.arange(37, 37 + Layout(spec).size)
    size = int(layer[-1]) + 29
    algorithms = ["sgd", "adam_shared", "adam", "sgd_momentum", "adamw", "sgd", "adam_shared", "adam"]
    M = len(algorithms)
    hyper = {"lr": torch.linspace(0.01, 0.3, M), "weight_decay": torch.tensor([0.0, 0.1, 0.0, 0.01, 0.1, 0.001, 0.0, 0.02]),
             "momentum": torch.full((M,), 0.9), "beta1": torch.full((M,), 0.9), "beta2": torch.full((M,), 0.99)}  # fmt: skip
    shared = optim.shared_blocks([(spec, layer)], size)
    gen = torch.Generator().manual_seed(0)
    p0 = torch.randn(M, size, dtype=torch.float64, generator=gen)
    grads = [torch.randn(M, size, dtype=torch.float64, generator=gen) for _ in range(4)]

    def updates(chunk_bytes: int) -> list[torch.Tensor]:
        monkeypatch.setattr(optim, "CHUNK_BYTES", chunk_bytes)
        opt, p, out = optim.Optimizer(algorithms, hyper, shared), p0.clone(), []
        for g in grads:
            out.append(opt.update(p, g))
            p = p + out[-1]
        return out

    whole = updates(1 << 40)
    assert len(optim._column_chunks(2, size, 8)) == 1
    for chunk_bytes in (8, 24, 200):  # a range of 2 runs in chunks of 1, 1 and 12 columns: every block cut
        monkeypatch.setattr(optim, "CHUNK_BYTES", chunk_bytes)
        chunks = optim._column_chunks(2, size, 8)
        assert len(chunks) > 1 and torch.cat([torch.arange(size)[c] for c in chunks]).equal(torch.arange(size))
        for a, b in zip(whole, updates(chunk_bytes), strict=True):
            assert torch.equal(a, b)
