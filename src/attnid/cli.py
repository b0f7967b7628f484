"""The `attnid` command line: `count` (exact counts, no torch), `verify` (Jacobian measurement), `check`
(a real `transformers` class against the count) and `coverage` (every model type of the installed `transformers`).

    attnid count --d-model 4096 --heads 32 --kv-heads 8 --rope full
    attnid count --d-model 4 --heads 1 --rope full --causal --seq-len 2      # refused: T below T_min = 3
    attnid count --hf-config path/to/config.json --json                    # every layer of a real model
    attnid count --model qwen3_8b                                          # a shipped published config
    attnid count --model llama3_8b --whole-model                           # every parameter, not only attention
    attnid verify --d-model 16 --heads 4 --rope 2 --bias qkvo --json
    attnid verify --d-model 4 --heads 1 --rope full --causal --seq-len 2 --outside-hypotheses  # 22, not 20
    attnid --version

(`python -m attnid ...` is the same program.) Every spec flag is one row of SPEC_FLAGS, which maps it
onto one AttentionSpec field and generates its argparse option; the spec is built by
`AttentionSpec.from_config`, so a bad value is refused by the spec itself and the error names the flag.
Any bad flag exits with status 2 and one line on stderr, no traceback; flags are never abbreviated.
`verify` exits 0 when the measurement passes, 1 when it fails or cannot decide. Text output is one
`key: value` per line; --json prints the same as JSON.

The JSON of `count --hf-config PATH` / `count --model NAME` (README, "Any configuration"):

    name, source, model_type
    layer             the counts of layer 0's attention (as `count` of one spec)
    other_layers      {layer index: counts} of every layer whose attention spec differs from layer 0's
    attention_layers  every layer's attention counted alone and summed (attention parameters only), n_layers
    whole_model       with --whole-model: every parameter of the model (attnid.model.count_model), seq_len

`attnid check --hf-config PATH` (or --model NAME, or --model-type TYPE for the class's default config)
builds the real `transformers` class of the config shrunk to a tiny size (offline, random float64 weights)
and measures every distinct attention layer and the whole model against the count (`attnid.hf.check`):
one row each with its verdict, agree / disagree / undecided. Exit status 0 when nothing disagrees or is
undecided, 1 when a row disagrees, 3 when none disagrees but one cannot be decided.

`attnid coverage` lists every model type of the installed `transformers` (its causal LMs and BERT) with its
status, mapped or refused, and a one-line reason (`attnid.hf.coverage`), then how many are mapped (the whole
model counted or its layers only) and refused by category; --json prints {"types": [...], "summary": {...}}.
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
from .errors import SpecError
from .cli_flags import SPEC_FLAGS, Flag
from .spec import AttentionSpec


VERIFY_FLAGS = (
    Flag("seed", "--seed", int, 0, "seed of the random point and inputs (default 0)"),
    Flag("oversample", "--oversample", float, None, "Jacobian rows over the need, >= 1 (default 3 dense, 1.25 certificate)"),
    Flag("device", "--device", str, "cpu", "cpu or cuda (default cpu)"),
    Flag("threads", "--threads", int, None, "torch CPU threads (default: torch's choice)"),
    Flag("max_memory_gb", "--max-memory-gb", float, None, "refuse specs estimated above this (GiB)"),
    Flag("method", "--method", str, "auto", "auto | dense | certificate"),
    Flag("dense_max_params", "--dense-max-params", int, None, "largest P measured densely by --method auto"),
    Flag("positions", "--positions", str, "spread", "RoPE positions: spread (default) or contiguous"),
    Flag("progress", "--progress", None, False, "print the estimate and each stage to stderr"),
    Flag("no_invariance", "--no-invariance", None, False, "skip the half-batch and second-seed re-measurements"),
    Flag("outside_hypotheses", "--outside-hypotheses", None, False,
         "measure a spec that breaks a hypothesis of the count (e.g. --seq-len below T_min) against the naive count"),
)  # fmt: skip
FLAG_OF_FIELD = {f.dest: f.flag for f in SPEC_FLAGS}
FLAG_OF_OPTION = {f.dest: f.flag for f in VERIFY_FLAGS}


class UsageError(Exception):
    """A bad flag value: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage is in --help) and no abbreviated flags."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def program_name(argv0: str | None = None) -> str:
    """'attnid' for the console script, 'python -m attnid' for the module."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    name = os.path.basename(argv0 or "")
    return "python -m attnid" if name in ("__main__.py", "-m", "", "-c") else name


def add_flags(parser: argparse.ArgumentParser, flags, required=()) -> None:
    """One argparse option per Flag (a switch when its type is None), in groups by title."""
    groups = {"": parser}
    for f in flags:
        target = groups.get(f.group) or groups.setdefault(f.group, parser.add_argument_group(f.group))
        if f.type is None:
            target.add_argument(f.flag, dest=f.dest, action="store_true", help=f.help)
        else:
            target.add_argument(
                f.flag, dest=f.dest, type=f.type, default=f.default, required=f.dest in required, help=f.help
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
    try:
        return AttentionSpec.from_config({f.dest: getattr(args, f.dest) for f in SPEC_FLAGS})
    except SpecError as err:
        raise _usage_error(err) from None


def _plain(value):
    """JSON-safe: non-finite floats as strings, tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def key_value_lines(result: dict, indent: str = "") -> list[str]:
    """`key: value` lines; nested dicts and lists indented under their key."""
    lines = []
    for key, value in result.items():
        if isinstance(value, dict) and not value:
            lines.append(f"{indent}{key}: {{}}")
        elif isinstance(value, dict):
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


