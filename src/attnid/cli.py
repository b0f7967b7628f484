"""The `attnid` command line: `count` (exact counts, no torch) and `verify` (Jacobian measurement).

    attnid count --d-model 4096 --heads 32 --kv-heads 8 --rope full
    attnid count --d-model 8 --heads 2 --rope full --causal --seq-len 2      # refused: below T_min
    attnid count --hf-config path/to/config.json --json                    # every layer of a real model
    attnid count --model qwen3_8b                                          # a shipped published config
    attnid count --model llama3_8b --whole-model                           # every parameter, not only attention
    attnid verify --d-model 16 --heads 4 --rope 2 --bias qkvo --json
    attnid verify --d-model 4 --heads 1 --rope full --causal --seq-len 2 --outside-hypotheses  # 22, not 20
    attnid --version

(`python -m attnid ...` is the same program.) Every spec flag maps onto one AttentionSpec field
(FLAG_OF_FIELD), and the spec is built by `AttentionSpec.from_config`, so a bad value is refused
by the spec itself; the error names the flag. Any bad flag exits with status 2 and one line on
stderr, no traceback. `verify` exits 0 when the measurement passes, 1 when it fails or cannot
decide. Text output is one `key: value` per line; --json prints the same as JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys

from . import __version__
from .counting import count
from .hf import command_line as hf
from .spec import AttentionSpec, SpecError

# Spec field -> the flag that sets it (so errors name what the user typed).
FLAG_OF_FIELD = {
    "d_model": "--d-model",
    "n_heads": "--heads",
    "n_kv_heads": "--kv-heads",
    "d_head_qk": "--d-head",
    "d_head_v": "--d-head-v",
    "rope_dims": "--rope",
    "rope_base": "--rope-base",
    "biases": "--bias",
    "causal": "--causal",
    "seq_len": "--seq-len",
    # modern variants (attnid.counting_variants)
    "qk_norm": "--qk-norm",
    "norm_eps": "--norm-eps",
    "sinks": "--sinks",
    "softcap": "--softcap",
    "sliding_window": "--window",
    "alibi": "--alibi",
    "kv_lora_rank": "--kv-lora-rank",
    "q_lora_rank": "--q-lora-rank",
}
# Option of attnid.jacobian.verify -> the flag that sets it.
FLAG_OF_OPTION = {
    "seed": "--seed",
    "oversample": "--oversample",
    "device": "--device",
    "threads": "--threads",
    "max_memory_gb": "--max-memory-gb",
    "method": "--method",
    "dense_max_params": "--dense-max-params",
    "positions": "--positions",
    "progress": "--progress",
}


class UsageError(Exception):
    """A bad flag value: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage is in --help)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def program_name(argv0: str | None = None) -> str:
    """'attnid' for the console script, 'python -m attnid' for the module."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    name = os.path.basename(argv0 or "")
    return "python -m attnid" if name in ("__main__.py", "-m", "", "-c") else name


def add_spec_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--d-model", type=int, required=True, help="model width d")
    parser.add_argument("--heads", type=int, required=True, help="query heads H")
    parser.add_argument("--kv-heads", type=int, default=None, help="key/value groups G (default: heads; 1 = MQA)")
    parser.add_argument("--d-head", type=int, default=None, help="query/key head size (default: d_model / heads)")
    parser.add_argument("--d-head-v", type=int, default=None, help="value head size (default: --d-head)")
    parser.add_argument("--rope", default="none", help="RoPE: none, half, full, or N rotated dims per head (even)")
    parser.add_argument("--rope-base", type=float, default=10000.0, help="RoPE frequency base (default 10000)")
    parser.add_argument("--bias", default="none", help="biases present: 'none' or a subset of the letters qkvo")
    parser.add_argument("--causal", action="store_true", help="causal mask")
    parser.add_argument(
        "--seq-len", type=int, default=None, help="positions per sequence T (default: long enough for the count)"
    )
    variants = parser.add_argument_group("modern variants (attnid.counting_variants)")
    variants.add_argument("--qk-norm", default="none", help="none | rms_head | rms_all | layernorm_head")
    variants.add_argument("--norm-eps", type=float, default=1e-6, help="eps of the q/k or latent norms (0: exact)")
    variants.add_argument("--sinks", action="store_true", help="one learnable sink logit per head")
    variants.add_argument("--softcap", type=float, default=0.0, help="logit softcap c: c tanh(s / c) (0: off)")
    variants.add_argument("--window", type=int, default=0, help="sliding window in keys, causal (0: off)")
    variants.add_argument("--alibi", action="store_true", help="ALiBi position bias (no RoPE)")
    variants.add_argument("--kv-lora-rank", type=int, default=0, help="multi-head latent attention rank (0: off)")
    variants.add_argument("--q-lora-rank", type=int, default=0, help="MLA query latent rank (0: full query)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of key: value lines")


def add_verify_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of attnid.jacobian.verify (its own validation refuses bad values by name)."""
    parser.add_argument("--seed", type=int, default=0, help="seed of the random point and inputs (default 0)")
    parser.add_argument(
        "--oversample",
        type=float,
        default=None,
        help="Jacobian rows over the need, >= 1 (default 3 dense, 1.25 certificate)",
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--max-memory-gb", type=float, default=None, help="refuse specs estimated above this (GiB)")
    parser.add_argument("--method", default="auto", help="auto | dense | certificate")
    parser.add_argument(
        "--dense-max-params", type=int, default=None, help="largest P measured densely by --method auto"
    )
    parser.add_argument("--positions", default="spread", help="RoPE positions: spread (default) or contiguous")
    parser.add_argument("--progress", action="store_true", help="print the estimate and each stage to stderr")
    parser.add_argument(
        "--no-invariance", action="store_true", help="skip the half-batch and second-seed re-measurements"
    )
    parser.add_argument(
        "--outside-hypotheses",
        action="store_true",
        help="measure a spec that breaks a hypothesis of the count (e.g. --seq-len below T_min) against the naive count",
    )


def _with_flags(message: str) -> str:
    """Write 'd_model=8' in a message as '--d-model=8' (a spec field set to a number)."""
    for name, flag in FLAG_OF_FIELD.items():
        message = re.sub(rf"(?<![\w-]){name}=(?=-?\d)", f"{flag}=", message)
    return message


def _usage_error(err: Exception) -> UsageError:
    """One line naming the flag, from a SpecError (field) or a ValueError whose message starts 'option: '."""
    name = getattr(err, "field", None)
    text = str(err)
    if name is None and ": " in text:
        head, rest = text.split(": ", 1)
        if head in FLAG_OF_OPTION or head in FLAG_OF_FIELD:
            name, text = head, f"{head}: {rest}"
    flag = FLAG_OF_FIELD.get(name) or FLAG_OF_OPTION.get(name)
    if flag is None:
        return UsageError(_with_flags(text))
    message = text.split(": ", 1)[1] if text.startswith(f"{name}: ") else text
    return UsageError(f"{flag}: {_with_flags(message)}")


def spec_from_args(args: argparse.Namespace) -> AttentionSpec:
    """The spec the flags describe (SpecError -> UsageError naming the flag)."""
    values = {
        "d_model": args.d_model,
        "n_heads": args.heads,
        "n_kv_heads": args.kv_heads,
        "d_head_qk": args.d_head,
        "d_head_v": args.d_head_v,
        "rope_dims": args.rope,
        "rope_base": args.rope_base,
        "biases": args.bias,
        "causal": args.causal,
        "seq_len": args.seq_len,
        "qk_norm": args.qk_norm,
        "norm_eps": args.norm_eps,
        "sinks": args.sinks,
        "softcap": args.softcap,
        "sliding_window": args.window,
        "alibi": args.alibi,
        "kv_lora_rank": args.kv_lora_rank,
        "q_lora_rank": args.q_lora_rank,
    }
    try:
        return AttentionSpec.from_config(values)
    except SpecError as err:
        raise _usage_error(err) from None


def _plain(value):
    """JSON-safe: non-finite floats as strings, tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def key_value_lines(result: dict, indent: str = "") -> list[str]:
    """`key: value` lines; nested dicts and lists indented under their key."""
    lines = []
    for key, value in result.items():
        if isinstance(value, dict):
            lines.append(f"{indent}{key}:")
            lines += key_value_lines(value, indent + "  ")
        elif isinstance(value, (list, tuple)):
            lines.append(f"{indent}{key}:")
            lines += [f"{indent}  - {item}" for item in value]
        else:
            lines.append(f"{indent}{key}: {value}")
    return lines


def _print(result: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(_plain(result), indent=2))
    else:
        print("\n".join(key_value_lines(result)))


def run_count(args) -> int:
    if hf.wants_hf(args):  # a real model: every layer of a config.json (attnid.hf)
        try:
            result = hf.count_from_args(args)
            if args.whole_model:  # the whole model, every parameter (attnid.model)
                from .model.shipped import count_from_args as whole_model_counts

                result["model"] = whole_model_counts(args)
        except SpecError as err:
            raise UsageError(str(err)) from None
        _print(result, args.json)
        return 0
    if args.whole_model:
        raise UsageError("--whole-model: needs --hf-config PATH or --model NAME")
    if args.d_model is None or args.heads is None:
        raise UsageError("--d-model and --heads are required (or --hf-config PATH, or --model NAME)")
    spec = spec_from_args(args)
    try:
        counts = count(spec)
    except SpecError as err:
        raise _usage_error(err) from None
    _print({"label": spec.label, "spec": spec.to_config(), **counts.to_dict()}, args.json)
    return 0


def run_verify(args) -> int:
    spec = spec_from_args(args)
    from .jacobian import verify  # torch only for this subcommand

    options = {
        "seed": args.seed,
        "oversample": args.oversample,
        "device": args.device,
        "threads": args.threads,
        "method": args.method,
        "positions": args.positions,
        "progress": args.progress,
    }
    if args.max_memory_gb is not None:
        options["max_memory_gb"] = args.max_memory_gb
    if args.dense_max_params is not None:
        options["dense_max_params"] = args.dense_max_params
    if args.outside_hypotheses:
        options["check_validity"] = False
    if args.no_invariance:
        options.update(other_seeds=(), half_batch=False)
    if spec.variants():  # the explicit symmetry directions (attnid.symmetry) cover plain attention only
        options["directions"] = False
    try:
        row = verify(spec, **options)
    except (ValueError, MemoryError, RuntimeError) as err:  # SpecError and TooLargeError are ValueErrors
        if isinstance(err, RuntimeError) and "out of memory" not in str(err).lower():
            raise
        raise _usage_error(err) from None
    _print(row, args.json)
    return 0 if row.get("status", "passed" if row.get("passed") else "failed") == "passed" else 1


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    prog = prog or program_name()
    parser = Parser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"attnid {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    p_count = sub.add_parser("count", help="exact total / identified / unidentified parameter counts (no torch)")
    add_spec_arguments(p_count)
    hf.add_hf_arguments(p_count)
    p_count.add_argument(
        "--whole-model",
        action="store_true",
        help="with --hf-config/--model: `model` counts every parameter of the model",
    )
    p_count.set_defaults(func=run_count)
    p_verify = sub.add_parser("verify", help="measure the unidentified dimension by Jacobian rank and compare")
    add_spec_arguments(p_verify)
    add_verify_arguments(p_verify)
    p_verify.set_defaults(func=run_verify)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as err:
        print(f"{parser.prog} {args.command}: error: {err}", file=sys.stderr)
        return 2
