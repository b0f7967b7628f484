"""The real `transformers` classes of the training study (attnid.training.archs): each block's attention, gathered
through the attention maps, is the module's own attention; Mixtral's experts vmap over runs and equal the module's
own forward, and the dense experts give transformers' batched_mm's and eager loop's losses and gradients; the
whole-model gauge of the training Mixtral; the initial scales by each weight's fan_in.
Tiny sizes, float64, one thread: seconds."""

import math

import pytest
import torch
from training_helpers import ROUNDING, one_thread, tiny  # noqa: F401 - one_thread: autouse fixture

from attnid.layer.forward import attention
from attnid.float64 import KeepFloat64
from attnid.hf.mapping import model_spec
from attnid.model.counting import count_model
from attnid.model.real import TINY, build_real
from attnid.layer.spec import AttentionSpec
from attnid.training import archs
from attnid.training.dense_experts import dense_experts_forward
from attnid.training.gauges import ModelGauge
from attnid.training.nets import Net, make_task

SPECS = {  # what attnid.training.runs.attention_spec fixes for each class, with GQA where the class has it
    "llama": AttentionSpec(8, 4, n_kv_heads=2, rope_dims="full", causal=True),
    "mixtral": AttentionSpec(8, 4, n_kv_heads=2, rope_dims="full", causal=True),
    "gpt2": AttentionSpec(8, 2, biases="qkvo", causal=True),
}
# head size 4 for the maps: at 2 the rotate_half pairing (dim j with j + k/2) is the identity
MAP_SPECS = SPECS | {m: AttentionSpec(16, 4, n_kv_heads=2, rope_dims="full", causal=True) for m in ("llama", "mixtral")}


def mixtral_net(**changes) -> Net:
    """A tiny Markov run on Mixtral: d_model 8, 4 heads in 2 groups, 2 blocks, 9 tokens (more than d_model: the
    whole-model gauge reads every embedding row), experts of width mlp_ratio d / 2 = 8."""
    return Net(tiny(task="markov", model="mixtral", attention=SPECS["mixtral"], vocab=9, seq_len=6, **changes))


def load(module: torch.nn.Module, net: Net, theta: torch.Tensor) -> None:
    """Write the run's theta (P,) into the module's own parameters."""
    with torch.no_grad():
        for (name, p), value in zip(module.named_parameters(), net.params(theta).values()):
            p.copy_(value)


def captured_call(module: torch.nn.Module, sub: torch.nn.Module, tokens: torch.Tensor) -> tuple:
    """(args, kwargs) the model passes its submodule `sub` (the mask, the rotary tables) on tokens (B, T)."""
    seen = {}
    handle = sub.register_forward_pre_hook(lambda m, a, k: seen.update(args=a, kwargs=dict(k)), with_kwargs=True)
    try:
        with torch.no_grad(), KeepFloat64():
            module(input_ids=tokens, use_cache=False)
    finally:
        handle.remove()
    return seen["args"], seen["kwargs"]


@pytest.mark.parametrize("model", list(SPECS))
def test_attention_maps_gather_each_blocks_own_attention(model):
    """attnid's layer at the gathered layout theta[map] equals the block's attention module on the same hidden
    states, with the mask and rotary tables the model gives it (so the map's RoPE pairing, GQA grouping,
    biases and output projection are right); a map that swapped two heads' rows would fail."""
    task = "markov" if model == "gpt2" else "recall"
    net = Net(tiny(task=task, model=model, attention=MAP_SPECS[model], **({"seq_len": 6} if task == "markov" else {})))
    theta = net.init(3)
    load(net.module, net, theta)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(make_task(net.cfg).n_tokens, (3, net.seq_len), generator=gen)
    x = torch.randn(3, net.seq_len, net.spec.d_model, generator=gen, dtype=torch.float64)  # (B, T, d)
    assert len(net.layers) == net.cfg.n_layers == 2
    for layer, index in enumerate(net.layers):
        sub = archs.attention_module(model, net.module, layer)
        args, kwargs = captured_call(net.module, sub, tokens)
        if args:
            args = (x, *args[1:])
        else:
            kwargs["hidden_states"] = x
        with torch.no_grad(), KeepFloat64():
            real = sub(*args, **kwargs)[0]  # (B, T, d)
        ours = attention(theta[index], x, net.spec)
        assert float((ours - real).abs().max() / real.abs().max()) < 1e-12, (model, layer)