def _real_config(args) -> tuple[dict, str]:
    """(config mapping, where it came from) of --hf-config PATH or --model NAME."""
    from .hf import STORED, load_config, stored_config

    if args.model is not None:
        if args.model not in STORED:
            raise UsageError(f"--model: no shipped config {args.model!r}; known: {', '.join(STORED)}")
        return stored_config(args.model), args.model
    try:
        return load_config(args.hf_config), args.hf_config
    except SpecError as err:
        raise UsageError(f"--hf-config: {str(err).split(': ', 1)[1]}") from None


def count_real(args) -> dict:
    """The counts of a real model's config (the JSON schema in the module docstring)."""
    from .hf import model_spec, model_type
    from .model.counting import count_attention_layers, count_model

    cfg, where = _real_config(args)
    try:
        spec = model_spec(cfg, args.seq_len if args.whole_model else None)
        blocks = [x.attention for x in spec.layer_specs]
        layers = [count(a) for a in blocks]
        attention = count_attention_layers(spec).to_dict()
        del attention["conditions"]  # layer 0's, listed under `layer`
        result = {"name": cfg.get("_name", where), "source": cfg.get("_source", where), "model_type": model_type(cfg)}
        result["layer"] = layers[0].to_dict()
        result["other_layers"] = {i: layers[i].to_dict() for i in range(1, len(blocks)) if blocks[i] != blocks[0]}
        result["attention_layers"] = {**attention, "n_layers": spec.n_layers}
        if args.whole_model:
            result["whole_model"] = {**count_model(spec).to_dict(), "seq_len": spec.seq_len}
    except SpecError as err:
        raise UsageError(f"{where}: {err}") from None
    return result


def _check_config(args) -> dict:
    """The config mapping of `check`: --hf-config, --model, or the class defaults of --model-type."""
    if args.model_type is None:
        return _real_config(args)[0]
    from transformers import CONFIG_MAPPING

    from .hf.coverage import default_config

    if args.model_type not in CONFIG_MAPPING:
        raise UsageError(f"--model-type: {args.model_type!r} is not a model type of the installed transformers")
    return default_config(args.model_type)


def run_check(args) -> int:
    if args.hf_config is None and args.model is None and args.model_type is None:
        raise UsageError("--hf-config PATH, --model NAME or --model-type TYPE is required")
    from .hf.check import check_config

    cfg = _check_config(args)
    log = None if args.json else print
    try:
        rows = check_config(
            cfg, args.seed, args.oversample, whole=not args.layers_only, log=log, sketch=not args.full_jacobian
        )
    except SpecError as err:
        raise UsageError(f"{args.hf_config or args.model or args.model_type}: {err}") from None
    except Exception as err:  # noqa: BLE001 -- the library's own class failed on the tiny config: say so in one line
        where = args.hf_config or args.model or args.model_type
        raise UsageError(
            f"{where}: the transformers class failed on the shrunk config ({type(err).__name__}: {err})"
        ) from None
    verdicts = [r["verdict"] for r in rows]
    if args.json:
        keep = ("part", "spec", "P", "P_spec", "count", "measured", "measured_half", "weak_count", "weak_measured",
                "gap", "margin", "sketch_rows", "verdict", "reason")  # fmt: skip
        _print({"rows": [{k: r[k] for k in keep if k in r} for r in rows]}, True)
    else:
        print("verdict:", "disagree" if "disagree" in verdicts else "undecided" if "undecided" in verdicts else "agree")
    return 1 if "disagree" in verdicts else 3 if "undecided" in verdicts else 0


