"""Cost of the symmetry tools relative to one forward+backward pass of the layer.

    python benchmarks/symmetry.py [--d-model 512] [--heads 8] [--biases none] [--dtype float32] [--threads N] [--repeats 11]

Measures, in one run: one forward+backward of AttentionLayer on a (8, 128, d_model) batch (mean-square
loss), one projection onto the unidentified subspace (set-up from theta included: the eigendecompositions
and the value-bias system) and one balance. Prints the fastest and the median of the repeats and the
ratios of the fastest (the least disturbed by other processes on a shared machine) and the load average.
Target (issue 4): projection < 20% of a forward+backward pass.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from attnid.layer.forward import AttentionLayer
from attnid.layer.spec import AttentionSpec
from attnid.symmetry import balance, project


def times(fn, repeats: int) -> tuple[float, float]:
    """(fastest, median) wall time of fn over `repeats` calls after one warm-up."""
    fn()
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return min(out), statistics.median(out)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=None)
    parser.add_argument("--rope", type=int, default=0, help="rotated dims per head")
    parser.add_argument("--biases", default="none")
    parser.add_argument("--batch", type=int, nargs=3, default=(8, 128, 512), metavar=("B", "T", "D"))
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--repeats", type=int, default=11)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    spec = AttentionSpec(args.d_model, args.heads, args.kv_heads, rope_dims=args.rope, biases=args.biases)
    dtype = getattr(torch, args.dtype)
    gen = torch.Generator().manual_seed(0)
    layer = AttentionLayer(spec, gen, dtype=dtype)
    B, T, _ = args.batch
    x = torch.randn(B, T, spec.d_model, generator=gen, dtype=dtype)

    def forward_backward():
        layer.theta.grad = None
        layer(x).pow(2).mean().backward()

    forward_backward()
    theta, grad = layer.theta.detach(), layer.theta.grad.detach().clone()
    fb = times(forward_backward, args.repeats)
    proj = times(lambda: project(spec, theta, grad), args.repeats)
    bal = times(lambda: balance(spec, theta), args.repeats)
    result = {
        "spec": spec.label,
        "dtype": args.dtype,
        "threads": torch.get_num_threads(),
        "load_average_1min": os.getloadavg()[0],
        "forward_backward_s": fb[0],
        "project_s": proj[0],
        "balance_s": bal[0],
        "forward_backward_median_s": fb[1],
        "project_median_s": proj[1],
        "balance_median_s": bal[1],
        "project_ratio": proj[0] / fb[0],
        "balance_ratio": bal[0] / fb[0],
    }
    for key, value in result.items():
        print(f"{key:26s} {value:.4g}" if isinstance(value, float) else f"{key:26s} {value}")
    print(f"projection {'meets' if result['project_ratio'] < 0.2 else 'misses'} the target (< 0.2 of forward+backward)")
    return result


if __name__ == "__main__":
    main()
