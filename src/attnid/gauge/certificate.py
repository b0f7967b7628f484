r"""The two-sided whole-model certificate: explicit generators on one side, the Jacobian's rank on the other.

At the measured point theta of a grid case (`attnid.model.grid`), with R the triangular factor of the
logits' Jacobian J (so ||J t|| = ||R t||) and sigma_max = ||J||:

    generator_rank   the rank of the generators (`attnid.gauge.sources`) after normalising each, with the
                     singular values of that matrix on both sides of RANK_RTOL (generator_sigma_kept: its
                     smallest kept value; generator_gap: decades to the largest dropped one): a lower bound on
                     the unidentified dimension once every generator is a fibre direction, that is when
    generator_Jt     max over the generators t of ||J t|| / (||J|| ||t||) is at rounding (<= RANK_RTOL, the
                     threshold the Jacobian's rank uses); generator_Jt_basis: the same over an orthonormal basis
                     of their span
    measured         P - rank J: the upper bound (the grid's own column)

so generator_rank = count = measured is the count certified from both sides. The weakly identified class
(exact symmetries for eps = 0 that eps > 0 breaks) is reported apart: weak_generator_rank (the rank they add
to the exact generators) against the weak count, and their ||J t|| / (||J|| ||t||) at the spec's eps (small,
not rounding). A source without closed-form generators (`Group.fallback`, only `first_mlp_table`) is
filled, at these tiny sizes only, by the kernel of a map of its own: for a one-block model, the per-token
factorisation of the logits (`attnid.gauge.sources.first_table`), found without J, so the row stays two-sided
(fallback_gap: the decades of that kernel's rank decision). Where that map is not written (a free table
before more blocks) the kernel of J restricted to the coordinates the source names fills it
(fallback_sources, fallback_dirs): then the two sides are not independent, and the row says so (two_sided
false); where that fallback falls short of the count (eps > 0 leaves directions the kernel's threshold cannot
separate) it gives no verdict (generators_agree None).
A range whose generators are not written at all (generators_note) keeps only the
Jacobian's side: generators_agree is None there and the row's verdict rests on the Jacobian.
"""

from __future__ import annotations

import time

import torch

from ..jacobian import RANK_RTOL
from ..model.counting import count_model
from .operator import Generators, orthonormal_rows
from .point import DTYPE, Point
from .sources import generators


def _ratios(R: torch.Tensor, M: torch.Tensor, sigma_max: float) -> torch.Tensor:
    """||R t|| / (sigma_max ||t||) for each row t of M."""
    if M.shape[0] == 0:
        return torch.zeros(0, dtype=DTYPE)
    return (R.to(DTYPE) @ M.mT).norm(dim=0) / (sigma_max * M.norm(dim=1))


def certificate(spec, theta_fine: torch.Tensor, R: torch.Tensor, sigma_max: float, to_function=None) -> dict:
    """The certificate's columns (module docstring) at theta_fine (the layout's point); to_function maps
    (n, P) rows from the layout to the measured function's coordinates (None: the same: this project's
    forward)."""
    start = time.perf_counter()
    to_function = to_function or (lambda M: M)
    counts = count_model(spec)
    point = Point(spec, theta_fine)
    try:
        groups = generators(point)
    except NotImplementedError as why:  # a range whose generators are not written: the Jacobian's side only
        return {"generators_note": f"not written: {why}", "generators_agree": None, "two_sided": False}
    ops = Generators(point.layout, groups)
    exact = [i for i, g in enumerate(groups) if not g.weak and not g.fallback]
    weak = [i for i, g in enumerate(groups) if g.weak]
    fallback = [g for g in groups if g.fallback]
    T = to_function(ops.matrix(exact))
    Tw = to_function(ops.matrix(weak))
    row = {"generators": int(T.shape[0])}
    row["generator_Jt"] = float(_ratios(R, T, sigma_max).max()) if T.shape[0] else 0.0
    F, independent, row["fallback_gap"] = _fallback_directions(point, fallback, R, sigma_max, to_function)
    Q, info = orthonormal_rows(torch.cat([T, F]))
    row["generator_Jt_basis"] = float(_ratios(R, Q, sigma_max).max()) if Q.shape[0] else 0.0
    row |= {"generator_rank": info["rank"], "generator_sigma_kept": info["sigma_kept"], "generator_gap": info["gap"]}
    _, info_w = orthonormal_rows(torch.cat([T, F, Tw]))
    row["weak_generator_rank"] = info_w["rank"] - info["rank"]
    ratios_w = _ratios(R, Tw, sigma_max)
    row["weak_Jt_min"] = float(ratios_w.min()) if Tw.shape[0] else float("nan")
    row["weak_Jt_max"] = float(ratios_w.max()) if Tw.shape[0] else float("nan")
    row["fallback_sources"] = ";".join(sorted({g.source for g in fallback}))
    row["fallback_dirs"] = int(F.shape[0])
    row["generator_sources_off"] = _sources_off(ops, groups, exact, counts)
    row["generators_agree"] = bool(
        row["generator_rank"] == counts.unidentified
        and row["weak_generator_rank"] == counts.weakly_identified
        and row["generator_Jt"] <= RANK_RTOL
    )
    row["two_sided"] = row["generators_agree"] and independent  # both sides independent of each other
    row["generators_note"] = "" if independent else "fallback: the Jacobian's kernel on its coordinates"
    if not independent and not row["generators_agree"]:  # the fallback is the Jacobian's own side: no verdict
        row["generators_note"] += f" (rank {row['generator_rank']} of {counts.unidentified}: not a certificate)"
        row["generators_agree"] = None
    row["generator_seconds"] = time.perf_counter() - start
    return row


