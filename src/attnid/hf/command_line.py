"""`attnid count --hf-config path/config.json` and `attnid count --model NAME` (torch-free).

The flags are added to the `count` subcommand of `attnid.cli`; the result is
:func:`attnid.hf.count_model` of the file or of a stored published config, with its name and source.
"""

from __future__ import annotations

from ..spec import SpecError
from . import STORED, count_model, load_config, stored_config


def add_hf_arguments(parser) -> None:
    """--hf-config and --model on `count`; with either, --d-model and --heads are not needed."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--hf-config", metavar="PATH", help="count every layer of a Hugging Face config.json (read, never downloaded)"
    )
    group.add_argument("--model", metavar="NAME", help=f"count a shipped published config: {', '.join(STORED)}")
    for action in parser._actions:
        if action.dest in ("d_model", "heads"):
            action.required = False


def wants_hf(args) -> bool:
    return bool(getattr(args, "hf_config", None) or getattr(args, "model", None))


def count_from_args(args) -> dict:
    """{name, source, layer, model, layers} for --hf-config or --model (SpecError names a bad key or flag)."""
    if args.model and args.model not in STORED:
        raise SpecError("--model", f"no shipped config {args.model!r}; known: {', '.join(STORED)}")
    try:
        cfg = load_config(args.hf_config) if args.hf_config else stored_config(args.model)
    except SpecError as err:
        raise SpecError("--hf-config", str(err).split(": ", 1)[1]) from None
    name = cfg.get("_name", args.model or args.hf_config)
    return {"name": name, "source": cfg.get("_source", args.hf_config), **count_model(cfg)}
