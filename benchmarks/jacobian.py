"""Time and peak memory of the Jacobian verification: the project's methods against the naive one.

    python benchmarks/jacobian.py [--threads 2] [--naive-max-params 4096] [--specs 16x4,32x4,64x8]

Methods, each run in its own process (so that peak memory, VmHWM, is its own), on the same random
point and inputs (attnid.jacobian.input_sizing, oversample 3 for the dense methods, 1.25 for the
certificate):
  naive        torch.autograd.functional.jacobian of all outputs of the whole batch (one backward
               pass per output row through the whole batch), then a full float64 svdvals;
  dense        attnid.jacobian.measure: per-sequence vmap(jacrev) rows, then svdvals;
  certificate  attnid.jacobian.certify: null-space basis, JVP check, lower-triangle Gram of
               J[:, S^c], shifted Cholesky; no SVD of J.
The naive method runs up to --naive-max-params parameters (the largest spec it finishes in a few
minutes); above, its time is extrapolated as P^3 from the largest naive run and marked so.
Prints one line per (spec, method) and the ratios naive / project on every spec both ran, all
measured in this run, with the load average (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch


def run_one(method: str, d_model: int, heads: int, threads: int) -> dict:
    """Body of a child process: one method on one spec; returns the measurements."""
    torch.set_num_threads(threads)
    from attnid import AttentionSpec, count
    from attnid import jacobian as jac
    from attnid.attention import attention

    spec = AttentionSpec(d_model, heads)
    start = time.perf_counter()
    if method == "certificate":
        row = jac.certify(spec, log=lambda *a: None)
        measured = row["measured"]
    elif method == "dense":
        measured = jac.measure(spec)[0]["measured"]
    else:
        sizing = jac.input_sizing(spec)
        theta, x = jac.random_point(spec, sizing, seed=0)
        J = torch.autograd.functional.jacobian(lambda t: attention(t, x, spec), theta)  # (B, T, d, P)
        sigma = torch.linalg.svdvals(J.reshape(-1, theta.numel()))
        measured = theta.numel() - jac.numerical_rank(sigma)["rank"]
    return {
        "spec": spec.label,
        "P": theta_size(spec),
        "method": method,
        "seconds": time.perf_counter() - start,
        "peak_gib": jac.peak_memory_bytes() / 2**30,
        "measured": measured,
        "predicted": count(spec).unidentified,
        "estimated_seconds": jac.estimate_cost(spec, "certificate" if method == "certificate" else "dense",
                                               1.25 if method == "certificate" else 3.0).seconds,  # verify's guard
    }  # fmt: skip


def theta_size(spec) -> int:
    from attnid import Layout

    return Layout(spec).size


def child(method: str, d_model: int, heads: int, threads: int) -> dict:
    cmd = [sys.executable, __file__, "--one", method, str(d_model), str(heads), "--threads", str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--naive-max-params", type=int, default=4096)
    parser.add_argument("--specs", default="16x4,32x4,64x8", help="comma-separated d_model x heads")
    parser.add_argument("--one", nargs=3, metavar=("METHOD", "D_MODEL", "HEADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        method, d_model, heads = args.one[0], int(args.one[1]), int(args.one[2])
        print(json.dumps(run_one(method, d_model, heads, args.threads)))
        return

    print(f"threads {args.threads}, load average {os.getloadavg()[0]:.1f} at start")
    results = []
    for item in args.specs.split(","):
        d_model, heads = map(int, item.lower().split("x"))
        P = 4 * d_model * d_model * 1  # no biases, d_head = d_model / heads
        methods = ["certificate"] + (["dense", "naive"] if P <= args.naive_max_params else [])
        for method in methods:
            r = child(method, d_model, heads, args.threads)
            results.append(r)
            ok = "ok" if r["measured"] == r["predicted"] else "DISAGREE"
            print(f"{r['spec']:28s} P={r['P']:6d} {method:12s} {r['seconds']:8.1f} s (estimated {r['estimated_seconds']:.1f} s)  peak {r['peak_gib']:5.2f} GiB  measured {r['measured']} ({ok})", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at end")
    by = {(r["spec"], r["method"]): r for r in results}
    naive_runs = [r for r in results if r["method"] == "naive"]
    for spec in dict.fromkeys(r["spec"] for r in results):
        naive = by.get((spec, "naive"))
        for method in ("dense", "certificate"):
            ours = by.get((spec, method))
            if ours is None:
                continue
            if naive is not None:
                print(f"{spec}: naive / {method}: time {naive['seconds'] / ours['seconds']:.1f}x, memory {naive['peak_gib'] / ours['peak_gib']:.1f}x")
            elif naive_runs:
                ref = max(naive_runs, key=lambda r: r["P"])
                estimate = ref["seconds"] * (ours["P"] / ref["P"]) ** 3
                print(
                    f"{spec}: naive not run (P > {args.naive_max_params}); P^3 extrapolation from {ref['spec']}: "
                    f"~{estimate:.0f} s, i.e. ~{estimate / ours['seconds']:.0f}x the {method}'s {ours['seconds']:.0f} s (estimate)"
                )


if __name__ == "__main__":
    main()
