"""The whole-model generators (attnid.gauge): rank = count on every own grid case, each a fibre direction,
the structured operator against its dense matrix, the finite actions against their tangents."""

from pathlib import Path

import pytest
import torch
import yaml

from attnid.gauge.operator import Generators, Projection, orthonormal_rows
from attnid.gauge.point import Point
from attnid.gauge.sources import generators
from attnid.jacobian import RANK_RTOL
from attnid.model.counting import count_model
from attnid.model.forward import logits
from attnid.model.grid import own_spec
from attnid.model.judge import logits_jacobian
from attnid.model.layout import ModelLayout

ROOT = Path(__file__).resolve().parents[1]

OWN = {c.pop("name"): c for c in yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["whole_model"]["own"]}
FALLBACK = {"parallel_free_table"}  # first_mlp_table: no closed-form generators (test_free_table_directions_...)


def _case(name, seed=0):
    spec = own_spec(OWN[name])
    layout = ModelLayout(spec)
    theta = layout.init(torch.Generator().manual_seed(seed))
    point = Point(spec, theta)
    return spec, layout, theta, point, generators(point)


def _jacobian(spec, layout, theta, seqs=2):
    tokens = torch.randint(spec.vocab_size, (seqs, spec.seq_len), generator=torch.Generator().manual_seed(5))
    J = logits_jacobian(lambda th, tok: logits(th, tok, spec, layout), theta, tokens)
    return J, float(torch.linalg.matrix_norm(J, 2))


TIED_RAW = {"tied": True, "final_norm": False, "positions": "none"}
BIASES = {"attention": {"biases": "qkvo"}, "mlp_bias": True}
QWEN = {"positions": "rope", "norm": "rmsnorm", "norm_bias": False, "mlp": "swiglu", "n_layers": 1}
BERT = {"norm_position": "post", "final_norm": False, "embedding_norm": True, "attention": {"biases": "qkvo"},
        "mlp_bias": True, "token_types": 2, "mlm_head": True, "n_layers": 1}  # fmt: skip
MORE = {  # ranges beyond the grid: raw-stream constants and head biases, q/k norms on few tokens, BERT variants
    "pinned_value_biases": TIED_RAW,
    "pinned_three_layers": {**TIED_RAW, "n_layers": 3},
    "pinned_head_bias": {**TIED_RAW, **BIASES, "lm_head_bias": True},
    "raw_head_bias_rms": {**TIED_RAW, "norm": "rmsnorm", "norm_bias": False, **BIASES, "lm_head_bias": True},
    "offset_head_bias_tied": {"tied": True, "final_norm": False, **BIASES, "lm_head_bias": True, "n_layers": 1},
    "offset_head_bias_untied": {"final_norm": False, "positions": "none", "lm_head_bias": True, "mlp_bias": True},
    "qk_norm_few_tokens": {**QWEN, "vocab_size": 9, "attention": {"rope_dims": 4, "qk_norm": "rms_head", "norm_eps": 0.0}},
    "qk_norm_few_tokens_eps": {**QWEN, "vocab_size": 10, "attention": {"rope_dims": 4, "qk_norm": "rms_head"}},
    "bert_tied_no_beta": {**BERT, "tied": True, "lm_head_bias": True, "norm_bias": False},
    "bert_untied_eps": {**BERT, "lm_head_bias": True, "norm_eps": 1e-5},
}  # fmt: skip
OWN_AND_MORE = {**{k: v for k, v in OWN.items() if k not in FALLBACK}, **MORE}


@pytest.mark.parametrize("name", sorted(OWN_AND_MORE))
def test_generators_span_the_count(name):
    """Explicit generators: rank = count (per source too), every one a fibre direction of the logits."""
    spec = own_spec(OWN_AND_MORE[name])
    layout = ModelLayout(spec)
    theta = layout.init(torch.Generator().manual_seed(0))
    point = Point(spec, theta)
    groups = generators(point)
    counts = count_model(spec)
    ops = Generators(point.layout, groups)
    exact = [i for i, g in enumerate(groups) if not g.weak]
    T = ops.matrix(exact)
    _, info = orthonormal_rows(T)
    assert info["rank"] == counts.unidentified
    by_source = {}
    for i in exact:
        by_source.setdefault(groups[i].source, []).append(i)
    ranks = {s: orthonormal_rows(ops.matrix(ix))[1]["rank"] for s, ix in by_source.items()}
    assert ranks == {s: v for s, v in counts.breakdown.items() if v}, "a source's generators against its count"
    weak = [i for i, g in enumerate(groups) if g.weak]
    assert orthonormal_rows(torch.cat([T, ops.matrix(weak)]))[1]["rank"] - info["rank"] == counts.weakly_identified
    J, smax = _jacobian(spec, layout, theta)
    assert float(((J @ T.mT).norm(dim=0) / (smax * T.norm(dim=1))).max()) < RANK_RTOL


# one-block parallel models whose first MLP reaches its whole output table (tests/test_whole_model_layers.py's
# FIRST_MLP): the table's directions come from the per-token factorisation (attnid.gauge.sources.first_table)
PARALLEL = {"parallel": True, "positions": "none", "n_layers": 1}
FREE_TABLE = {
    "parallel_free_table": OWN["parallel_free_table"],
    "untied": {**PARALLEL, "vocab_size": 12},
    "untied_near_crossover": {**PARALLEL, "vocab_size": 24, "attention": {"d_model": 6}},
    "tied_rmsnorm": {**PARALLEL, "vocab_size": 12, "tied": True, "norm": "rmsnorm", "norm_bias": False},
    "tied_near_crossover": {**PARALLEL, "vocab_size": 19, "tied": True},
    "tied_shared_norm_gqa_rope": {**PARALLEL, "vocab_size": 12, "tied": True, "shared_norm": True, "positions": "rope",
                                  "attention": {"n_kv_heads": 1, "rope_dims": 2}},
    "biases_swiglu": {**PARALLEL, "vocab_size": 12, "attention": {"biases": "qkvo"}, "mlp": "swiglu", "mlp_bias": True},
    "tied_eps_below_quadric": {**PARALLEL, "vocab_size": 12, "tied": True, "norm_eps": 1e-5},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(FREE_TABLE))
