"""Command line: `python -m attnid count ...` (exact counts) and `python -m attnid verify ...` (Jacobian check).

Examples:
    python -m attnid count --d-model 4096 --heads 32 --kv-heads 8 --rope full --bias none --json
    python -m attnid verify --d-model 16 --heads 4 --rope 2 --bias qkvo --json
A bad flag value exits with status 2 and one line naming the flag.
"""

from __future__ import annotations

import argparse
import json
import sys

from .counting import count
from .spec import AttentionSpec, SpecError, parse_rope

# Spec field -> the flag that sets it (so errors name what the user typed).
FLAG_OF_FIELD = {
    "d_model": "--d-model",
    "n_heads": "--heads",
    "n_kv_heads": "--kv-heads",
    "d_head_qk": "--d-head",
    "d_head_v": "--d-head-v",
    "rope_dims": "--rope",
    "biases": "--bias",
    "causal": "--causal",
    "rope_base": "--rope-base",
}


def add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--d-model", type=int, required=True, help="model width d")
    parser.add_argument("--heads", type=int, required=True, help="query heads H")
    parser.add_argument("--kv-heads", type=int, default=None, help="key/value groups G (default: heads; 1 = MQA)")
    parser.add_argument("--d-head", type=int, default=None, help="query/key head size (default: d_model / heads)")
    parser.add_argument("--d-head-v", type=int, default=None, help="value head size (default: --d-head)")
    parser.add_argument("--rope", default="none", help="RoPE: none, full, or N rotated dims per head (even)")
    parser.add_argument("--rope-base", type=float, default=10000.0, help="RoPE frequency base (default 10000)")
    parser.add_argument("--bias", default="none", help="biases present: 'none' or a subset of the letters qkvo")
    parser.add_argument("--causal", action="store_true", help="causal mask")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def spec_from_args(args: argparse.Namespace) -> AttentionSpec:
    """Build the spec; a SpecError is re-raised naming the CLI flag instead of the field."""
    try:
        d_head = args.d_head
        if d_head is None and args.heads > 0 and args.d_model % args.heads == 0:
            d_head = args.d_model // args.heads
        rope = parse_rope(args.rope, d_head if d_head is not None else 0)
        return AttentionSpec(
            d_model=args.d_model,
            n_heads=args.heads,
            n_kv_heads=args.kv_heads,
            d_head_qk=args.d_head,
            d_head_v=args.d_head_v,
            rope_dims=rope,
            biases=args.bias,
            causal=args.causal,
            rope_base=args.rope_base,
        )
    except SpecError as err:
        flag = FLAG_OF_FIELD.get(err.field, err.field)
        message = str(err).split(": ", 1)[1]
        for field, other in FLAG_OF_FIELD.items():
            message = message.replace(f"{field}=", f"{other}=")
        print(f"attnid: error: {flag}: {message}", file=sys.stderr)
        raise SystemExit(2) from None


def run_count(args) -> int:
    spec = spec_from_args(args)
    result = {"spec": spec.to_config(), **count(spec).to_dict()}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{spec.label}")
        for key in ("total", "identified", "unidentified"):
            print(f"  {key:<13}{result[key]:>14,}")
        print(f"  {'ratio':<13}{result['ratio']:>14.6f}")
        for source, value in result["breakdown"].items():
            print(f"    {source:<14}{value:>12,}")
    return 0


def run_verify(args) -> int:
    from . import jacobian  # heavy imports only when needed

    spec = spec_from_args(args)
    result = jacobian.verify_cli(spec, args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key:<16}{value}")
    return 0 if result.get("passed", False) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m attnid", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_count = sub.add_parser("count", help="exact total / identified / unidentified parameter counts")
    add_spec_arguments(p_count)
    p_count.set_defaults(func=run_count)
    p_verify = sub.add_parser("verify", help="measure the unidentified dimension by Jacobian rank and compare")
    add_spec_arguments(p_verify)
    try:
        from .jacobian import add_verify_arguments
    except ImportError:  # the verifier is optional for `count`
        add_verify_arguments = None
    if add_verify_arguments is not None:
        add_verify_arguments(p_verify)
    p_verify.set_defaults(func=run_verify)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
