"""Checks of the symmetry toolkit on a grid of specs (results/symmetry/checks.csv) and their summary.

Each property of :mod:`attnid.symmetry` (group action, projection, balance) is measured at a random
float64 point and compared with a bound; the workflow writes the rows and their summary, which
attnid.report turns into the paper's table and macros.
"""

from __future__ import annotations

import itertools
import math

import pandas as pd
import torch

from ..layer.forward import attention
from ..layer.counting import count
from ..layer.layout import Layout
from ..layer.spec import AttentionSpec, parse_rope
from .balance import balance
from .conserved import imbalance
from .group import act, act_heads, commutant, group_element, permute_heads
from .projector import Projector, chance_overlap, overlap
from .stacks import COMPUTE_DTYPE, PARTS


def check_spec(spec: AttentionSpec, seed: int = 0, batch: tuple[int, int] = (2, 6), max_dense: int = 2000) -> dict:
    """Every property of the toolkit measured at one random point (float64), as one row.

    Function changes are max |Y(theta') - Y(theta)| / max |Y(theta)| on a random batch. Projection errors
    use random vectors u, w: idempotence ||P P u - P u|| / ||u||, adjointness |<P u, w> - <u, P w>| /
    (||u|| ||w||), null residual (||J P u|| / ||P u||) / (||J w|| / ||w||) (J: Jacobian of theta -> Y, by
    jvp). dim_T is the trace of the dense projector (only when P <= max_dense; else -1).
    """

    gen = torch.Generator().manual_seed(seed)
    layout = Layout(spec)
    P = layout.size
    theta = layout.init(gen, dtype=COMPUTE_DTYPE)
    x = torch.randn(*batch, spec.d_model, generator=gen, dtype=COMPUTE_DTYPE)
    target = torch.randn(*batch, spec.d_model, generator=gen, dtype=COMPUTE_DTYPE)
    y = attention(theta, x, spec, layout)
    scale = y.abs().max()

    def change(other):
        return ((attention(other, x, spec, layout) - y).abs().max() / scale).item()

    H, r, k = spec.H, spec.group_size, spec.d_head_qk
    qk, vo = group_element(spec, gen)
    perm = [(h // r) * r + (h % r + 1) % r for h in range(H)]  # rotate the heads inside each group
    perm = [(q + r) % H for q in perm]  # and the groups
    generic, _ = group_element(spec, gen, allowed=False)
    per_head = commutant(
        spec,
        torch.eye(k, dtype=COMPUTE_DTYPE)
        + 0.3 * torch.randn(H, k, k, generator=gen, dtype=COMPUTE_DTYPE) / math.sqrt(k),
    )

    proj = Projector(spec, theta)
    u, w = torch.randn(2, P, generator=gen, dtype=COMPUTE_DTYPE)
    pu, pw = proj(u), proj(w)
    _, J_pu = torch.func.jvp(lambda t: attention(t, x, spec, layout), (theta,), (pu,))
    _, J_w = torch.func.jvp(lambda t: attention(t, x, spec, layout), (theta,), (w,))
    grad = torch.func.grad(lambda t: ((attention(t, x, spec, layout) - target) ** 2).sum())(theta)

    balanced = balance(spec, theta)
    imb0, imb1 = imbalance(spec, theta), imbalance(spec, balanced)
    counted = count(spec).unidentified
    dim_T = round(torch.trace(proj(torch.eye(P, dtype=COMPUTE_DTYPE))).item()) if P <= max_dense else -1
    nan = float("nan")
    return {
        "label": spec.label,
        **{
            f: getattr(spec, f)
            for f in ("d_model", "n_heads", "n_kv_heads", "d_head_qk", "d_head_v", "rope_dims", "causal")
        },
        "biases": spec.biases or "none",
        "seed": seed,
        "P": P,
        "dim_count": counted,
        "dim_T": dim_T,
        "dim_match": dim_T == counted,
        "change_allowed": change(act(spec, theta, qk, vo)),
        "change_permutation": change(permute_heads(spec, theta, perm)),
        "change_noncommuting": change(act(spec, theta, generic)) if spec.rope_dims else nan,
        "change_per_head": change(act_heads(spec, theta, per_head)) if r > 1 else nan,
        "idempotence_error": ((proj(pu) - pu).norm() / u.norm()).item(),
        "adjointness_error": (abs((pu @ w - u @ pw).item()) / (u.norm() * w.norm())).item(),
        "null_residual": ((J_pu.norm() / pu.norm()) / (J_w.norm() / w.norm())).item(),
        "gradient_overlap": overlap(spec, theta, grad, proj)["all"],
        "chance_overlap": chance_overlap(spec),
        "balance_change": change(balanced),
        "balance_residual": max(imb1[p].abs().max().item() / max(imb0[p].abs().max().item(), 1e-300) for p in PARTS),
        "balance_idempotence": ((balance(spec, balanced) - balanced).abs().max() / balanced.abs().max()).item(),
        "norm_before": theta.norm().item(),
        "norm_after": balanced.norm().item(),
    }


def grid_specs(d_model: int, heads, kv_groups, head_dims, rope, biases) -> list[AttentionSpec]:
    """The check grid: H in heads, G in kv_groups dividing H, d_head_qk = d_head_v in head_dims, each RoPE
    variant (none/half/full, attnid.layer.spec.parse_rope; repeats skipped) and bias subset."""

    specs = []
    for H, G, dh, variant, b in itertools.product(heads, kv_groups, head_dims, rope, biases):
        if H % G:
            continue
        spec = AttentionSpec(d_model, H, G, d_head_qk=dh, d_head_v=dh, rope_dims=parse_rope(variant, dh), biases=b)
        if spec not in specs and (variant == "none" or spec.rope_dims):
            specs.append(spec)
    return specs


def check_grid(grid: dict):
    """One :func:`check_spec` row per spec of :func:`grid_specs` and seed: a DataFrame."""

    specs = grid_specs(
        grid["d_model"], grid["heads"], grid["kv_groups"], grid["head_dims"], grid["rope"], grid["biases"]
    )
    rows = [check_spec(spec, seed, tuple(grid["batch"]), grid["max_dense"]) for spec in specs for seed in grid["seeds"]]
    return pd.DataFrame(rows)


# (name, column, how to reduce over the grid, bound the paper states, direction of the bound)
SUMMARY = [
    ("function change, allowed action", "change_allowed", "max", 1e-10, "<"),
    ("function change, head permutation", "change_permutation", "max", 1e-10, "<"),
    ("function change, generic M under RoPE", "change_noncommuting", "min", 1e-3, ">"),
    ("function change, per-head M in a GQA group", "change_per_head", "min", 1e-3, ">"),
    ("projection idempotence error", "idempotence_error", "max", 1e-10, "<"),
    ("projection self-adjointness error", "adjointness_error", "max", 1e-10, "<"),
    ("Jacobian null-space residual", "null_residual", "max", 1e-10, "<"),
    ("gradient overlap", "gradient_overlap", "max", 1e-8, "<"),
    ("balance: function change", "balance_change", "max", 1e-10, "<"),
    ("balance: imbalance left", "balance_residual", "max", 1e-10, "<"),
    ("balance: norm after / before", "norm_ratio", "max", 1.0, "<"),
]


def summarize_checks(checks: pd.DataFrame) -> pd.DataFrame:
    """The paper's short table: per property the worst value over the grid (max, or min for the changes that
    must be large), the bound, its direction and pass/fail; the first row is the share of specs with dim T = count."""

    df = checks.assign(norm_ratio=checks.norm_after / checks.norm_before)
    rows = [
        {
            "check": "dim T = count",
            "worst": float(df.dim_match.mean()),
            "bound": 1.0,
            "direction": "=",
            "passed": bool(df.dim_match.all()),
            "specs": len(df),
        }
    ]
    for name, column, how, bound, direction in SUMMARY:
        values = df[column].dropna()
        worst = float(getattr(values, how)()) if len(values) else float("nan")
        passed = bool(len(values) == 0 or (worst < bound if direction == "<" else worst > bound))
        rows.append(
            {
                "check": name,
                "worst": worst,
                "bound": bound,
                "direction": direction,
                "passed": passed,
                "specs": len(values),
            }
        )
    return pd.DataFrame(rows)
