"""Display names of the training sweep's categorical values, and the order they are shown in.

Shared by figures, tables and macros (so a legend and a sentence of the paper name an optimizer
the same way); no matplotlib here, so the macro writers stay light.
"""

from __future__ import annotations

import re

# Unknown values are shown as they are.
OPTIMIZER_NAMES = {
    "sgd": "SGD",
    "sgd_wd": "SGD + weight decay",
    "sgd_momentum": "SGD + momentum",
    "adam": "Adam",
    "adam_shared": "Adam (shared second moment)",
    "adamw": "AdamW",
}
# the same, short enough for a category axis of a narrow panel
OPTIMIZER_SHORT = {
    "sgd": "SGD",
    "sgd_wd": "SGD+wd",
    "sgd_momentum": "momentum",
    "adam": "Adam",
    "adam_shared": "Adam (shared)",
    "adamw": "AdamW",
}
# the sources of the whole-model orbit (attnid.gauge's generator groups, by count_model's breakdown keys)
SOURCE_NAMES = {
    "layers": "attention layers alone",
    "all": "whole model",
    "attention": "attention",
    "mlp_hidden": "MLP units",
    "moe_hidden_units": "expert units",
    "moe_router": "router shift",
    "norm_gain": "norm gains",
    "norm_bias": "norm biases",
    "residual_rotations": "residual stream",
    "centring_readers": "centring (readers)",
    "centring_writers": "centring (writers)",
    "embeddings": "embeddings",
}
REBALANCE_NAMES = {"none": "no rebalancing", "project": "project out", "balance": "balance"}
TASK_NAMES = {
    "teacher_student": "teacher-student",
    "teacher-student": "teacher-student",
    "recall": "associative recall",
    "markov": "Markov chain",
    "text": "text (pandas docstrings)",  # the default corpus (attnid.training.corpus)
}
MODEL_NAMES = {"own": "attnid", "llama": "Llama", "gpt2": "GPT-2", "mixtral": "Mixtral"}  # the model that learns a task
# A task learned by a model, as one key `task` or `task/model` (this project's own model: the task alone),
# in the order the figures and tables show them.
SETTING_NAMES = {
    "teacher_student": "teacher-student",
    "teacher_student_fixed_head": "teacher-student, fixed head size",
    "recall": "recall",
    "recall_fixed_head": "recall, fixed head size",
    "recall/llama": "recall, Llama",
    "recall/gpt2": "recall, GPT-2",
    "markov": "Markov chain",
    "markov/llama": "Markov, Llama",
    "markov/gpt2": "Markov, GPT-2",
    "markov_fixed_head/llama": "Markov, Llama, fixed head size",
    "text": "text",
    "text/llama": "text, Llama",
    "text/gpt2": "text, GPT-2",
    "text/mixtral": "text, Mixtral",
}


def setting(task: str, model: str) -> str:
    """The key of a (task, model): the task for this project's own model, else 'task/model'."""
    return task if model in ("own", "", None) else f"{task}/{model}"


def with_settings(df):
    """A copy whose `task` column holds the setting key (attnid.report.labels.setting) of each row's task and
    model, so figures and tables that group by task show every (task, model) apart."""
    if "model" not in df:
        return df
    out = df.copy()
    out["task"] = [setting(t, m) for t, m in zip(out["task"], out["model"])]
    return out


def ordered(values, order) -> list:
    """The distinct `values`, those named in `order` first (in that order), the rest sorted."""
    present = list(dict.fromkeys(values))
    return [v for v in order if v in present] + sorted(v for v in present if v not in order)


# Spec labels (attnid.layer.spec.AttentionSpec.label, e.g. d8_h2_g1_k6_v6_r2_bqkv_c) as a reader reads them.
_LABEL_FIELDS = re.compile(r"d(\d+)_h(\d+)_g(\d+)_k(\d+)_v(\d+)_r(\d+)_b([a-z]+)((?:_[\w.+-]+)*)$")
# The label parts after the standard fields (attnid.layer.spec_variants.VARIANT_LABEL, causal, base, T), in words.
_EXTRA_TEXT = (
    (re.compile(r"c$"), lambda m: "causal"),
    (re.compile(r"base(.+)$"), lambda m: f"RoPE base {m.group(1)}"),
    (re.compile(r"T(\d+)$"), lambda m: f"T = {m.group(1)}"),
    (re.compile(r"w(\d+)$"), lambda m: f"window {m.group(1)}"),
    (re.compile(r"cap(.+)$"), lambda m: f"softcap {m.group(1)}"),
    (re.compile(r"qkrmshead$"), lambda m: "q/k RMSNorm per head"),
    (re.compile(r"qkrmsall$"), lambda m: "q/k RMSNorm across heads"),
    (re.compile(r"qklayernormhead$"), lambda m: "q/k LayerNorm per head"),
    (re.compile(r"eps(.+)$"), lambda m: f"norm eps {m.group(1)}"),
    (re.compile(r"sinks$"), lambda m: "sinks"),
    (re.compile(r"alibi$"), lambda m: "ALiBi"),
    (re.compile(r"mla(\d+)$"), lambda m: f"latent KV rank {m.group(1)}"),
    (re.compile(r"q(\d+)$"), lambda m: f"latent Q rank {m.group(1)}"),
)


def label_fields(label: str) -> dict | None:
    """The fields of a spec label: d, H, G, d_k, d_v, p (rotated dims), biases ('' for none) and `extras`
    (the later parts in words, e.g. ['causal', 'window 3']); None when `label` is not a spec label."""
    m = _LABEL_FIELDS.fullmatch(label)
    if m is None:
        return None
    d, h, g, k, v, p = (int(x) for x in m.groups()[:6])
    extras = []
    for part in [x for x in m.group(8).split("_") if x]:
        found = next((text(hit) for pattern, text in _EXTRA_TEXT if (hit := pattern.fullmatch(part))), part)
        extras.append(found)
    biases = "" if m.group(7) == "none" else m.group(7)
    return {"d": d, "H": h, "G": g, "d_k": k, "d_v": v, "p": p, "biases": biases, "extras": extras}


def rope_words(p: int, d_k: int) -> str:
    """'no RoPE', 'full RoPE' or 'RoPE p/d_k' (rotated of the query/key head's dimensions)."""
    return "no RoPE" if p == 0 else "full RoPE" if p == d_k else f"RoPE {p}/{d_k}"


def spec_text(label: str, math: bool = True) -> str:
    """A readable name for a spec label: 'd4_h2_g1_k6_v6_r2_bqkv_c' -> '$d=4$, $H=2$, $G=1$, $d_k=d_v=6$,
    RoPE 2/6, biases qkv, causal' (G and the head sizes only where they differ from MHA and d/H; the
    later parts in words). A string that is not a label is returned unchanged; math=False writes plain
    text (d=4, ...)."""
    f = label_fields(label)
    if f is None:
        return label
    wrap = (lambda s: f"${s}$") if math else (lambda s: s)
    parts = [wrap(f"d={f['d']}"), wrap(f"H={f['H']}")]
    if f["G"] != f["H"]:
        parts.append(wrap(f"G={f['G']}"))
    if (f["d_k"], f["d_v"]) != (f["d"] // f["H"],) * 2 or f["d"] % f["H"]:
        k, v = f["d_k"], f["d_v"]
        parts.append(wrap(f"d_k=d_v={k}") if k == v else wrap(f"d_k={k}") + ", " + wrap(f"d_v={v}"))
    parts.append(rope_words(f["p"], f["d_k"]))
    parts.append(f"biases {f['biases']}" if f["biases"] else "no biases")
    return ", ".join(parts + f["extras"])
