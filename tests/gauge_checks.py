"""The upper side of a real class's whole-model certificate, shared by the tests of its families: at a generic
point of the tiny model (`attnid.hf.check`), the explicit generators of `Gauge.for_hf_model` have rank = the count,
and the logits do not move along their span."""

import torch

from attnid.float64 import KeepFloat64
from attnid.gauge import Gauge
from attnid.hf.check import real_class
from attnid.hf.mapping import text_config
from attnid.model.real import SEQ_LEN, build_real_model


def generic_model(tiny: dict) -> torch.nn.Module:
    """The real class of a tiny config at the self-check's generic float64 point."""
    real = build_real_model(real_class(tiny), tiny)
    with torch.no_grad():
        for p, value in zip(real.module.parameters(), real.layout.unflatten(real.theta).values(), strict=True):
            p.copy_(value)
    return real.module


def gauge_spans_the_count(tiny: dict, count: int) -> None:
    """Assert that the gauge of the tiny config's real class spans exactly `count` directions along which the
    logits do not move (relative to a random direction: below 1e-10)."""
    model = generic_model(tiny)
    g = Gauge.for_hf_model(model, seq_len=SEQ_LEN)
    assert g.dim == count and g.projection.rank == g.dim
    gen = torch.Generator().manual_seed(3)
    u = {n: torch.randn(p.shape, generator=gen, dtype=p.dtype) for n, p in model.named_parameters()}
    pu = g.project(u)
    names = [n for n, _ in model.named_parameters()]
    tokens = torch.randint(text_config(tiny)["vocab_size"], (4, SEQ_LEN), generator=gen)

    def logits(*values):
        with KeepFloat64():
            params = dict(zip(names, values, strict=True))
            return torch.func.functional_call(model, params, (), {"input_ids": tokens, "use_cache": False}).logits

    primals = tuple(p.detach() for p in model.parameters())
    along = torch.func.jvp(logits, primals, tuple(pu[n] for n in names))[1]
    off = torch.func.jvp(logits, primals, tuple(u[n] for n in names))[1]
    assert float(along.norm() / off.norm()) < 1e-10
