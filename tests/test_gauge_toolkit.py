"""The gauge toolkit (attnid.gauge.Gauge) on real transformers classes in float64: the name map, the projection
(idempotent, tangent: the logits do not move along it), a loss gradient's overlap at rounding, balance_
(same logits), the optimizer wrappers, the Trainer callback, LLaMA-3-8B's shapes on the meta device."""

import re
import time
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from attnid.float64 import KeepFloat64
from attnid.gauge import Gauge
from attnid.gauge.cases import tiny_spec
from attnid.gauge.name_map import name_map
from attnid.gauge.projected import GaugeCallback, GaugeProjected
from attnid.gauge.point import FineLayout
from attnid.hf import stored_config
from attnid.hf.mapping import model_spec
from attnid.model.counting import count_model
from attnid.model.forward import logits as own_logits
from attnid.model.real import TINY, build_real, build_real_model, real_config

ROOT = Path(__file__).resolve().parents[1]
_LLAMA = {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
          "num_key_value_heads": 1, "head_dim": 4, "max_position_embeddings": 64}  # fmt: skip
FAMILIES = {
    "llama": ("LlamaForCausalLM", {"model_type": "llama", "vocab_size": 16, "tie_word_embeddings": False, **_LLAMA}),
    "gpt2": ("GPT2LMHeadModel", {"model_type": "gpt2", "vocab_size": 16, "n_embd": 8, "n_head": 2, "n_layer": 2,
                                 "n_inner": 16, "n_positions": 6}),
    "qwen3": ("Qwen3ForCausalLM", {"model_type": "qwen3", "vocab_size": 16, "tie_word_embeddings": False, **_LLAMA}),
    "gemma2": ("Gemma2ForCausalLM", {"model_type": "gemma2", "vocab_size": 16, "query_pre_attn_scalar": 4,
                                     "hidden_activation": "gelu_pytorch_tanh", **_LLAMA}),
    "mixtral": ("MixtralForCausalLM", {"model_type": "mixtral", "vocab_size": 16, "tie_word_embeddings": False, **_LLAMA,
                                       "num_hidden_layers": 1, "intermediate_size": 4, "num_local_experts": 4,
                                       "num_experts_per_tok": 2}),
    "gpt_neox": ("GPTNeoXForCausalLM", {"model_type": "gpt_neox", "vocab_size": 32, "hidden_size": 8,
                                        "num_attention_heads": 2, "num_hidden_layers": 2, "intermediate_size": 8,
                                        "rotary_pct": 0.5, "max_position_embeddings": 64, "tie_word_embeddings": False}),
    "deepseek_v3": TINY["deepseek_v3_moe"],  # latent attention, a dense block, then routed and shared experts
}  # fmt: skip
SEQ = 6


def tiny(family: str, seed: int = 0):
    """A float64 model of the family at a generic point (its own parameters set to it)."""
    cls, cfg = FAMILIES[family]
    real = build_real_model(cls, cfg, seed)
    with torch.no_grad():
        for (name, p), value in zip(real.module.named_parameters(), real.layout.unflatten(real.theta).values()):
            p.copy_(value)
    return real.module, cfg


def model_logits(model, tokens, params=None):
    with KeepFloat64():
        if params is None:
            return model(input_ids=tokens, use_cache=False).logits
        return torch.func.functional_call(model, params, (), {"input_ids": tokens, "use_cache": False}).logits


def tokens_of(cfg, batch=4, seed=7):
    return torch.randint(cfg["vocab_size"], (batch, SEQ), generator=torch.Generator().manual_seed(seed))


def random_update(model, seed=3):
    gen = torch.Generator().manual_seed(seed)
    return {n: torch.randn(p.shape, generator=gen, dtype=p.dtype) for n, p in model.named_parameters()}


