"""The whole-model verification grid: every count against its Jacobian, on this project's model
function and on real `transformers` language models, plus the table of shipped real models.

A case is measured at the spec's eps (rank of all logits over balanced random tokens, sized by
`attnid.model.judge.model_sizing`), on the first half of its sequences, at another seed, and, where a
norm has eps > 0, again at eps = 0 with the same weights and tokens: the difference is the weakly
identified dimension, reported with the singular values that carry it. `agree` needs all of it:
measured == count, the same on half the data and at the other seed, weak measured == weak count, and the
other side of the certificate (`attnid.gauge.certificate`): the explicit generators at the measured point
have rank == count, each with ||J t|| / (||J|| ||t||) at rounding, and the weak ones the weak rank.
With torch threads >= 2 the table measures two cases at a time, each on one thread.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor

import torch

from ..spec import AttentionSpec, SpecError
from .blocks import LayerSpec, MLPSpec, MoESpec
from .counting import count_model
from .forward import logits
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
from .layout import ModelLayout
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


def own_case(name: str, spec: ModelSpec, **options) -> dict:
    layout = ModelLayout(spec)

    def make(seed, eps_zero):
        s = spec.with_eps(0.0) if eps_zero else spec
        theta = layout.init(torch.Generator().manual_seed(seed))
        return (lambda th, tok: logits(th, tok, s, layout)), theta

    def certify(theta, R, sigma_max):
        from ..gauge.certificate import certificate

        return certificate(spec, theta, R, sigma_max)

    return verify_case(name, "own", spec, make, certify=certify, **options)


def real_case(name: str, **options) -> dict:
    from .real import TINY, build_real, tiny_spec

    spec = tiny_spec(name)

    def make(seed, eps_zero):
        real = build_real(name, seed, eps=0.0 if eps_zero else None)
        return real.forward, real.theta

    def certify(theta, R, sigma_max):
        from ..gauge.certificate import real_certificate

        return real_certificate(name, spec, theta, R, sigma_max)

    row = verify_case(name, "transformers", spec, make, certify=certify, **options)
    return {**row, "model_class": TINY[name][0]}


def verify_models(
    own: list[dict],
    real: list[str],
    seed: int = 0,
    oversample: float = 3.0,
    other_seed: bool = True,
    real_other_seed: bool = True,
    log=print,
):
    """One row per case: own cases {name, ...ModelSpec fields over BASE}, real cases by TINY name;
    other_seed / real_other_seed: re-measure the own / the real cases at another seed."""
    import pandas as pd

    options = {"seed": seed, "oversample": oversample, "other_seed": other_seed}
    jobs = [
        lambda case=case: own_case(case["name"], own_spec({k: v for k, v in case.items() if k != "name"}), **options)
        for case in own
    ]
    jobs += [lambda name=name: real_case(name, **{**options, "other_seed": real_other_seed}) for name in real]
    # With torch threads >= 2, two cases at a time, each single-threaded (its dense SVDs are serial
    # anyway); every case draws its own weights and tokens, so the rows do not depend on the order.
    threads = torch.get_num_threads()
    workers = min(2, threads, len(jobs))
    rows = []
    torch.set_num_threads(max(1, threads // max(workers, 1)))
    try:
        with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
            for future in [pool.submit(job) for job in jobs]:
                rows.append(future.result())
                _log_row(rows[-1], log)
    finally:
        torch.set_num_threads(threads)
    return pd.DataFrame(rows)


def _log_row(row: dict, log) -> None:
    log(
        f"{row['case']:18s} {row['kind']:12s} P={row['P']:5d} count={row['count']:4d} measured={row['measured']:4d}"
        f" (half {row['measured_half']}, seed {row.get('measured_other_seed', '-')}) weak {row['weak_count']}/{row['weak_measured']}"
        f" gap={row['gap']:.1f} generators {row.get('generator_rank', '-')} (Jt {row.get('generator_Jt', float('nan')):.0e})"
        f" {'ok' if row['agree'] else 'DISAGREE'} ({row['seconds']:.1f} s)"
    )


def model_disagreements(df) -> str:
    """'' if every row agrees, else one line per disagreeing case."""
    bad = df[~df["agree"].astype(bool)]
    return "\n".join(
        f"{r.case} ({r.label}): count {r.count} weak {r.weak_count}; measured {r.measured} weak {r.weak_measured}"
        f" half {r.measured_half}; P {r.P} vs spec {r.P_spec}; generators {getattr(r, 'generator_rank', '-')}"
        f" weak {getattr(r, 'weak_generator_rank', '-')} Jt {getattr(r, 'generator_Jt', float('nan')):.1e}"
        for r in bad.itertuples()
    )