def test_mixtral_experts_vmap_and_equal_the_modules_own_forward():
    """Three runs' losses and gradients through vmap(grad(functional_call)) equal each run's loss.backward() through
    the module's own forward at its own parameters, to rounding; under torch's deterministic mode (no
    kernel without a deterministic variant: it would raise) and bitwise the same on a second pass."""
    net = mixtral_net()
    assert net.module.config._experts_implementation == archs.EXPERTS_IMPLEMENTATION == "dense"
    experts = net.module.model.layers[0].mlp.experts
    assert experts.gate_up_proj.shape == (archs.N_EXPERTS, 2 * 8, 8) and experts.down_proj.shape == (4, 8, 8)
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(9, (4, net.seq_len), generator=gen)  # (B, T)

    def loss(theta):
        logits = net(theta, tokens, last_only=False)  # (B, T, V)
        return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 9), tokens[:, 1:].reshape(-1))

    thetas = torch.stack([net.init(s) for s in range(3)])  # (R, P)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        grads, losses = torch.func.vmap(torch.func.grad_and_value(loss))(thetas)
        again, _ = torch.func.vmap(torch.func.grad_and_value(loss))(thetas)
    finally:
        torch.use_deterministic_algorithms(before)
    assert torch.equal(grads, again)
    for theta, grad, value in zip(thetas, grads, losses):
        load(net.module, net, theta)
        net.module.zero_grad()
        with KeepFloat64():
            own = net.module(input_ids=tokens, labels=tokens, use_cache=False).loss  # shifts the labels itself
        own.backward()
        own_grad = torch.cat([p.grad.reshape(-1) for p in net.module.parameters()])
        assert float(value) == pytest.approx(float(own.detach()), rel=1e-13)
        assert float((grad - own_grad).norm() / own_grad.norm()) < 1e-12
        assert (experts.gate_up_proj.grad.flatten(1).norm(dim=1) > 0).all()  # every expert routed some tokens
    # the runs differ: batching did not read one run's parameters for another
    assert float((grads[0] - grads[1]).norm()) > 1e-3 * float(grads[0].norm())


