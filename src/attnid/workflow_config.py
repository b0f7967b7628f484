"""Validate the workflow config: the JSON schema, then the facts a schema cannot say; one line per error.

A config error names the key (as a path: `training.tasks[0].heads[1]`) and the reason, e.g.
`config training.tasks[0].heads[1]: 3 does not divide d_model 16`, instead of Snakemake's dump of
the whole schema and config. Schema defaults are filled in as Snakemake's own `validate` does.
No torch here: the Snakefile calls this before it plans anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from .layer.spec import SpecError


class ConfigError(ValueError):
    """A config value the workflow cannot run with; the message is one line naming the key."""


def _path(parts) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _schema_errors(config: Mapping, schema: Mapping) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    lines = []
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        best = jsonschema.exceptions.best_match([error])
        lines.append(f"config {_path(best.absolute_path)}: {best.message}")
    return lines


def _divides(heads, d_model, where: str) -> list[str]:
    return [
        f"config {where}[{i}]: {h} heads do not divide d_model {d_model} (set d_head_qk to use it)"
        for i, h in enumerate(heads)
        if isinstance(h, int) and h > 0 and d_model % h
    ]


def semantic_errors(config: Mapping) -> list[str]:
    """Facts the schema cannot check: head counts that divide the width, KV groups that divide a head
    count, every self-checked model type a mapped one, and every trained layer a valid AttentionSpec
    (attnid.layer.spec checks it)."""
    errors = []
    counting = config.get("counting") or {}
    if isinstance(counting.get("d_model"), int):
        errors += _divides(counting.get("heads", []), counting["d_model"], "counting.heads")
        heads = [h for h in counting.get("heads", []) if isinstance(h, int)]
        for i, g in enumerate(counting.get("kv_groups", [])):
            if heads and not any(h % g == 0 for h in heads):
                errors.append(f"config counting.kv_groups[{i}]: {g} KV groups divide none of the head counts {heads}")
    coverage = (config.get("hf") or {}).get("coverage")
    if isinstance(coverage, list):  # every checked type must be mapped
        from .hf.mapping import SUPPORTED_MODEL_TYPES

        for i, mt in enumerate(coverage):
            if mt not in SUPPORTED_MODEL_TYPES:
                errors.append(f"config hf.coverage[{i}]: {mt!r} is not a mapped model type (attnid coverage lists them)")
    from .training.runs import TASKS, attention_spec  # torch-free

    for i, task in enumerate((config.get("training") or {}).get("tasks", [])):
        if ("d_head" in task) == ("d_model" in (task.get("attention") or {})):
            errors.append(f"config training.tasks[{i}]: give exactly one of attention.d_model (a fixed width) or "
                          "d_head (a fixed head size)")  # fmt: skip
            continue
        for j, heads in enumerate(task.get("heads", [])):  # each trained layer must be a valid spec
            try:
                spec = attention_spec(task, heads)
            except (SpecError, TypeError, KeyError) as err:
                errors.append(
                    f"config training.tasks[{i}].heads[{j}] = {heads} with training.tasks[{i}].attention: {err}"
                )
                continue
            if task.get("model") in ("llama", "mixtral") and spec.d_head_qk % 2:  # Mixtral's RoPE is Llama's
                errors.append(f"config training.tasks[{i}].heads[{j}] = {heads}: Llama's RoPE rotates pairs of "
                              f"dims, head size {spec.d_head_qk} is odd")  # fmt: skip
    entries = (config.get("training") or {}).get("tasks", [])
    for i, t in enumerate(entries):  # GPT-2's fused c_attn has one key/value head per query head
        if t.get("model") == "gpt2" and t.get("kv_ratio", 1) > 1:
            errors.append(f"config training.tasks[{i}].kv_ratio: GPT2LMHeadModel has no grouped keys and values "
                          f"(multi-head only), got {t['kv_ratio']}")  # fmt: skip
    keys = [(t.get("name", t.get("task")), t.get("model", "own")) for t in entries]
    for i, key in enumerate(keys):
        if key in keys[:i]:
            errors.append(f"config training.tasks[{i}]: a second sweep named {key[0]!r} with model {key[1]!r} "
                          "(give one of them a `name`)")  # fmt: skip
    for i, t in enumerate(entries):
        if t.get("name") in TASKS and t.get("name") != t.get("task"):
            errors.append(f"config training.tasks[{i}].name: {t['name']!r} is another task kind's name")
        unknown = sorted(set(t.get("steps_at_heads") or {}) - set(t.get("heads", [])), key=str)
        if unknown:  # steps for a head count not swept would be silent
            errors.append(f"config training.tasks[{i}].steps_at_heads: head counts {unknown} are not in "
                          f"training.tasks[{i}].heads {t.get('heads', [])}")  # fmt: skip
        for j, opt in enumerate(t.get("optimizers", [])):  # a step for a head count not swept would be silent
            unknown = sorted(set(opt.get("lr_at_heads") or {}) - set(t.get("heads", [])), key=str)
            if unknown:
                errors.append(f"config training.tasks[{i}].optimizers[{j}].lr_at_heads: head counts {unknown} are "
                              f"not in training.tasks[{i}].heads {t.get('heads', [])}")  # fmt: skip
        if t.get("task") == "text" and "corpus" not in (config.get("training") or {}):
            errors.append(f"config training.tasks[{i}]: the text task needs the section training.corpus")
        if t.get("task") == "text" and t.get("model", "own") == "own" and not (t.get("attention") or {}).get("causal"):
            errors.append(f"config training.tasks[{i}].attention.causal: the text task predicts the next token; "
                          "set causal: true")  # fmt: skip
    return errors


def coerce_command_line_values(config: dict, schema: Mapping) -> None:
    """Turn strings into the numbers or booleans the schema asks for, where YAML reads them so.

    Snakemake passes the values nested in `--config 'training={seeds: [0, 1]}'` as strings ('0');
    a string the schema wants as an integer, a number or a boolean is parsed as YAML and kept if it
    then has the right type. A string where the schema wants a string is never touched.
    """
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    for _ in range(100):  # each pass fixes every type error it finds; nested ones may need another
        fixed = False
        for error in validator.iter_errors(config):
            if error.validator != "type" or not isinstance(error.instance, str) or not error.absolute_path:
                continue
            value = yaml.safe_load(error.instance)
            wanted = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
            if any(validator.is_type(value, kind) for kind in wanted):
                *parents, last = error.absolute_path
                target = config
                for key in parents:
                    target = target[key]
                target[last] = value
                fixed = True
        if not fixed:
            return


def check(config: dict, schema_path: str | Path) -> None:
    """Validate `config` in place (command-line strings typed, as the schema asks); raise ConfigError
    listing each problem on one line. Snakemake's own `validate` then fills in the schema's defaults."""
    schema = yaml.safe_load(Path(schema_path).read_text())
    coerce_command_line_values(config, schema)
    errors = _schema_errors(config, schema)
    if not errors:
        errors = semantic_errors(config)
    if errors:
        raise ConfigError("\n".join(errors[:10]) + (f"\n(and {len(errors) - 10} more)" if len(errors) > 10 else ""))


def tools_on_path() -> None:
    """Put the running interpreter's folder first on PATH, so the tools the jobs call by name
    (papermill, jupyter-nbconvert for notebooks) come from the environment that runs Snakemake:
    `.venv/bin/snakemake ...` works without an activated shell."""
    import os
    import sys

    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])


def export_producers(rules) -> None:
    """Tell the jobs which rule writes which file (environment variable ATTNID_PRODUCERS: JSON
    {output regex: rule name}), so attnid.io.read_result names the rule that rebuilds a corrupt
    input. `rules`: Snakemake's `workflow.rules`, after every rule is defined."""
    import json
    import os

    from snakemake.io import regex_from_filepattern

    producers = {regex_from_filepattern(str(out)): r.name for r in rules for out in r.output}
    os.environ["ATTNID_PRODUCERS"] = json.dumps(producers)