def _sources_off(ops: Generators, groups, exact, counts) -> str:
    """'source rank/count; ...' for every source whose explicit generators alone have another rank than its count."""
    by_source: dict[str, list[int]] = {}
    for i in exact:
        by_source.setdefault(groups[i].source, []).append(i)
    off = []
    for source in sorted(set(by_source) | set(counts.breakdown)):
        rank = orthonormal_rows(ops.matrix(by_source[source]))[1]["rank"] if source in by_source else 0
        if rank != counts.breakdown.get(source, 0):
            off.append(f"{source} {rank}/{counts.breakdown.get(source, 0)}")
    return "; ".join(off)


def _fallback_directions(point: Point, fallback, R, sigma_max, to_function) -> tuple[torch.Tensor, bool, float]:
    """(rows (m, P), independent, gap): the directions of the groups without closed-form generators, from a map
    of their own where every such group has one (`meta["directions"]`: independent of J; gap: the decades of
    that map's rank decision, the smallest over the groups), else the kernel of J restricted to the coordinates
    they name (tiny sizes; gap NaN)."""
    P = point.layout.size
    if not fallback:
        return torch.zeros(0, R.shape[1], dtype=DTYPE), True, float("nan")
    own = [g.meta["directions"]() if "directions" in g.meta else None for g in fallback]
    if all(x is not None for x in own):  # read off a map of their own, not off J
        return to_function(torch.cat([x[0] for x in own])), True, min(x[1]["gap"] for x in own)
    mask = torch.zeros(P, dtype=DTYPE)
    for g in fallback:
        for b in g.blocks:
            mask[point.layout.blocks[b].slice] = 1.0
    cols = torch.nonzero(to_function(mask[None])[0]).squeeze(1)
    _, s, Vh = torch.linalg.svd(R.to(DTYPE)[:, cols], full_matrices=True)
    s = torch.cat([s, torch.zeros(cols.numel() - s.numel(), dtype=DTYPE)])
    null = Vh[s <= RANK_RTOL * sigma_max]
    out = torch.zeros(null.shape[0], R.shape[1], dtype=DTYPE)
    out[:, cols] = null
    return out, False, float("nan")


def real_to_function(name_map, fine_layout, real_layout):
    """(n, P) rows in the layout's coordinates -> the real module's `named_parameters()` order."""

    def fn(M: torch.Tensor) -> torch.Tensor:
        if M.shape[0] == 0:
            return torch.zeros(0, real_layout.size, dtype=M.dtype)
        hf = name_map.to_hf(fine_layout.unflatten(M))
        return real_layout.flatten({n: hf[n] for n in real_layout.blocks})

    return fn


def real_to_fine(name_map, fine_layout, real_layout, theta: torch.Tensor) -> torch.Tensor:
    """theta of a real module (its named_parameters order) as the layout's point."""
    return fine_layout.flatten(name_map.to_fine(real_layout.unflatten(theta)))


def real_certificate(name: str, spec, theta: torch.Tensor, R: torch.Tensor, sigma_max: float) -> dict:
    """The certificate of the real model `name` of `attnid.model.real.TINY` at its point theta (its own order); a
    class whose parameter names have no map yet (DeepSeek's routed experts) gets the one-sided row, saying so."""
    from ..errors import SpecError
    from ..flat import FlatLayout
    from ..model.real import TINY, build_real
    from .name_map import name_map
    from .point import FineLayout

    real = build_real(name, 0)  # the names and shapes (the point is theta)
    real_layout = FlatLayout(zip(real.names, real.shapes, strict=True), name)
    fine = FineLayout(spec)
    try:
        nm = name_map(spec, TINY[name][1])
    except SpecError as why:  # the Jacobian's side only, as for a range without written generators
        return {"generators_note": f"not written: {why}", "generators_agree": None, "two_sided": False}
    nm.check(dict(zip(real.names, real.shapes)), fine)
    theta_fine = real_to_fine(nm, fine, real_layout, theta)
    return certificate(spec, theta_fine, R, sigma_max, real_to_function(nm, fine, real_layout))
