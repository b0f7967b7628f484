"""Cost of the whole-model gauge (attnid.gauge) relative to one forward+backward step of the same model.

    python benchmarks/gauge.py [--d-model 64] [--layers 4] [--heads 4] [--kv-heads 2] [--vocab 256]
                               [--batch 8 128] [--threads N] [--repeats 7] [--skip-8b]

Measures, in one run, on a tiny real LlamaForCausalLM in float64 (GQA, RoPE): one forward+backward step
(cross-entropy on a (B, T) batch), `Gauge.for_hf_model`, the projection's set-up at the point (the Gram of
the generators, K = T T^T, and its Cholesky factor), and `g.project(update)` of a full update
({name: tensor}); the FLOPs of the step and of the projection (torch's FlopCounterMode: matrix products)
and the floor of the projection, which must at least apply T^T and T once each and solve with the factor
(2 n^2; its matrix products are the apply's); each timing is the fastest of torch's threads and one thread
(the projection's many small products lose to thread contention on a loaded machine); then `Gauge.for_hf_model` at LLaMA-3-8B's shapes on the meta device (no weights) and its dim.
Prints the fastest and the median of the repeats and the ratios of the fastest. Target: project <= 25% of
the step.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from symmetry import times  # benchmarks/symmetry.py: (fastest, median) of repeats after a warm-up


def flops(fn) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--d-ff", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--batch", type=int, nargs=2, default=(8, 128), metavar=("B", "T"))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--skip-8b", action="store_true")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    import transformers

    from attnid.float64 import KeepFloat64
    from attnid.gauge import Gauge

    transformers.logging.set_verbosity_error()
    config = transformers.LlamaConfig(
        vocab_size=args.vocab, hidden_size=args.d_model, intermediate_size=args.d_ff, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, num_key_value_heads=args.kv_heads, max_position_embeddings=args.batch[1],
        tie_word_embeddings=False,
    )  # fmt: skip
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).double()
    B, T = args.batch
    tokens = torch.randint(args.vocab, (B, T), generator=torch.Generator().manual_seed(1))

    def step():
        model.zero_grad(set_to_none=True)
        with KeepFloat64():
            model(input_ids=tokens, labels=tokens, use_cache=False).loss.backward()

    threads = torch.get_num_threads()

    def best(fn):  # the fastest over torch's threads and one thread (small products lose to thread contention)
        runs = {}
        for k in sorted({threads, 1}):
            torch.set_num_threads(k)
            runs[k] = times(fn, args.repeats)
        torch.set_num_threads(threads)
        k = min(runs, key=lambda k: runs[k][0])
        return runs[k], k

    step_s, step_threads = best(step)
    step_flops = flops(step)
    update = {n: p.grad.clone() + 0.01 * torch.randn_like(p) for n, p in model.named_parameters()}

    start = time.perf_counter()
    gauge = Gauge.for_hf_model(model)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    proj = gauge.projection  # the Gram and its factor at this point
    setup_s = time.perf_counter() - start
    n = proj.T.n
    project_s, project_threads = best(lambda: gauge.project(update))
    project_flops = flops(lambda: gauge.project(update))
    u = gauge.fine.flatten(gauge.names.to_fine({k: v.double() for k, v in update.items()}))
    c = proj.coefficients(u)
    apply_flops = flops(lambda: proj.T.apply(c))
    floor = 2 * apply_flops + 2 * n * n  # T c once, T^T u as much (the same contractions), two triangular solves
    out = {
        "P": gauge.n_params, "dim": gauge.dim, "generators": n, "cholesky": proj.cholesky,
        "step_s": step_s, "step_gflops": step_flops / 1e9,
        "build_s": build_s, "setup_s": setup_s, "project_s": project_s, "project_gflops": project_flops / 1e9,
        "floor_gflops": floor / 1e9, "solve_gflops": 2 * n * n / 1e9,
        "ratio_wall": project_s[0] / step_s[0], "ratio_flops": project_flops / step_flops, "ratio_floor": floor / step_flops,
    }  # fmt: skip
    print(f"tiny Llama: d_model {args.d_model}, {args.layers} layers, {args.heads} heads ({args.kv_heads} KV), "
          f"vocab {args.vocab}, batch {B}x{T}, float64, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"  P {out['P']:,}  dim {out['dim']:,}  generators {n:,} (Gram {'Cholesky' if proj.cholesky else 'eigh'})")
    print(f"  forward+backward step   {step_s[0] * 1e3:8.1f} ms (median {step_s[1] * 1e3:.1f}, {step_threads} threads)   {out['step_gflops']:.3f} GFLOP")
    print(f"  g.project(update)       {project_s[0] * 1e3:8.1f} ms (median {project_s[1] * 1e3:.1f}, {project_threads} threads)   {out['project_gflops']:.4f} GFLOP in matrix products (the triangular solves uncounted)")
    print(f"  floor: T^T, T and the solve {out['floor_gflops']:.4f} GFLOP (solve 2 n^2 = {out['solve_gflops']:.4f})")
    print(f"  ratio project / step: wall {out['ratio_wall']:.3f}, FLOPs {out['ratio_flops']:.3f}, floor {out['ratio_floor']:.3f} (target <= 0.25)")
    print(f"  Gauge.for_hf_model {build_s:.2f} s; set-up at the point (Gram + factor) {setup_s:.2f} s")
    if not args.skip_8b:
        from attnid.hf import stored_config
        from attnid.model.real import real_config

        with torch.device("meta"):
            big = transformers.LlamaForCausalLM(real_config(stored_config("llama3_8b")))
        start = time.perf_counter()
        g8 = Gauge.for_hf_model(big)
        out["llama3_8b_s"], out["llama3_8b_dim"] = time.perf_counter() - start, g8.dim
        print(f"  LLaMA-3-8B shapes (meta): Gauge.for_hf_model {out['llama3_8b_s']:.2f} s, dim {g8.dim:,} of {g8.n_params:,}")
    return out


if __name__ == "__main__":
    main()