def run_coverage(args) -> int:
    from .hf.coverage import coverage, summary

    rows = coverage()
    totals = summary(rows)
    if args.json:
        _print({"types": rows, "summary": totals}, True)
        return 0
    width = max(len(r["model_type"]) for r in rows)
    for r in rows:
        print(f"{r['model_type']:{width}s}  {r['status']:7s}  {r['reason']}")
    counted = ", ".join(f"{how} {n}" for how, n in totals["mapped_counted"].items())
    refused = ", ".join(f"{c} {n}" for c, n in totals["refused_by_category"].items())
    print(f"{totals['types']} model types: {totals['mapped']} mapped ({counted}); {totals['refused']} refused ({refused})")
    return 0


def run_count(args) -> int:
    if args.hf_config is not None or args.model is not None:
        _print(count_real(args), args.json)
        return 0
    if args.whole_model:
        raise UsageError("--whole-model: needs --hf-config PATH or --model NAME")
    if args.d_model is None or args.n_heads is None:
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

    options = {f.dest: getattr(args, f.dest) for f in VERIFY_FLAGS[:-2]}
    for name in ("max_memory_gb", "dense_max_params"):
        if options[name] is None:
            del options[name]
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
    add_flags(p_count, SPEC_FLAGS)
    real = p_count.add_mutually_exclusive_group()
    real.add_argument(
        "--hf-config", metavar="PATH", help="count every layer of a Hugging Face config.json (read, never downloaded)"
    )
    from .hf import STORED

    real.add_argument("--model", metavar="NAME", help=f"count a shipped published config: {', '.join(STORED)}")
    p_count.add_argument(
        "--whole-model", action="store_true", help="with --hf-config/--model: count every parameter of the model"
    )
    p_count.add_argument("--json", action="store_true", help="print JSON instead of key: value lines")
    p_count.set_defaults(func=run_count)
    p_verify = sub.add_parser("verify", help="measure the unidentified dimension by Jacobian rank and compare")
    add_flags(p_verify, SPEC_FLAGS, required=("d_model", "n_heads"))
    add_flags(p_verify, VERIFY_FLAGS)
    p_verify.add_argument("--json", action="store_true", help="print JSON instead of key: value lines")
    p_verify.set_defaults(func=run_verify)
    p_check = sub.add_parser("check", help="measure a real transformers class, shrunk from a config, against the count")
    source = p_check.add_mutually_exclusive_group()
    source.add_argument("--hf-config", metavar="PATH", help="a Hugging Face config.json (read, never downloaded)")
    source.add_argument("--model", metavar="NAME", help=f"a shipped published config: {', '.join(STORED)}")
    source.add_argument("--model-type", metavar="TYPE", help="the default config of a transformers model type")
    p_check.add_argument("--seed", type=int, default=0, help="seed of the random point and inputs (default 0)")
    p_check.add_argument("--oversample", type=float, default=3.0, help="Jacobian rows over the need (default 3)")
    p_check.add_argument(
        "--full-jacobian",
        action="store_true",
        help="the whole model's rank from the full logits Jacobian, not its per-position Gaussian sketch (slower)",
    )
    p_check.add_argument("--layers-only", action="store_true", help="check the attention layers, not the whole model")
    p_check.add_argument("--json", action="store_true", help="print JSON instead of one line per row")
    p_check.set_defaults(func=run_check, seq_len=None, whole_model=False)
    p_coverage = sub.add_parser("coverage", help="every model type of the installed transformers: mapped or refused, why")
    p_coverage.add_argument("--json", action="store_true", help="print JSON instead of one line per model type")
    p_coverage.set_defaults(func=run_coverage)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as err:
        print(f"{parser.prog} {args.command}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`attnid count ... | head`): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