def test_free_table_directions_complete_the_generators(name):
    """With the first MLP's free table the closed-form generators fall short of the count by at least the table's
    directions; the kernel of the per-token factorisation (found without the logits' Jacobian) completes them to
    the count, and every one of its directions is a fibre direction of the logits."""
    from attnid.gauge.sources.first_table import table_directions

    spec = own_spec(FREE_TABLE[name])
    layout = ModelLayout(spec)
    theta = layout.init(torch.Generator().manual_seed(0))
    point = Point(spec, theta)
    groups, counts = generators(point), count_model(spec)
    assert counts.breakdown["first_mlp_table"] > 0
    ops = Generators(point.layout, groups)
    T = ops.matrix([i for i, g in enumerate(groups) if not g.weak and not g.fallback])
    D, info = table_directions(point)
    closed = orthonormal_rows(T)[1]["rank"]
    assert closed <= counts.unidentified - counts.breakdown["first_mlp_table"]
    _, both = orthonormal_rows(torch.cat([T, D]))
    assert both["rank"] == counts.unidentified and both["gap"] > 6, both
    assert info["gap"] > 6, info  # the factorisation's own rank decision
    J, smax = _jacobian(spec, layout, theta, seqs=16)
    assert float(((J @ D.mT).norm(dim=0) / (smax * D.norm(dim=1))).max()) < RANK_RTOL


def test_free_table_before_more_blocks_is_left_to_the_jacobian():
    """With a second block the stream's invariances act through it: the factorisation is not written, and the
    certificate reads the table's directions off the Jacobian (one-sided)."""
    from attnid.gauge.sources.first_table import table_directions

    spec = own_spec({**FREE_TABLE["untied"], "n_layers": 2})
    point = Point(spec, ModelLayout(spec).init(torch.Generator().manual_seed(0)))
    assert count_model(spec).breakdown["first_mlp_table"] > 0
    assert table_directions(point) is None


@pytest.mark.parametrize("name", ["llama_like", "gpt_like", "layernorm_eps", "moe_mixtral_like", "latent_q_kv_eps",
                                  "post_ln_bert_like", "relu_no_final_norm"])  # fmt: skip
def test_operator_matches_its_matrix(name):
    """apply, adjoint and the Gram (the rotations' in closed form) against the dense matrix."""
    *_, point, groups = _case(name)
    ops = Generators(point.layout, [g for g in groups if not g.fallback])
    T = ops.matrix()
    c = torch.randn(ops.n, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    u = torch.randn(ops.P, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    assert torch.allclose(ops.apply(c), c @ T, atol=1e-12)
    assert torch.allclose(ops.adjoint(u), T @ u, atol=1e-11)
    K = ops.gram()
    assert torch.allclose(K, T @ T.mT, rtol=0, atol=1e-11 * float((T @ T.mT).abs().max()))
    proj = Projection(ops, K)
    pu = proj(u)
    assert torch.allclose(proj(pu), pu, atol=1e-10)  # idempotent
    assert float((T @ (u - pu)).abs().max()) < 1e-10 * float(u.norm() * T.norm(dim=1).max())  # u - P u is orthogonal


@pytest.mark.parametrize("name", ["llama_like", "gpt_like", "qwen3_like_eps", "latent_kv_h4", "moe_deepseek_like"])
def test_actions_are_symmetries_with_the_right_tangent(name):
    """Every group with a finite action: d/dc act at 0 is its tangent, and a finite step keeps the logits."""
    spec, layout, theta, point, groups = _case(name)
    tokens = torch.randint(spec.vocab_size, (2, spec.seq_len), generator=torch.Generator().manual_seed(3))
    before = logits(theta, tokens, spec, layout)
    acting = [g for g in groups if "action" in g.meta]
    assert acting
    for g in acting:
        c = 0.3 * torch.randn(g.n, dtype=torch.float64, generator=torch.Generator().manual_seed(4)) / g.n**0.5
        w = dict(point.w)

        def moved(c, g=g, w=w):
            return point.layout.flatten({**w, **g.meta["action"](w, c)})

        _, tangent = torch.func.jvp(moved, (torch.zeros(g.n, dtype=torch.float64),), (c,))
        expected = point.layout.flatten_partial(g.apply(c))
        assert torch.allclose(tangent, expected, atol=1e-12), g.name
        after = logits(moved(c), tokens, spec, layout)
        assert float((after - before).abs().max() / before.abs().max()) < 1e-12, g.name


def test_gauge_of_a_model_spec():
    """Gauge(spec, theta): dim from the count, a flat projection in the layout's order, weak directions on request."""
    from attnid.gauge import Gauge

    spec = own_spec(OWN["qwen3_like_eps"])
    theta = ModelLayout(spec).init(torch.Generator().manual_seed(0))
    counts = count_model(spec)
    g, gw = Gauge(spec, theta), Gauge(spec, theta, weak=True)
    assert (g.dim, gw.dim) == (counts.unidentified, counts.unidentified + counts.weakly_identified)
    u = torch.randn(spec.n_params, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    pu, pwu = g.project(u), gw.project(u)
    assert torch.allclose(g.project(pu), pu, atol=1e-11) and pwu.norm() > pu.norm()
    assert torch.allclose(g.project_out(u), u - pu, atol=1e-12)