def test_dense_experts_give_batched_mms_and_the_eager_loops_loss_and_gradient():
    """The dense experts (every expert on every token, attnid.training.dense_experts) against transformers' batched_mm
    (vmapped over three runs) and the class's own eager loop (per run, loss.backward()): the same losses and
    gradients to float64 rounding; GPT-OSS's experts (transposed, biases, its own clamped interleaved gate)
    against batched_mm on random routing, output and every input's gradient."""
    from transformers.integrations.moe import batched_mm_experts_forward

    net = mixtral_net()
    config = net.module.config
    gen = torch.Generator().manual_seed(2)
    tokens = torch.randint(9, (4, net.seq_len), generator=gen)  # (B, T)

    def loss(theta):
        logits = net(theta, tokens, last_only=False)  # (B, T, V)
        return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 9), tokens[:, 1:].reshape(-1))

    thetas = torch.stack([net.init(s) for s in range(3)])  # (R, P)
    out = {}
    try:
        for name in ("dense", "batched_mm"):
            config._experts_implementation = name
            out[name] = torch.func.vmap(torch.func.grad_and_value(loss))(thetas)  # (R, P), (R,)
        config._experts_implementation = "eager"
        grads, losses = [], []
        for theta in thetas:
            load(net.module, net, theta)
            net.module.zero_grad()
            with KeepFloat64():
                own = net.module(input_ids=tokens, labels=tokens, use_cache=False).loss
            own.backward()
            grads.append(torch.cat([p.grad.reshape(-1) for p in net.module.parameters()]))
            losses.append(own.detach())
        out["eager"] = torch.stack(grads), torch.stack(losses)
    finally:
        config._experts_implementation = archs.EXPERTS_IMPLEMENTATION
    grad, value = out["dense"]
    for name in ("batched_mm", "eager"):
        other_grad, other_value = out[name]
        assert float((value - other_value).abs().max()) < 1e-14, name
        assert float(((grad - other_grad).norm(dim=1) / other_grad.norm(dim=1)).max()) < 1e-13, name

    experts = build_real("gpt_oss_moe").module.model.layers[0].mlp.experts
    assert experts.is_transposed and experts.has_bias and not experts.is_concatenated
    n, d = 10, experts.gate_up_proj.shape[1]
    x = torch.randn(n, d, generator=gen, dtype=torch.float64, requires_grad=True)  # (N, d)
    index = torch.stack([torch.randperm(experts.num_experts, generator=gen)[:2] for _ in range(n)])  # (N, 2)
    weights = torch.rand(n, 2, generator=gen, dtype=torch.float64, requires_grad=True)  # (N, 2)
    inputs = (x, weights, *experts.parameters())
    cotangent = torch.randn(n, d, generator=gen, dtype=torch.float64)
    results = []
    for forward in (dense_experts_forward, batched_mm_experts_forward):
        y = forward(experts, x, index, weights)  # (N, d)
        results.append((y, torch.autograd.grad(y, inputs, cotangent)))
    (y, dense_grads), (y_ref, ref_grads) = results
    assert float((y - y_ref).abs().max() / y_ref.abs().max()) < 1e-14
    for g, g_ref in zip(dense_grads, ref_grads):
        assert float((g - g_ref).abs().max()) <= 1e-14 * float(g_ref.abs().max())


def test_mixtral_whole_model_gauge_sees_the_plain_gradient_orthogonal_and_adam_not():
    """Gauge.for_hf_model on the training Mixtral builds; its dim is the whole-model count, with the experts' own
    sources (hidden-unit scalings per expert, the router's shift); the loss is invariant along the orbit, so the
    plain-SGD gradient's whole-model overlap is at rounding, while Adam's first step g / (|g| + eps) moves
    along it."""
    net = mixtral_net()
    gauge = ModelGauge(net)
    spec = model_spec(net.module.config.to_dict(), seq_len=net.seq_len)
    assert gauge.gauge.dim == count_model(spec).unidentified > 0
    breakdown = gauge.gauge.breakdown
    assert breakdown["moe_hidden_units"] == 2 * archs.N_EXPERTS * 8  # 2 blocks x 4 experts x width 8
    assert breakdown["moe_router"] > 0 and breakdown["attention"] > 0
    task = make_task(net.cfg)
    batch = task.train_batch(8)
    theta = net.init(0)
    grad = torch.func.grad(lambda th: task.loss(net(th, batch.inputs), batch))(theta)
    plain = gauge.overlap(theta, grad)
    assert plain["all"] < ROUNDING
    adam = gauge.overlap(theta, grad / (grad.abs() + 1e-8))
    assert adam["all"] > 1e-2 and adam["moe_hidden_units"] > 1e-3


