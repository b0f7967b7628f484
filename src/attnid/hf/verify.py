"""The judge on real code: P - rank of the Jacobian of a real `transformers` attention module vs `count`.

For one case (a stored published config, optional overrides, shrunk by
:func:`attnid.hf.modules.shrink`), the config is mapped to a ModelSpec (`attnid.hf.mapping`), whose block `layer` gives the AttentionSpec,
and counted (`attnid.layer.counting.count`), and the real module of that config is built with random
float64 weights (`attnid.hf.modules.build_module`). The module's parameter count must equal the spec's
P (a mapping that misses a bias or a norm gain fails here), and

    measured unidentified = P - rank J,   J = d(all outputs of all tokens) / d(all parameters)

at a random point over random Gaussian hidden states, sized as in `attnid.jacobian.input_sizing`
(3 P equations over the information a token carries), rank at `RANK_RTOL` with its gap in
decades, and again on the first half of the sequences (it must not change). A layer with a norm is measured twice, with the config's eps and with eps = 0 at the
same weights: the difference is the weakly identified dimension (the scale directions eps > 0
breaks), reported with the singular values that carry it (relative to the largest).
"""

from __future__ import annotations

import time

import torch
from torch.func import jacrev, vmap

from ..layer.counting import count
from ..jacobian import RANK_RTOL, input_sizing, numerical_rank
from .mapping import model_spec
from .modules import DTYPE, build_module, shrink


def _rank(real, theta, x, half: bool = False) -> tuple[dict, torch.Tensor]:
    """Numerical rank of the module's Jacobian over the sequences x (B, T, d); also sigma / sigma_max.

    half=True adds `rank_half`, the rank over the first half of the sequences (the sizing is enough when
    halving the data does not change it)."""

    def one_sequence(th, xs):  # (P,), (T, d) -> (T, d)
        return real.forward(th, xs[None])[0]

    J = vmap(jacrev(one_sequence), in_dims=(None, 0))(theta, x).reshape(-1, theta.numel())  # (B T d, P)
    sigma = torch.linalg.svdvals(J)
    rank = numerical_rank(sigma, RANK_RTOL)
    if half:
        rows = (x.shape[0] // 2) * x.shape[1] * x.shape[2]
        rank["rank_half"] = numerical_rank(torch.linalg.svdvals(J[:rows]), RANK_RTOL)["rank"]
    return rank, (sigma / sigma.max()).sort(descending=True).values


def verify_module(cfg: dict, seed: int = 0, layer: int = 0, oversample: float = 3.0, name: str = "") -> dict:
    """One row: the real module of layer `layer` of a (shrunk) config against the count of its mapped spec."""
    start = time.perf_counter()
    spec = model_spec(cfg).layer_specs[layer].attention
    counts = count(spec)
    real = build_module(cfg, seed=seed, layer=layer)
    P = real.n_params
    sizing = input_sizing(spec, oversample)
    gen = torch.Generator().manual_seed(int(seed) + 1)
    x = torch.randn(sizing.batch, sizing.seq_len, spec.d_model, generator=gen, dtype=DTYPE)
    row = {
        "case": name,
        "model_class": type(real.module).__name__,
        "shrunk": spec.label,
        "P": P,
        "P_spec": spec.n_params,
        "count": counts.unidentified,
        "weakly_count": counts.weakly_identified,
    }
    if P != spec.n_params:  # the mapping missed a parameter block: no rank can agree
        return {
            **row,
            "measured": -1,
            "measured_half": -1,
            "gap": float("nan"),
            "weakly_measured": -1,
            "agree": False,
            "error": "P",
        }
    rank, sigma = _rank(real, real.theta, x, half=True)
    row |= {"measured": P - rank["rank"], "measured_half": P - rank["rank_half"], "gap": rank["gap"]}
    row["sigma_kept"] = rank["sigma_kept"]
    row |= {"sigma_dropped": rank["sigma_dropped"], "weakly_measured": 0, "weak_sigma_min": float("nan")}
    row["weak_sigma_max"] = float("nan")
    if spec.has_norm and spec.norm_eps > 0:
        exact = build_module(cfg, seed=seed, layer=layer, eps=0.0)
        rank0, _ = _rank(exact, real.theta, x)
        weak = rank["rank"] - rank0["rank"]
        row["weakly_measured"] = weak
        if weak > 0:  # the weak directions: the smallest kept singular values at eps > 0
            kept = sigma[rank0["rank"] : rank["rank"]]
            row |= {"weak_sigma_min": float(kept.min()), "weak_sigma_max": float(kept.max())}
    row["agree"] = (
        row["measured"] == row["count"] == row["measured_half"] and row["weakly_measured"] == row["weakly_count"]
    )
    row["seconds"] = time.perf_counter() - start
    return row


def verify_modules(cases, seed: int = 0, oversample: float = 3.0, log=print, **shrink_options):
    """The DataFrame of :func:`verify_module` rows, one per case: (stored config name, overrides, layer)
    or a mapping {config, overrides, layer} (the workflow config's form); shrink_options go to `shrink`."""
    import pandas as pd

    from . import stored_config

    rows = []
    for case in cases:
        if isinstance(case, dict):
            case = (case["config"], case.get("overrides") or {}, case.get("layer", 0))
        name, overrides, layer = case
        cfg = shrink({**stored_config(name), **overrides}, **shrink_options)
        label = name + "".join(f" {k}={v}" for k, v in overrides.items()) + (f" layer {layer}" if layer else "")
        row = verify_module(cfg, seed=seed, layer=layer, oversample=oversample, name=label)
        rows.append(row)
        log(
            f"{label:32s} {row['model_class']:22s} P={row['P']:5d} count={row['count']:4d}"
            f" measured={row['measured']:4d} weak {row['weakly_count']}/{row['weakly_measured']}"
            f" gap={row['gap']:.1f} {'ok' if row['agree'] else 'DISAGREE'} ({row.get('seconds', 0):.1f} s)"
        )
    return pd.DataFrame(rows)


def module_disagreements(df) -> str:
    """'' if every row agrees, else one line per disagreeing case."""
    bad = df[~df["agree"].astype(bool)]
    return "\n".join(
        f"{r.case}: count {r.count} (weak {r.weakly_count}), measured {r.measured} (half data {r.measured_half},"
        f" weak {r.weakly_measured}), P {r.P} vs spec {r.P_spec}"
        for r in bad.itertuples()
    )