def directional(model, tokens, update):
    """d/dt logits(theta + t update) at 0."""
    names = [n for n, _ in model.named_parameters()]
    primals = tuple(p.detach() for _, p in model.named_parameters())

    def f(*values):
        return model_logits(model, tokens, dict(zip(names, values)))

    return torch.func.jvp(f, primals, tuple(update[n] for n in names))[1]


@pytest.mark.parametrize("name", sorted(TINY))
def test_name_map_is_a_permutation(name):
    """Every class parameter maps onto the layout's blocks exactly once and back (TINY's classes)."""
    spec, real = tiny_spec(name), build_real(name)
    fine = FineLayout(spec)
    nm = name_map(spec, TINY[name][1])
    nm.check(dict(zip(real.names, real.shapes)), fine)
    hf = real.layout.unflatten(real.theta)
    back = nm.to_hf(nm.to_fine(hf))
    assert all(torch.equal(back[n], hf[n]) for n in hf)


# where this project's forward computes what the class does (no GELU approximation, rotary tables, embedding
# normaliser or YaRN in between), its logits at the mapped point are the class's
MATCHING = ["llama_untied", "llama_bias", "qwen3", "qwen3_moe", "gpt_neox", "opt_post_ln", "bert_mlm", "deepseek_v3", "deepseek_v3_moe",
            "deepseek_v2", "falcon_free_table"]  # fmt: skip


@pytest.mark.parametrize("name", MATCHING)
def test_name_map_gives_the_class_logits(name):
    spec, real = tiny_spec(name), build_real(name)
    fine = FineLayout(spec)
    nm = name_map(spec, TINY[name][1])
    theta = fine.flatten(nm.to_fine(real.layout.unflatten(real.theta)))
    tokens = torch.randint(spec.vocab_size, (2, SEQ), generator=torch.Generator().manual_seed(0))
    ours, theirs = own_logits(theta, tokens, spec), real.forward(real.theta, tokens)
    assert float((ours - theirs).abs().max() / theirs.abs().max()) < 1e-8  # the classes' rotary tables: float32 frequencies


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_projection_is_the_orbit_tangent(family):
    """P u is idempotent, the logits' directional derivative along it is at rounding, u - P u is off the orbit."""
    model, cfg = tiny(family)
    g = Gauge.for_hf_model(model, seq_len=SEQ)
    assert g.dim == count_model(model_spec(cfg, seq_len=SEQ)).unidentified
    u = random_update(model)
    pu = g.project(u)
    ppu = g.project(pu)
    scale = max(float(t.abs().max()) for t in pu.values())
    assert max(float((ppu[n] - pu[n]).abs().max()) for n in pu) < 1e-11 * scale
    tokens = tokens_of(cfg)
    moved = float(directional(model, tokens, pu).norm() / directional(model, tokens, u).norm())
    assert moved < 1e-10
    rest = g.project({n: u[n] - pu[n] for n in u})
    assert max(float(t.abs().max()) for t in rest.values()) < 1e-11 * scale
    overlap = g.overlap(u)
    assert 0 < overlap["all"] < 1 and set(overlap) > {"all", "attention"}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_gradient_overlap_is_at_rounding(family):
    """A loss invariant under the group has its gradient orthogonal to the orbit."""
    model, cfg = tiny(family)
    g = Gauge.for_hf_model(model, seq_len=SEQ)
    tokens = tokens_of(cfg)
    with KeepFloat64():
        loss = model(input_ids=tokens, labels=tokens, use_cache=False).loss
    loss.backward()
    grad = {n: p.grad for n, p in model.named_parameters()}
    assert g.overlap(grad)["all"] < 1e-10


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_balance_keeps_the_logits(family):
    model, cfg = tiny(family)
    g = Gauge.for_hf_model(model, seq_len=SEQ)
    tokens = tokens_of(cfg)
    before = model_logits(model, tokens).detach()
    report = g.balance_(model)
    after = model_logits(model, tokens).detach()
    assert float((after - before).abs().max() / before.abs().max()) < 1e-9
    assert report["norm_after"] < report["norm_before"]
    assert report["residual"] < 1e-8, report