def test_initial_weights_are_scaled_by_the_axis_they_read():
    """fan_in reads the input axis of every weight: a Linear's last, a Conv1D's first, Mixtral's stacked experts
    (E, out, in) their last, GPT-OSS's transposed ones (E, in, out) their middle; Mixtral's initial experts
    have variance 1 / fan_in (experts of width 16 != d_model 8, so a wrong axis would be off by 2)."""
    net = Net(tiny(task="markov", model="mixtral", attention=SPECS["mixtral"], vocab=9, seq_len=6, mlp_ratio=4))
    fans, d, F = archs.fan_in(net.module), 8, 16
    pre = "model.layers.0.mlp."
    assert (fans[pre + "gate.weight"], fans[pre + "experts.gate_up_proj"], fans[pre + "experts.down_proj"]) == (d, d, F)
    assert fans["model.layers.0.self_attn.o_proj.weight"] == d and fans["lm_head.weight"] == d
    gpt2 = Net(tiny(task="markov", model="gpt2", attention=SPECS["gpt2"], seq_len=6))
    assert archs.fan_in(gpt2.module)["transformer.h.0.mlp.c_proj.weight"] == 2 * 8  # Conv1D (in 2d, out d)
    oss = archs.fan_in(build_real("gpt_oss_moe").module)  # @use_experts_implementation(is_transposed=True)
    width = TINY["gpt_oss_moe"][1]["intermediate_size"]
    assert (oss["model.layers.0.mlp.experts.gate_up_proj"], oss["model.layers.0.mlp.experts.down_proj"]) == (8, width)
    params = archs.init_params(net.module, seed=0)
    for name in (pre + "experts.gate_up_proj", pre + "experts.down_proj"):  # 1,024 and 512 draws
        var = float(params[name].var()) * fans[name]
        assert var == pytest.approx(1.0, abs=0.2), name
    assert float(params[pre + "experts.down_proj"].var()) * d < 0.75  # not 1 / d_model
    assert all(math.isfinite(float(p.abs().max())) for p in params.values())


def test_a_mixtral_sweep_validates_and_gets_llamas_attention():
    """`model: mixtral` passes the schema and the config checks; its attention is Llama's (RoPE on every dim,
    causal, no biases); an odd head size is refused as for Llama (RoPE rotates pairs of dims)."""
    import copy

    import yaml
    from snakemake.utils import validate

    from attnid.training.runs import attention_spec, run_config, runs
    from attnid.workflow_config import semantic_errors

    with open("config/config.yaml") as f:
        config = yaml.safe_load(f)
    entry = {"task": "markov", "model": "mixtral", "attention": {"d_model": 8}, "heads": [2, 4], "vocab": 9,
             "order": 2, "alpha": 0.5, "seq_len": 6, "n_layers": 2, "mlp_ratio": 2, "batch": 4, "steps": 3,
             "optimizers": [{"name": "sgd", "algorithm": "sgd", "lr": 0.1}]}  # fmt: skip
    config["training"]["tasks"] = [entry]
    validate(copy.deepcopy(config), "workflow/schemas/config.schema.yaml")
    assert semantic_errors(config) == []
    spec = attention_spec(entry, 4)
    assert (spec.rope_dims, spec.causal, spec.biases, spec.d_head_qk) == (2, True, "", 2)  # RoPE on every dim
    (key,) = runs(config["training"] | {"seeds": [0], "rebalance": ["none"]}, "markov", "mixtral", 2)
    assert run_config(config["training"], "cpu", **key).model == "mixtral"
    config["training"]["tasks"] = [entry | {"attention": {"d_model": 12}, "heads": [4]}]  # head size 3
    (error,) = semantic_errors(config)
    assert "head size 3 is odd" in error


@pytest.mark.parametrize("model", list(SPECS))
def test_every_whole_model_source_of_a_training_class_has_a_printed_name(model):
    """The figures and tables name each source of the whole-model orbit (attnid.report.labels.SOURCE_NAMES); a
    source without a name would print its breakdown key."""
    from attnid.report.labels import SOURCE_NAMES

    net = Net(tiny(task="markov", model=model, attention=SPECS[model], vocab=9, seq_len=6))
    sources = {key for key, dim in ModelGauge(net).gauge.breakdown.items() if dim}
    assert sources and sources <= set(SOURCE_NAMES), sources - set(SOURCE_NAMES)
