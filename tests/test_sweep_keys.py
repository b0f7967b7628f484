"""A task entry is one sweep: its `name` (one task kind swept twice by one model) and its width rule
(`attention.d_model`: a fixed width; `d_head`: a fixed head size, d_model = H d_head)."""

import copy

import pytest
import yaml

from attnid.training.runs import attention_spec, job_cost, job_params, jobs, run_config, runs
from attnid.workflow_config import semantic_errors

RECALL = {
    "task": "recall", "attention": {"d_model": 16, "causal": True}, "heads": [1, 2], "vocab": 6, "pairs": 2,
    "n_layers": 1, "mlp_ratio": 2, "batch": 4, "steps": 3,
    "optimizers": [{"name": "sgd", "algorithm": "sgd", "lr": 0.1}],
}  # fmt: skip


def _training(*tasks):
    with open("config/config.yaml") as f:
        training = yaml.safe_load(f)["training"]
    return training | {"seeds": [0], "rebalance": ["none"], "tasks": list(tasks)}


def _fixed_head(d_head=4, heads=(1, 2, 4)):
    entry = copy.deepcopy(RECALL) | {"name": "recall_fixed_head", "d_head": d_head, "heads": list(heads)}
    entry["attention"] = {"causal": True}
    return entry


def test_fixed_head_size_grows_the_width_with_the_head_count():
    entry = _fixed_head(d_head=4)
    for h in (1, 2, 4):
        spec = attention_spec(entry, h)
        assert (spec.d_model, spec.n_heads, spec.d_head_qk, spec.d_head_v) == (4 * h, h, 4, 4)
        assert spec.causal
    fixed = attention_spec(RECALL, 2)
    assert (fixed.d_model, fixed.d_head_qk) == (16, 8)


def test_one_task_swept_twice_by_one_model_keeps_its_kind():
    training = _training(RECALL, _fixed_head())
    assert [(j["task"], j["heads"]) for j in jobs(training)] == [
        ("recall", 1), ("recall", 2), ("recall_fixed_head", 1), ("recall_fixed_head", 2), ("recall_fixed_head", 4)
    ]  # fmt: skip
    keys = runs(training, "recall_fixed_head", "own", 4)
    assert len(keys) == 1 and keys[0]["task"] == "recall_fixed_head"
    cfg = run_config(training, "cpu", **keys[0])
    assert cfg.task == "recall" and cfg.attention.d_model == 16 and cfg.name.startswith("recall_fixed_head/")
    # the two sweeps at H = 2 differ in width: 16 fixed, 2 x 4 at the fixed head size
    widths = [run_config(training, "cpu", **runs(training, name, "own", 2)[0]).attention.d_model
              for name in ("recall", "recall_fixed_head")]  # fmt: skip
    assert widths == [16, 8]


def _config(*tasks):
    with open("config/config.yaml") as f:
        config = yaml.safe_load(f)
    config["training"]["tasks"] = list(tasks)
    return config


def test_width_rule_and_names_are_checked_with_the_key_named():
    assert semantic_errors(_config(RECALL, _fixed_head())) == []
    both = _fixed_head() | {"attention": {"d_model": 8}}
    neither = copy.deepcopy(RECALL)
    del neither["attention"]["d_model"]
    for bad in (both, neither):
        (error,) = semantic_errors(_config(bad))
        assert error.startswith("config training.tasks[0]: give exactly one of attention.d_model")
    twice = semantic_errors(_config(RECALL, copy.deepcopy(RECALL)))
    assert twice == ["config training.tasks[1]: a second sweep named 'recall' with model 'own' (give one of them a `name`)"]
    kind = semantic_errors(_config(RECALL, _fixed_head() | {"name": "markov"}))
    assert kind == ["config training.tasks[1].name: 'markov' is another task kind's name"]