def test_projected_optimizer_removes_the_tangent_part():
    """GaugeProjected(Adam): the step applied is off the orbit at the point it started from; Adam's own is not."""
    model, cfg = tiny("llama")
    g = Gauge.for_hf_model(model, seq_len=SEQ)
    opt = GaugeProjected(torch.optim.Adam(model.parameters(), lr=1e-2), g, model)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)  # a scheduler takes the wrapper
    tokens = tokens_of(cfg)
    for _ in range(3):
        at = Gauge.for_hf_model(model, seq_len=SEQ)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt.zero_grad()
        with KeepFloat64():
            model(input_ids=tokens, labels=tokens, use_cache=False).loss.backward()
        opt.step()
        scheduler.step()
        applied = {n: p.detach() - before[n] for n, p in model.named_parameters()}
        assert at.overlap(applied)["all"] < 1e-10
    assert all(o["all"] > 1e-6 for o in opt.overlaps)  # Adam's preconditioning moves along the orbit
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-2 / 8)


def test_callback_in_the_trainer_loop_order():
    """GaugeCallback driven in the order Trainer calls it (pre-optimizer, optimizer.step, optimizer, step end)."""
    from transformers import TrainerControl, TrainerState

    model, cfg = tiny("llama")
    g = Gauge.for_hf_model(model, seq_len=SEQ)
    callback = GaugeCallback(g, balance_every=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    state, control, tokens = TrainerState(), TrainerControl(), tokens_of(cfg)
    for step in range(1, 4):
        at = Gauge.for_hf_model(model, seq_len=SEQ)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt.zero_grad()
        with KeepFloat64():
            model(input_ids=tokens, labels=tokens, use_cache=False).loss.backward()
        callback.on_pre_optimizer_step(None, state, control, model=model)
        opt.step()
        callback.on_optimizer_step(None, state, control, model=model)
        applied = {n: p.detach() - before[n] for n, p in model.named_parameters()}
        assert at.overlap(applied)["all"] < 1e-10
        state.global_step = step
        logits_before = model_logits(model, tokens).detach()
        callback.on_step_end(None, state, control, model=model)
        assert float((model_logits(model, tokens) - logits_before).abs().max() / logits_before.abs().max()) < 1e-9
    assert len(callback.overlaps) == 3 and len(callback.reports) == 1


def test_trainer_callback(tmp_path):
    pytest.importorskip("accelerate")  # the Trainer needs it
    model, cfg = tiny("llama")
    g = Gauge.for_hf_model(model, seq_len=SEQ)
    data = [{"input_ids": t, "labels": t} for t in tokens_of(cfg, batch=8)]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=3, per_device_train_batch_size=2, report_to=[], use_cpu=True,
        save_strategy="no", logging_strategy="no", learning_rate=1e-2,
    )  # fmt: skip
    callback = GaugeCallback(g, balance_every=2)
    transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[callback]).train()
    assert len(callback.overlaps) == 3 and len(callback.reports) == 1


def test_llama3_8b_shapes_on_the_meta_device():
    """The gauge of LLaMA-3-8B's shapes builds without weights and reports its dimension in seconds."""
    cfg = stored_config("llama3_8b")
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(real_config(cfg))
    start = time.perf_counter()
    g = Gauge.for_hf_model(model)
    seconds = time.perf_counter() - start
    assert g.dim == count_model(model_spec(cfg)).unidentified == 13_338_624
    assert g.breakdown["attention"] / g.dim == pytest.approx(0.317, abs=1e-3)
    assert seconds < 20


def test_readme_example_runs():
    """The README's 'Your own model' example: a tiny Llama trained a few steps, its overlaps printed."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Your own model", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 -- the README's own example, run as shown
    assert len(namespace["overlaps"]) == namespace["steps"]
