"""Time of the whole-model judge: one check at P ~ 3,000 and the default preset's whole-model grid.

    python benchmarks/whole_model.py [--threads 2] [--only check|row|grid] [--config config/config.yaml]

Every number is measured in this run: CPU seconds (this process and its children, all threads;
the machine may be shared, so CPU seconds are what compare between runs) and wall seconds.

  check   `attnid.model.judge.measure_model` of one own model at P ~ 3,000 (vocab 16, 2 layers, d_model 12,
          RMSNorm, SwiGLU, RoPE): the logits Jacobian over the sized tokens, its rank on all and on
          half the sequences.
  row     the same model as one grid row (`attnid.model.grid.own_case`: also another seed).
  grid    `attnid.model.grid.verify_models` of the config's `whole_model` section (what the rule
          `whole_model_verification` runs), with the time of every case.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
CHECK = {
    "vocab_size": 16,
    "d_ff": 20,
    "mlp": "swiglu",
    "norm": "rmsnorm",
    "norm_bias": False,
    "positions": "rope",
    "attention": {"d_model": 12, "rope_dims": 6},
}


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (user + system, every thread)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Clock:
    def __enter__(self):
        self.cpu, self.wall = cpu_seconds(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.cpu, self.wall = cpu_seconds() - self.cpu, time.perf_counter() - self.wall


def check() -> dict:
    from attnid.model.counting import count_model
    from attnid.model.grid import own_spec
    from attnid.model.judge import measure_model

    spec = own_spec(CHECK)
    with Clock() as clock:
        result = measure_model(spec)
    out = {"P": spec.n_params, "count": count_model(spec).unidentified, "measured": result["measured"]}
    out |= {"measured_half": result["measured_half"], "gap": round(result["gap"], 2)}
    return out | {"cpu_s": round(clock.cpu, 1), "wall_s": round(clock.wall, 1)}


def row() -> dict:
    from attnid.gauge.cases import own_case
    from attnid.model.grid import own_spec

    with Clock() as clock:
        result = own_case("check", own_spec(CHECK))
    keys = ("P", "count", "measured", "measured_half", "measured_other_seed", "agree")
    return {k: result[k] for k in keys} | {"cpu_s": round(clock.cpu, 1), "wall_s": round(clock.wall, 1)}


def grid(config: Path) -> dict:
    import transformers

    from attnid.gauge.cases import verify_models

    transformers.logging.set_verbosity_error()
    cfg = yaml.safe_load(config.read_text())["whole_model"]
    options = {key: cfg[key] for key in ("seed", "oversample", "other_seed", "real_other_seed") if key in cfg}
    with Clock() as clock:
        df = verify_models(cfg["own"], cfg["real"], **options, log=lambda line: print("  " + line, flush=True))
    return {
        "cases": len(df),
        "agree": int(df["agree"].sum()),
        "grid_cpu_s": round(clock.cpu, 1),
        "grid_wall_s": round(clock.wall, 1),
        "slowest": {r.case: round(r.seconds, 1) for r in df.nlargest(5, "seconds").itertuples()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the rule's threads: 2)")
    parser.add_argument("--only", choices=("check", "row", "grid"), help="run one of the three")
    parser.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = {"threads": args.threads}
    for name, part in (("check", check), ("row", row)):
        if args.only in (None, name):
            results[name] = part()
            print(json.dumps({name: results[name]}), flush=True)
    if args.only in (None, "grid"):
        results["grid"] = grid(args.config)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
