"""Cost of the symmetry tools relative to one forward+backward pass of the layer.

    python benchmarks/symmetry.py [--d-model 512] [--heads 8] [--biases none] [--dtype float32] [--repeats 5]

Measures, in one run: one forward+backward of AttentionLayer on a (8, 128, d_model) batch (mean-square
loss), one projection onto the unidentified subspace (set-up from theta included: the eigendecompositions
and the value-bias system) and one balance; prints the median times and their ratios.
Target (issue 4): projection < 20% of a forward+backward pass.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from attnid.attention import AttentionLayer
from attnid.spec import AttentionSpec
from attnid.symmetry import balance, project


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=None)
    parser.add_argument("--rope", type=int, default=0, help="rotated dims per head")
    parser.add_argument("--biases", default="none")
    parser.add_argument("--batch", type=int, nargs=3, default=(8, 128, 512), metavar=("B", "T", "D"))
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
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
    t_fb = median_time(forward_backward, args.repeats)
    t_proj = median_time(lambda: project(spec, theta, grad), args.repeats)
    t_bal = median_time(lambda: balance(spec, theta), args.repeats)
    result = {
        "spec": spec.label,
        "dtype": args.dtype,
        "threads": torch.get_num_threads(),
        "forward_backward_s": t_fb,
        "project_s": t_proj,
        "balance_s": t_bal,
        "project_ratio": t_proj / t_fb,
        "balance_ratio": t_bal / t_fb,
    }
    for key, value in result.items():
        print(f"{key:20s} {value:.4g}" if isinstance(value, float) else f"{key:20s} {value}")
    print(f"projection {'meets' if result['project_ratio'] < 0.2 else 'misses'} the target (< 0.2 of forward+backward)")
    return result


if __name__ == "__main__":
    main()