@pytest.mark.parametrize("heads", [[3]])
def test_fixed_head_size_refuses_odd_rope_heads_for_llama(heads):
    entry = _fixed_head(d_head=3, heads=heads) | {"model": "llama"}
    (error,) = semantic_errors(_config(entry))
    assert "head size 3 is odd" in error


def test_a_sweep_may_run_its_own_seeds_and_rebalancing_modes():
    own = _fixed_head() | {"seeds": [3, 4], "rebalance": ["none", "balance"]}
    training = _training(RECALL, own) | {"seeds": [0, 1, 2], "rebalance": ["none", "project", "balance"]}
    assert len(runs(training, "recall", "own", 1)) == 3 * 3
    keys = runs(training, "recall_fixed_head", "own", 1)
    assert sorted({(k["rebalance"], k["seed"]) for k in keys}) == [("balance", 3), ("balance", 4), ("none", 3), ("none", 4)]


def test_an_optimizer_may_take_its_own_learning_rate_at_some_head_counts():
    own = _fixed_head(heads=(1, 2, 4))
    own["optimizers"] = [{"name": "sgd", "algorithm": "sgd", "lr": 0.1, "lr_at_heads": {4: 0.3}}]
    training = _training(own)
    lrs = {k["heads"]: run_config(training, "cpu", **k).lr for k in runs(training)}
    assert lrs == {1: 0.1, 2: 0.1, 4: 0.3}
    own["optimizers"][0]["lr_at_heads"] = {8: 0.3}  # not swept: named, not ignored
    assert semantic_errors({"training": training}) == [
        "config training.tasks[0].optimizers[0].lr_at_heads: head counts [8] are not in training.tasks[0].heads [1, 2, 4]"
    ]


def test_a_sweep_may_take_more_steps_at_some_head_counts():
    own = _fixed_head(heads=(1, 2, 4)) | {"steps_at_heads": {2: 7}}
    training = _training(own)
    steps = {k["heads"]: run_config(training, "cpu", **k).steps for k in runs(training)}
    assert steps == {1: 3, 2: 7, 4: 3}
    assert job_cost(training, "recall_fixed_head", "own", 2) > job_cost(training, "recall_fixed_head", "own", 1) * 2
    own["steps_at_heads"] = {8: 7}  # not swept: named, not ignored
    assert semantic_errors({"training": training}) == [
        "config training.tasks[0].steps_at_heads: head counts [8] are not in training.tasks[0].heads [1, 2, 4]"
    ]


def test_a_job_params_hold_its_own_steps_and_rates_only():
    """Editing the steps or the learning rate of one head count reruns that job only (the workflow's params)."""
    own = _fixed_head(heads=(1, 2, 4)) | {"steps_at_heads": {2: 7}}
    own["optimizers"] = [{"name": "sgd", "algorithm": "sgd", "lr": 0.1, "lr_at_heads": {4: 0.3}}]
    before = {h: job_params(_training(own), "recall_fixed_head", "own", h) for h in (1, 2, 4)}
    assert [before[h]["tasks"][0]["steps"] for h in (1, 2, 4)] == [3, 7, 3]
    assert [before[h]["tasks"][0]["optimizers"][0]["lr"] for h in (1, 2, 4)] == [0.1, 0.1, 0.3]
    edited = copy.deepcopy(own)
    edited["steps_at_heads"] = {2: 9}
    edited["optimizers"][0]["lr_at_heads"] = {4: 0.5}
    after = {h: job_params(_training(edited), "recall_fixed_head", "own", h) for h in (1, 2, 4)}
    assert after[1] == before[1] and after[2] != before[2] and after[4] != before[4]
    for h in (1, 2, 4):  # the job's runs are the same as those of the whole sweep's config
        whole = [run_config(_training(edited), "cpu", **k) for k in runs(_training(edited), heads=h)]
        alone = [run_config(after[h], "cpu", **k) for k in runs(after[h], heads=h)]
        assert whole == alone


