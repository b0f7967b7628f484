"""Steps per second of a plain PyTorch training loop vs attnid.train with metrics and rebalancing.

    python benchmarks/training.py [--task teacher_student] [--d-model 64] [--heads 4] [--steps 100]
                                  [--batch 32] [--seq-len 16] [--dtype float64] [--threads 1] [--repeats 5]

One process, one model (attnid.train.build: same data stream, same initial parameters), one
optimizer (Adam, so every metric is non-trivial). Variants, each timed over `--steps` steps, best of
`--repeats` interleaved rounds (the machine may be shared):

  plain          model forward, loss, backward, optimizer step; nothing else
  metrics        attnid.train.train, rebalance none, metrics every step (overlap, update norm, drift)
  metrics/10     the same with metrics_every = 10
  project        rebalance project (P_T u removed from every update) + metrics every step
  balance        rebalance balance every `--rebalance-interval` steps + metrics every step

Times are CPU seconds of this process (time.process_time, one torch thread by default), which a
busy shared machine does not inflate the way it inflates wall time. Per-step costs are marginal: (t(steps) - t(steps/5)) / (4 steps/5), so the fixed cost of a
run is reported apart. Prints steps/s and the overhead ratio (time per step / plain time per step - 1) of each variant.
Target (issue 5): metrics and projection overhead < 30% of the plain step at d_model = 64, 4 heads.
"""

from __future__ import annotations

import argparse
import time

import torch

from attnid.train import RunConfig, build, make_optimizer, train


def plain_loop(cfg: RunConfig) -> float:
    """CPU seconds for cfg.steps steps of the bare loop (set-up excluded)."""
    task, model = build(cfg)
    optimizer = make_optimizer(cfg, model.parameters())
    start = time.process_time()
    for _ in range(cfg.steps):
        batch = task.train_batch(cfg.batch)
        loss = task.loss(model(batch.inputs), batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return time.process_time() - start


def project_loop(cfg: RunConfig) -> float:
    """CPU seconds for cfg.steps steps of attnid.train.train (one evaluation at the start and the end included)."""
    start = time.process_time()
    train(cfg, progress=False)
    return time.process_time() - start


def interleaved_best(fns: dict, repeats: int) -> dict:
    """Best (smallest) CPU seconds of each named thunk over `repeats` rounds; rounds run every
    variant in turn, so a burst of load on a shared machine hits all variants alike."""
    for fn in fns.values():
        fn()  # warm-up
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            best[name] = min(best[name], fn())
    return best


def per_step(seconds: dict, name: str, steps: int, short: int) -> float:
    """Marginal seconds per step: (t(steps) - t(short)) / (steps - short), so the fixed cost of a
    run (building the model, evaluations, assembling the metrics table) is not spread over the steps."""
    return (seconds[name] - seconds[f"{name}@short"]) / (steps - short)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=("teacher_student", "recall"), default="teacher_student")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=16, help="teacher-student T (recall: T = 2 pairs + 1)")
    parser.add_argument("--pairs", type=int, default=8, help="recall: key-value pairs")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rebalance-interval", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    base = RunConfig(
        task=args.task, d_model=args.d_model, heads=args.heads, seq_len=args.seq_len, pairs=args.pairs,
        vocab=max(16, args.pairs), causal=args.task == "recall", optimizer="adam", lr=1e-3, steps=args.steps,
        batch=args.batch, eval_every=args.steps, eval_batch=args.batch, probe_batch=args.batch,
        rebalance_interval=args.rebalance_interval, dtype=args.dtype, device=args.device,
    )  # fmt: skip
    variants = {
        "metrics": base,
        "metrics/10": base.with_(metrics_every=10),
        "project": base.with_(rebalance="project"),
        "project, metrics/10": base.with_(rebalance="project", metrics_every=10),
        "balance": base.with_(rebalance="balance"),
    }
    short = max(1, args.steps // 5)
    configs = {"plain": base} | variants
    thunks = {}
    for name, cfg in configs.items():
        loop = plain_loop if name == "plain" else project_loop
        thunks[name] = lambda c=cfg, f=loop: f(c)
        thunks[f"{name}@short"] = lambda c=cfg.with_(steps=short, eval_every=short), f=loop: f(c)
    seconds = interleaved_best(thunks, args.repeats)
    plain = per_step(seconds, "plain", args.steps, short)
    print(f"{args.task}, d_model={args.d_model}, H={args.heads}, batch={args.batch}, T={build(base)[0].seq_len}, {args.dtype}, {args.device}, {args.threads} thread(s), Adam")
    print(f"marginal CPU time per step from runs of {args.steps} and {short} steps (best of {args.repeats})")
    print(f"{'variant':22s} {'steps/s':>9s} {'ms/step':>8s} {'overhead':>9s}")
    print(f"{'plain PyTorch loop':22s} {1 / plain:9.1f} {1e3 * plain:8.2f} {'':>9s}")
    result = {"plain_steps_per_s": 1 / plain}
    for name in variants:
        sec = per_step(seconds, name, args.steps, short)
        overhead = sec / plain - 1
        result[name] = {"steps_per_s": 1 / sec, "overhead": overhead}
        print(f"{name:22s} {1 / sec:9.1f} {1e3 * sec:8.2f} {100 * overhead:8.0f}%")
    fixed = seconds["metrics@short"] - short * per_step(seconds, "metrics", args.steps, short)
    print(f"fixed cost of one attnid.train run (build, evaluations, metrics table): {1e3 * fixed:.0f} ms")
    return result


if __name__ == "__main__":
    main()
