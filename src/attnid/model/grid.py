"""The whole-model verification grid's Jacobian side: every count against the Jacobian of the logits, on this
project's model function (`own_spec`: the grid's cases) and on real `transformers` language models.

A case is measured at the spec's eps (rank of all logits over balanced random tokens, sized by
`attnid.model.judge.model_sizing`), on the first half of its sequences, at another seed, and, where a
norm has eps > 0, again at eps = 0 with the same weights and tokens: the difference is the weakly
identified dimension, reported with the singular values that carry it. `agree` needs all of it:
measured == count, the same on half the data and at the other seed, weak measured == weak count, and the
other side of the certificate when the caller passes one (`certify`; `attnid.gauge.cases` passes the explicit
generators at the measured point, `attnid.gauge.certificate`: rank == count, each with ||J t|| / (||J|| ||t||)
at rounding, and the weak ones the weak rank).
"""

from __future__ import annotations

import dataclasses
import time

import torch

from ..layer.spec import AttentionSpec, SpecError
from .blocks import LayerSpec, MLPSpec, MoESpec
from .counting import count_model
from .judge import (
    expert_need,
    gaussian_sketch,
    has_eps,
    measure_function,
    model_sizing,
    random_tokens,
    routed_tokens,
    sketch_rows,
)
from .spec import ModelSpec

# The base of every own case: vocab 12, 2 layers, d_model 8, 2 heads of 4, d_ff 8, 6 positions, eps 0.
BASE = {"vocab_size": 12, "n_layers": 2, "d_ff": 8, "max_positions": 6, "norm_eps": 0.0}
BASE_ATTENTION = {"d_model": 8, "n_heads": 2, "causal": True}


def own_spec(fields: dict) -> ModelSpec:
    """A ModelSpec from BASE overridden by `fields` (its `attention` a mapping of AttentionSpec fields); an
    optional `layers`, one mapping per block, overrides the case's attention fields (`attention`) and MLP
    fields (d_ff, mlp, mlp_bias) block by block; an optional `moe` (MoESpec fields) makes every block's MLP
    that mixture of experts."""
    fields = {**BASE, **fields}
    attention = {**BASE_ATTENTION, **(fields.pop("attention", None) or {})}
    per_layer = fields.pop("layers", None)
    moe = fields.pop("moe", None)
    if moe is not None:  # every block's MLP one mixture of experts (MoESpec fields)
        if per_layer:
            raise SpecError("moe", "give either moe (every block) or layers, not both")
        block = LayerSpec(AttentionSpec.from_config(attention), MoESpec.from_config(moe))
        return ModelSpec.from_layers([block] * fields.pop("n_layers"), **fields)
    if not per_layer:
        return ModelSpec(attention=AttentionSpec.from_config(attention), **fields)
    mlp = {"d_ff": fields.pop("d_ff"), "kind": fields.pop("mlp", "gelu"), "bias": fields.pop("mlp_bias", False)}
    fields.pop("n_layers", None)
    layers = []
    for i, over in enumerate(per_layer):
        unknown = set(over) - {"attention", "d_ff", "mlp", "mlp_bias"}
        if unknown:
            raise SpecError("layers", f"entry {i} has {sorted(unknown)}: only attention, d_ff, mlp, mlp_bias per layer")
        renamed = {"mlp": "kind", "mlp_bias": "bias"}
        block_mlp = MLPSpec(**{**mlp, **{renamed.get(k, k): v for k, v in over.items() if k != "attention"}})
        block_attention = AttentionSpec.from_config({**attention, **(over.get("attention") or {})})
        layers.append(LayerSpec(block_attention, block_mlp))
    return ModelSpec.from_layers(layers, **fields)


def verify_case(
    name: str, kind: str, spec: ModelSpec, make, seed: int = 0, oversample: float = 3.0, other_seed: bool = True,
    certify=None, sketch: bool = False,
) -> dict:
    """One row: `make(seed, eps_zero) -> (f, theta)` gives the function f(theta, tokens (T,)) -> (T, V);
    certify(theta, R, sigma_max) -> the generator side's columns (`attnid.gauge.certificate`) or None; sketch:
    measure the rank of a Gaussian sketch of each position's V logits to `sketch_rows` rows (`attnid.model.judge`;
    column sketch_rows, V when not sketched)."""
    start = time.perf_counter()
    counts = count_model(spec)
    sizing = model_sizing(spec, oversample)

    def draw(f, theta, token_seed):  # more sequences while an expert of our own MoE function is routed too few
        def tokens_of(batch):
            resized = dataclasses.replace(sizing, batch=batch)
            return random_tokens(spec, resized, torch.Generator().manual_seed(token_seed))

        return routed_tokens(spec, f, theta, tokens_of, sizing.batch, oversample)

    rows = sketch_rows(spec) if sketch else spec.vocab_size

    def sketch_of(tokens):
        return gaussian_sketch(tokens, spec.vocab_size, rows)

    f, theta = make(seed, False)
    tokens, fewest = draw(f, theta, seed + 1000)
    at = measure_function(f, theta, tokens, half=True, keep_factor=certify is not None, sketch=sketch_of(tokens))
    row = {"case": name, "kind": kind, "label": spec.label, "P": theta.numel(), "P_spec": spec.n_params}
    row["sketch_rows"] = rows
    row |= {"count": counts.unidentified, "measured": at["measured"], "measured_half": at["measured_half"]}
    row |= {"gap": at["gap"], "sigma_kept": at["sigma_kept"], "positions": at["positions"]}
    checks = []
    if fewest is not None:  # positions routed to the least used expert on the first half, and the need
        row |= {"expert_min_positions": fewest, "expert_need": expert_need(spec, oversample)}
        checks.append(fewest >= row["expert_need"])
    row |= {"weak_count": counts.weakly_identified, "weak_measured": 0}
    if has_eps(spec):
        f0, theta0 = make(seed, True)
        free = measure_function(f0, theta0, tokens, half=False, sketch=sketch_of(tokens))
        row["weak_measured"] = free["measured"] - at["measured"]
        if row["weak_measured"] > 0:
            kept = at["sigma"][at["rank"] - row["weak_measured"] : at["rank"]]
            row |= {"weak_sigma_min": float(kept.min()), "weak_sigma_max": float(kept.max())}
            row["sigma_kept"] = float(at["sigma"][at["rank"] - row["weak_measured"] - 1])  # smallest strong one
    checks += [row["P"] == row["P_spec"], at["measured"] == counts.unidentified, at["measured_half"] == at["measured"]]
    if other_seed:
        f1, theta1 = make(seed + 1, False)
        tokens1, _ = draw(f1, theta1, seed + 1001)
        row["measured_other_seed"] = measure_function(f1, theta1, tokens1, half=False, sketch=sketch_of(tokens1))[
            "measured"
        ]
        checks.append(row["measured_other_seed"] == at["measured"])
    checks.append(row["weak_measured"] == row["weak_count"])
    if certify is not None:
        row |= certify(theta, at.pop("R"), at["sigma_max"])
        if row["generators_agree"] is not None:  # None: no generators written for this range (the row says why)
            checks.append(row["generators_agree"])
    row["agree"] = bool(all(checks))
    row["seconds"] = time.perf_counter() - start
    return row