def test_job_cost_orders_jobs_by_width_runs_and_steps():
    """The scheduling estimate: a wider job (fixed head size, more heads), more seeds or more steps cost more;
    at a fixed width the head count does not change the weights' work."""
    training = _training(RECALL, _fixed_head(heads=(1, 2, 4)))
    wide = [job_cost(training, "recall_fixed_head", "own", h) for h in (1, 2, 4)]
    assert wide[0] < wide[1] < wide[2] and wide[2] / wide[1] > 3  # d^2 grows 4x, the vocab's table 2x
    assert job_cost(training, "recall", "own", 1) == job_cost(training, "recall", "own", 2)
    longer = _training(RECALL | {"steps": 6})
    assert job_cost(longer, "recall", "own", 1) == 2 * job_cost(training, "recall", "own", 1)
    more = training | {"seeds": [0, 1, 2]}
    assert job_cost(more, "recall", "own", 1) == 3 * job_cost(training, "recall", "own", 1)


def test_a_sweep_may_set_its_own_measurement_cadence():
    own = _fixed_head() | {"eval_every": 7, "eval_batch": 12, "gauge_every": 5}
    training = _training(RECALL, own) | {"eval_every": 25, "eval_batch": 256}
    mine = run_config(training, "cpu", **runs(training, "recall_fixed_head", "own", 1)[0])
    other = run_config(training, "cpu", **runs(training, "recall", "own", 1)[0])
    assert (mine.eval_every, mine.eval_batch, mine.gauge_every) == (7, 12, 5)
    assert (other.eval_every, other.eval_batch) == (25, 256)


def test_the_whole_model_overlap_stops_above_its_orbit_dimension():
    from attnid.layer.spec import AttentionSpec
    from attnid.training.gauges import model_gauge
    from attnid.training.nets import Net
    from attnid.training.runs import RunConfig

    spec = AttentionSpec(d_model=8, n_heads=2, rope_dims="full", causal=True)
    net = Net(RunConfig(task="markov", model="llama", attention=spec, vocab=12, order=1, seq_len=6, n_layers=1))
    dim = model_gauge(net).gauge.dim
    assert model_gauge(net, max_dim=dim) is not None and model_gauge(net, max_dim=dim - 1) is None


@pytest.mark.parametrize("vocab, measured", [(9, True), (8, False), (5, False)])
def test_the_whole_model_overlap_is_left_out_where_the_counting_rules_refuse_the_model(vocab, measured, capsys):
    """A vocabulary no larger than d_model is beyond the whole-model counting rules (SpecError 'vocab_size'), so
    the run has no whole-model gauge (its overlaps NaN, as above its orbit dimension) instead of a failed job;
    one token more and it has one."""
    from attnid.layer.spec import AttentionSpec
    from attnid.errors import SpecError
    from attnid.hf.mapping import model_spec
    from attnid.model.counting.limits import check_countable
    from attnid.training.gauges import model_gauge
    from attnid.training.nets import Net
    from attnid.training.runs import RunConfig

    spec = AttentionSpec(d_model=8, n_heads=2, rope_dims="full", causal=True)
    net = Net(RunConfig(task="markov", model="llama", attention=spec, vocab=vocab, order=1, seq_len=6, n_layers=1))
    assert (model_gauge(net) is not None) == measured
    assert ("no whole-model overlap" in capsys.readouterr().err) == (not measured)  # the job's log says why
    if not measured:
        with pytest.raises(SpecError, match="vocab_size"):
            check_countable(model_spec(net.module.config.to_dict(), seq_len=net.seq_len))


def test_gpt2_refuses_grouped_keys_and_values():
    entry = copy.deepcopy(RECALL) | {"model": "gpt2", "kv_ratio": 2}
    (error,) = semantic_errors(_config(entry))
    assert error.startswith("config training.tasks[0].kv_ratio: GPT2LMHeadModel has no grouped keys")
