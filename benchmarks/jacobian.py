"""Time and memory of the Jacobian verification: the old path against the new one, and the budget of a preset.

    python benchmarks/jacobian.py [--threads 2] [--dense 16x4,32x4] [--certificate 32x4] [--budget paper]

Every number is measured in this run (CPU seconds of the process, `time.process_time`, and wall
seconds; the machine may be shared, so the CPU times and their ratios are what compare), each
section in its own child process so that its peak memory (VmHWM) is its own:

  dense        one Jacobian J (3P x P, spec d x H with half RoPE and all four biases), then the
               singular values of the full and the half batch by the old path (``svdvals(J)`` and
               ``svdvals(J[:half])``) and by the new one (Householder QR of the half, svdvals of its
               R; QR of [R_half; rest], svdvals of that R: attnid.jacobian.measure). Same J, same
               decisions (asserted), the kept singular values compared to the last digit.
  certificate  attnid.jacobian.certify: its time split into directions, rows of J (autograd),
               the Gram product, Cholesky.
  budget       the preset's Jacobian rules, each on a sample of its specs measured here with the
               rule's own call; the rest of a rule extrapolated by attnid.jacobian.estimate_cost
               scaled by the sample's measured / estimated ratio. Also the old ratio points (every
               spec of the counting grid at its own width, by the certificate above 6,000 parameters).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]


def clocks() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def since(start: tuple[float, float]) -> dict:
    cpu, wall = clocks()
    return {"cpu": cpu - start[0], "wall": wall - start[1]}


def dense_one(d_model: int, heads: int) -> dict:
    """Old vs new singular values of one J (child process)."""
    from attnid import AttentionSpec, count
    from attnid import jacobian as jac

    spec = AttentionSpec(d_model, heads, rope_dims="half", biases="qkvo")
    sizing = jac.input_sizing(spec, 3.0)
    theta, x = jac.random_point(spec, sizing, seed=0)
    pos = jac.position_ids(spec, sizing, 0)
    t = clocks()
    J = jac.jacobian_rows(spec, theta, x, pos)  # (B T d, P)
    build = since(t)
    half = (sizing.batch // 2) * sizing.seq_len * spec.d_model
    warm = torch.randn(600, 200, dtype=torch.float64)  # first LAPACK calls pay set-up: before either path
    torch.linalg.svdvals(warm), jac.tall_svdvals(warm)
    t = clocks()
    old, old_half = torch.linalg.svdvals(J), torch.linalg.svdvals(J[:half])
    old_time = since(t)
    t = clocks()
    R_half = jac.triangular_factor(J[:half])
    new_half = torch.linalg.svdvals(R_half)
    new = jac.tall_svdvals(torch.cat((R_half, J[half:])))
    new_time = since(t)
    P = J.shape[1]
    ranks = [jac.numerical_rank(s)["rank"] for s in (old, new, old_half, new_half)]
    k = ranks[0]
    return {
        "spec": spec.label, "P": P, "rows": J.shape[0], "build": build, "old": old_time, "new": new_time,
        "measured_old": P - ranks[0], "measured_new": P - ranks[1], "half_old": P - ranks[2], "half_new": P - ranks[3],
        "predicted": count(spec).unidentified,
        "kept_rel_diff": float(((new[:k] - old[:k]) / old[:k]).abs().max()),
        "floor_old": float(old[k:].max() / old[0]) if k < P else 0.0, "floor_new": float(new[k:].max() / new[0]) if k < P else 0.0,
        "peak_gib": jac.peak_memory_bytes() / 2**30,
    }  # fmt: skip


def certificate_one(d_model: int, heads: int) -> dict:
    """certify() with its time split (child process)."""
    from attnid import AttentionSpec, count
    from attnid import jacobian as jac

    spec = AttentionSpec(d_model, heads)
    t = clocks()
    row = jac.certify(spec, log=lambda *a: None)
    total = since(t)
    return {
        "spec": spec.label, "P": spec.n_params, "total": total, "measured": row["measured"],
        "predicted": count(spec).unidentified, "peak_gib": row["peak_memory_bytes"] / 2**30,
        "estimated_seconds": jac.estimate_cost(spec, "certificate", 1.25).seconds,
        **{k: v for k, v in row.items() if k.startswith("seconds_")},
    }  # fmt: skip


def child(kind: str, args: list[str], threads: int) -> dict:
    cmd = [sys.executable, __file__, "--one", kind, *args, "--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_dense(r: dict) -> None:
    ok = r["measured_old"] == r["measured_new"] == r["predicted"] and r["half_old"] == r["half_new"]
    o, n = r["old"], r["new"]
    print(
        f"dense {r['spec']} P={r['P']} J {r['rows']}x{r['P']}: build J {r['build']['cpu']:.1f} s CPU; singular values "
        f"(full + half batch) old {o['cpu']:.1f} s CPU ({o['wall']:.1f} wall), new {n['cpu']:.1f} s CPU "
        f"({n['wall']:.1f} wall): {o['cpu'] / n['cpu']:.1f}x CPU; measured {r['measured_old']} -> {r['measured_new']}, "
        f"half {r['half_old']} -> {r['half_new']} ({'same' if ok else 'DIFFERENT'}); kept values max rel. diff "
        f"{r['kept_rel_diff']:.1e}; rounding floor {r['floor_old']:.1e} -> {r['floor_new']:.1e}; peak {r['peak_gib']:.2f} GiB",
        flush=True,
    )  # fmt: skip


def print_certificate(r: dict) -> None:
    rows = r.get("seconds_jacobian_rows", 0.0)
    print(
        f"certificate {r['spec']} P={r['P']}: {r['total']['cpu']:.1f} s CPU ({r['total']['wall']:.1f} wall): directions "
        f"{r['seconds_directions']:.1f} s, rows of J {rows:.1f} s, Gram {r['seconds_gram'] - rows:.1f} s, Cholesky "
        f"{r['seconds_cholesky']:.1f} s (wall); peak {r['peak_gib']:.2f} GiB; measured {r['measured']} "
        f"(predicted {r['predicted']})",
        flush=True,
    )  # fmt: skip


def preset_config(preset: str) -> dict:
    """config/config.yaml updated (recursively, as Snakemake's --configfile does) by config/<preset>.yaml."""
    import yaml

    def update(base, new):
        for key, value in new.items():
            base[key] = (
                update(base.get(key, {}), value)
                if isinstance(value, dict) and isinstance(base.get(key), dict)
                else value
            )
        return base

    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    return (
        cfg
        if preset in ("", "default", "config")
        else update(cfg, yaml.safe_load((REPO / "config" / f"{preset}.yaml").read_text()))
    )


def rule_jobs(cfg: dict) -> dict:
    """rule -> [(spec, method, oversample, run)] with run(spec) the rule's own call on that spec."""
    from attnid import AttentionSpec
    from attnid import jacobian as jac
    from attnid.layer.counting import ratio_grid
    from attnid.jacobian.verification import DENSE_MAX_PARAMS

    J, C = cfg["jacobian"], cfg["counting"]
    seed, over = J["seeds"][0], J["oversample"]
    common = {"seed": seed, "rtol": J["rank_rtol"], "positions": J["positions"]}

    def auto(spec):
        return "dense" if spec.n_params <= DENSE_MAX_PARAMS else "certificate"

    def point(spec):
        return jac.verify(spec, other_seeds=(), half_batch=False, directions=False, oversample=over, **common)

    def grid_job(spec):
        return jac.verify(
            spec, other_seeds=tuple(J["seeds"][1:]), half_batch=J["half_batch"], oversample=over, **common
        )

    def dense_job(spec):
        return jac.measure(spec, seed, over, rtol=J["rank_rtol"], positions=J["positions"])

    jobs = {"jacobian_verification": [(s, auto(s), over, grid_job) for _, s in jac.expand_grid(J["grid"])]}
    ratios = ratio_grid(C["d_model"], C["heads"], C["kv_groups"], C["rope"], C["biases"])
    rp = J["ratio_points"]
    selected = jac.ratio_figure_rows(ratios) if rp.get("drawn_only") else ratios
    if rp.get("d_model"):
        selected = jac.ratio_grid_at_width(selected, rp["d_model"])
    specs = [AttentionSpec.from_row(r) for _, r in selected.iterrows() if r["total"] <= rp["max_params"]]
    jobs["jacobian_ratio_points"] = [(s, auto(s), over, point) for s in specs]
    jobs["jacobian_spectra"] = [(jac.spec_from_fields(f), "dense", over, dense_job) for f in J["spectra"]]
    seen = {}
    be = J["bias_effects"]
    for base in be["bases"]:
        for rope in be["rope"]:
            for biases in ["", *"qkvo", *("qkvo".replace(b, "") for b in "qkvo"), "qkvo"]:
                spec = jac.spec_from_fields({**base, "rope": rope, "biases": biases})
                seen.setdefault(spec.label, spec)
    jobs["jacobian_bias_effects"] = [(s, "dense", over, dense_job) for s in seen.values()]
    real = J["real_heads"]

    def real_job(spec):
        return jac.verify(
            spec, other_seeds=(), half_batch=False, method=real["method"], max_memory_gb=real["max_memory_gb"], **common
        )

    real_specs = [s for _, s in jac.expand_grid(real["families"])]
    jobs["jacobian_real_heads"] = [
        (s, auto(s) if real["method"] == "auto" else real["method"], None, real_job) for s in real_specs
    ]
    if "large" in J:
        large = jac.spec_from_fields(J["large"]["spec"])

        def large_job(spec):
            return jac.verify(
                spec, method="certificate", oversample=J["large"]["oversample"], max_memory_gb=64, **common
            )

        jobs["jacobian_large"] = [(large, "certificate", J["large"]["oversample"], large_job)]
    old = [AttentionSpec.from_row(r) for _, r in ratios.iterrows() if r["total"] <= rp["max_params"]]
    jobs["(old) jacobian_ratio_points"] = [(s, auto(s), over, point) for s in old]
    return jobs


def estimate(spec, method: str, oversample) -> float:
    from attnid import jacobian as jac

    return jac.estimate_cost(spec, method, oversample or (3.0 if method == "dense" else 1.25)).seconds


def sample_order(jobs: list) -> list[int]:
    """Indices of the jobs in the order they are sampled: by estimate, the cheapest first, then spread over the range."""
    order = sorted(range(len(jobs)), key=lambda i: estimate(*jobs[i][:3]))
    step = max(1, len(order) // 8)
    return list(dict.fromkeys([order[0], *order[step::step], *order]))


def old_svd_path():
    """Context: attnid.jacobian.measure with the old singular values (svdvals of J and of J[:half] directly)."""
    import contextlib

    from attnid.jacobian import dense

    @contextlib.contextmanager
    def patched():
        saved = dense.tall_svdvals, dense.triangular_factor
        dense.tall_svdvals, dense.triangular_factor = torch.linalg.svdvals, (lambda J: J)
        try:
            yield
        finally:
            dense.tall_svdvals, dense.triangular_factor = saved

    return patched()


def print_budget(preset: str, sample_seconds: float, calibration: dict | None = None) -> None:
    """The table rule -> specs, measured sample (new and old path), extrapolated CPU time. `calibration`:
    method -> measured / estimated CPU time of a spec measured above (the certificate at P ~ 16k), which
    scales the specs no sample reached (a rule's own sample scales the rest of that rule)."""
    jobs = rule_jobs(preset_config(preset))
    print(f"\nbudget of the {preset} preset's Jacobian rules (CPU seconds; sample measured here, rest extrapolated "
          f"by estimate_cost x the rule's measured/estimated ratio)", flush=True)  # fmt: skip
    print(
        f"{'rule':32s} {'specs':>5s} {'sampled':>7s} {'sample new':>10s} {'sample old':>10s} {'total new':>10s} {'total old':>10s}"
    )
    ratios, totals = dict(calibration or {}), {}
    for rule, rule_jobs_ in jobs.items():
        old_rule = rule.startswith("(old)")
        estimates = [estimate(*job[:3]) for job in rule_jobs_]
        if old_rule:  # every spec of the counting grid at its width, scaled by its method's measured/estimated above
            total = sum(ratios.get(job[1], 1.0) * e for job, e in zip(rule_jobs_, estimates))
            print(f"{rule:32s} {len(rule_jobs_):5d} {0:7d} {'-':>10s} {'-':>10s} {'-':>10s} {total:10.0f}  (extrapolated: "
                  f"estimate x measured/estimated of {', '.join(f'{k} {v:.2f}' for k, v in ratios.items())})")  # fmt: skip
            totals[rule] = (None, total)
            continue
        chosen, new, old = [], 0.0, 0.0
        for n, i in enumerate(sample_order(rule_jobs_)):
            prior = ratios.get(rule_jobs_[i][1], 1.0)  # measured/estimated of this method so far
            factor = new / sum(estimates[j] for j in chosen) if chosen else prior
            if new + factor * estimates[i] > sample_seconds:  # predicted past the sample's budget: extrapolated
                continue
            spec, method, _, run = rule_jobs_[i]
            for path in ("new", "old") if n % 2 else ("old", "new"):  # alternate, so warm-up favours neither
                if path == "old" and method != "dense":
                    continue
                t = clocks()
                if path == "old":
                    with old_svd_path():
                        run(spec)
                    old += since(t)["cpu"]
                else:
                    row = run(spec)
                    new += since(t)["cpu"]
                    if method == "certificate":  # where a certificate's time goes (wall seconds)
                        parts = ("directions", "jacobian_rows", "gram", "cholesky")
                        print(f"    {spec.label} P={spec.n_params}: " + ", ".join(f"{k} {row[f'seconds_{k}']:.1f} s" for k in parts)
                              + f", peak {row['peak_memory_bytes'] / 2**30:.2f} GiB", flush=True)  # fmt: skip
            chosen.append(i)
        if chosen:
            factor = new / sum(estimates[i] for i in chosen)
            ratios.setdefault(rule_jobs_[chosen[0]][1], factor)  # the first rule measuring a method calibrates it
        else:  # nothing cheap enough to sample: the method's ratio measured in an earlier rule
            factor = ratios.get(rule_jobs_[0][1], 1.0)
        rest = sum(e for i, e in enumerate(estimates) if i not in chosen)
        if chosen and calibration and rule_jobs_[0][1] in calibration:  # the rest is larger than the sample: scale
            factor = calibration[rule_jobs_[0][1]]  # it as the large measured spec of its method
        total_new = new + factor * rest
        total_old = (old + factor * (old / new) * rest) if old else total_new
        totals[rule] = (total_new, total_old)
        print(
            f"{rule:32s} {len(rule_jobs_):5d} {len(chosen):7d} {new:10.1f} {old or new:10.1f} {total_new:10.0f} {total_old:10.0f}",
            flush=True,
        )
    new_sum = sum(t[0] for r, t in totals.items() if t[0] is not None)
    old_sum = sum(t[1] for r, t in totals.items() if r != "jacobian_ratio_points")  # with the old ratio points
    print(f"{'all Jacobian rules':32s} {'':5s} {'':7s} {'':10s} {'':10s} {new_sum:10.0f} {old_sum:10.0f}  "
          f"(new: {new_sum / 60:.1f} CPU-min; old, with the old ratio points: {old_sum / 3600:.1f} CPU-h)", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--dense", default="16x4,32x4", help="comma-separated d_model x heads ('' for none)")
    parser.add_argument("--certificate", default="32x4,64x8", help="comma-separated d_model x heads ('' for none)")
    parser.add_argument("--budget", default="paper", help="preset whose Jacobian rules to cost ('' for none)")
    parser.add_argument("--sample-seconds", type=float, default=120.0, help="CPU seconds to spend per rule's sample")
    parser.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.one:
        kind, *rest = args.one
        body = {"dense": dense_one, "certificate": certificate_one}[kind]
        print(json.dumps(body(*map(int, rest))))
        return

    print(f"threads {args.threads}, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    for item in filter(None, args.dense.split(",")):
        print_dense(child("dense", item.lower().split("x"), args.threads))
    calibration = {}
    for item in filter(None, args.certificate.split(",")):
        r = child("certificate", item.lower().split("x"), args.threads)
        print_certificate(r)
        calibration["certificate"] = r["total"]["cpu"] / r["estimated_seconds"]  # the last (largest) spec's
    if args.budget:
        print_budget(args.budget, args.sample_seconds, calibration)
    print(f"load average {os.getloadavg()[0]:.1f} at end", flush=True)


if __name__ == "__main__":
    main()
