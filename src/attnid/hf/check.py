"""The self-check of any config: its real `transformers` class, shrunk, measured against the count.

A config.json of a mapped model type is shrunk to a tiny model with the same flags (:func:`tiny_config`:
d_model 8, two to four heads keeping MHA / GQA / MQA, head sizes that differ from d_model / heads where
the config's do, half the head rotated where the config rotates part of it, a window shorter than the
sequence, four experts of four units of which two are chosen, small latent ranks, a vocabulary of 32, two
layers, one of each kind where layers differ), the class the config names is built from it (random float64 weights,
eager attention, float64 kept through the library's casts: `attnid.model.real`), and

* every distinct attention layer: P - rank of the Jacobian of that layer's attention module, inside the
  real model and called with the model's own masks and position embeddings on Gaussian inputs, against
  `attnid.counting.count` of its mapped spec at the tiny size;
* the whole model: P - rank of the Jacobian of all logits (`attnid.model.grid.verify_case`) against
  `attnid.model.count_model` at the tiny size;

each with its singular-value gap and margin and, where a norm has eps > 0, its weakly identified
dimension (measured against an eps = 0 twin at the same weights; an eps below MIN_EPS, whose weak directions
the rank tolerance cannot see, is measured at MIN_EPS, which changes no count). A row's verdict is `agree`,
`disagree` (the numbers decide: gap >= MIN_GAP and margin >= MIN_MARGIN decades, and measured != count
or P != the spec's P) or `undecided`. A config is untrusted input: it is read as JSON, only the local
code of the installed `transformers` builds it (never `trust_remote_code`, never a download: the check
runs with HF_HUB_OFFLINE=1), and a config whose tiny model would still be large is refused, naming the
key that keeps it large.
"""

from __future__ import annotations

import copy
import inspect
import math
import os
import time

import torch

from ..counting import count
from ..errors import SpecError
from ..flat import FlatLayout
from ..float64 import DTYPE, KeepFloat64
from ..jacobian import RANK_RTOL, input_sizing, numerical_rank, position_ids, tall_svdvals
from ..jacobian.verification import MIN_GAP, MIN_MARGIN
from ..model.blocks import MoESpec
from ..model.real import SEQ_LEN  # positions per sequence of the whole-model check
from .coverage import ENCODERS
from .mapping import model_spec, model_type, text_config

MAX_TINY_PARAMS = 60_000  # a tiny model above this is refused: some key keeps it large
# A norm eps below this is measured at this value: the weakly identified directions' singular values scale with
# eps and would fall under the rank tolerance (BERT's 1e-12); every count is the same for any eps > 0.
MIN_EPS = 1e-6
WIDTH, VOCAB, WINDOW, MLP_WIDTH, EXPERT_WIDTH = 8, 32, 4, 16, 4
EXPERT_KEYS = ("moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size")
POSITIONS = 64  # the position range of a model without learned positions; no size the shrinker sets is above it
# (keys, value): every key present in the config (or its class defaults) is set to the value
FIXED = (
    (("hidden_size", "n_embd", "d_model"), WIDTH),
    (("vocab_size",), VOCAB),
    (("intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size", "ffn_hidden_dim"), MLP_WIDTH),
    (EXPERT_KEYS, EXPERT_WIDTH),
    (("num_local_experts", "num_experts", "n_routed_experts"), 4),
    (("num_experts_per_tok", "experts_per_token", "moe_topk"), 2),
    (("word_embed_proj_dim",), WIDTH),
    (("kv_lora_rank",), 4),
    (("qk_nope_head_dim",), 4),
    (("qk_rope_head_dim",), 2),
    (("v_head_dim",), 4),
)
HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads")
KV_KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
POSITION_KEYS = ("max_position_embeddings", "n_positions")


def _class_defaults(mt: str) -> dict:
    """The config class's default values (what `transformers` fills in for keys a config.json leaves out)."""
    from transformers import CONFIG_MAPPING

    try:
        return CONFIG_MAPPING[mt]().to_dict()
    except Exception:  # a class that needs arguments: only the config's own keys are shrunk
        return {}


def _set(tiny: dict, defaults: dict, keys, value) -> None:
    for key in keys:
        if tiny.get(key) is not None or (key not in tiny and defaults.get(key) is not None):
            tiny[key] = value


def _layers_kept(cfg: dict, n_layers: int, spec) -> list[int]:
    """The layer indices the tiny model keeps: one of each distinct block (attention spec and MLP kind), two at least."""
    kinds = [(b.attention.sliding_window > 0, b.attention.rope_base, type(b.mlp).__name__) for b in spec.layer_specs]
    kept = sorted({kinds.index(k) for k in kinds})
    return (kept + [i for i in range(n_layers) if i not in kept])[: max(2, len(kept))]


def tiny_config(cfg: dict) -> dict:
    """The config shrunk to the self-check's size, with the same flags (module docstring)."""
    from .modules import _modern_keys

    mt = model_type(cfg)
    cfg = _modern_keys({k: v for k, v in text_config(cfg).items() if not k.startswith("_")})
    cfg["model_type"] = "gemma3_text" if mt == "gemma3_text" else cfg["model_type"]
    spec = model_spec(cfg)
    defaults = _class_defaults(cfg["model_type"])
    tiny = dict(cfg)
    a = spec.attention
    gqa, mqa = 1 < a.n_kv_heads < a.n_heads, a.n_kv_heads == 1 < a.n_heads
    H = 4 if gqa else 2
    for keys, value in FIXED:
        _set(tiny, defaults, keys, value)
    experts = any(isinstance(b.mlp, MoESpec) for b in spec.layer_specs)
    if experts and not any(k in cfg or defaults.get(k) is not None for k in EXPERT_KEYS):  # experts read the MLP width
        tiny["intermediate_size"] = EXPERT_WIDTH  # (Mixtral, GPT-OSS): four units each, a quarter of the parameters
    _set(tiny, defaults, HEAD_KEYS, H)
    _set(tiny, defaults, KV_KEYS, 2 if gqa else (1 if mqa else H))
    if tiny.get("head_dim") is not None or "head_dim" in defaults:  # the class reads a head size of its own
        tiny["head_dim"] = 6 if a.d_head_qk * a.n_heads != a.d_model else (4 if H == 2 else 2)
    if isinstance(tiny.get("rope_parameters"), dict) and tiny["rope_parameters"].get("partial_rotary_factor"):
        tiny["rope_parameters"] = {**tiny["rope_parameters"], "partial_rotary_factor": 0.5}
    if 0 < a.rope_dims < a.d_head_qk and not a.kv_lora_rank:  # partial rotary: half of the tiny head
        for key in ("partial_rotary_factor", "rotary_pct"):
            _set(tiny, defaults, (key,), 0.5)
        if tiny.get("rotary_dim"):
            tiny["rotary_dim"] = WIDTH // H // 2
    if tiny.get("q_lora_rank"):
        tiny["q_lora_rank"] = 6
    if a.kv_lora_rank:  # sizes DeepseekV3Config derives (a default config lists them): the rotary dim, the q/k head
        rope, nope = tiny["qk_rope_head_dim"], tiny["qk_nope_head_dim"]
        for key, value in (("head_dim", rope), ("qk_head_dim", nope + rope)):
            if key in tiny:
                tiny[key] = value
    for key in ("n_group", "topk_group", "first_k_dense_replace"):  # set in the config or by its class's defaults
        if tiny.get(key, defaults.get(key)):
            tiny[key] = 1
    if tiny.get("sliding_window"):
        tiny["sliding_window"] = WINDOW
    n_layers = spec.n_layers
    kept = _layers_kept(cfg, n_layers, spec)
    for key, value in cfg.items():  # per-layer lists (layer_types, no_rope_layers, ...): the kept layers' entries
        if isinstance(value, list) and len(value) == n_layers:
            tiny[key] = [value[i] for i in kept]
    if "sliding_window_pattern" in tiny and tiny["sliding_window_pattern"]:
        tiny["sliding_window_pattern"] = 2
    if tiny.get("max_window_layers") is not None:
        tiny["max_window_layers"] = 1
    if isinstance(tiny.get("mlp_only_layers"), list):
        tiny["mlp_only_layers"] = [kept.index(i) for i in tiny["mlp_only_layers"] if i in kept]
    _set(tiny, defaults, LAYER_KEYS, len(kept))
    _set(tiny, defaults, POSITION_KEYS, SEQ_LEN if spec.positions == "learned" else POSITIONS)
    return tiny


def real_class(cfg: dict) -> str:
    """The `transformers` class the self-check builds: the causal LM of the model type (BERT: its masked LM)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    mt = cfg["model_type"]
    if mt in ENCODERS:
        return ENCODERS[mt]
    if mt not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise SpecError("model_type", f"{mt!r}: transformers registers no causal LM class for it")
    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[mt]


def meta_params(cls_name: str, tiny: dict) -> int:
    """How many parameters the class `cls_name` has when built from the config mapping `tiny` (on the meta
    device: no memory, no weights drawn; tied weights counted once)."""
    import transformers

    from ..model.real import real_config

    with torch.device("meta"):
        model = getattr(transformers, cls_name)(real_config(tiny))
    return sum(p.numel() for p in model.parameters())


def _refuse_if_large(cls_name: str, tiny: dict) -> None:
    """SpecError naming the key that keeps the tiny model large when it has more than MAX_TINY_PARAMS parameters:
    of the integer keys above every size the shrinker sets (POSITIONS), the one whose setting to 1 removes the most."""
    size = meta_params(cls_name, tiny)
    if size <= MAX_TINY_PARAMS:
        return
    removed = {}
    for key, value in tiny.items():
        if isinstance(value, int) and not isinstance(value, bool) and value > POSITIONS:
            try:
                removed[key] = size - meta_params(cls_name, {**tiny, key: 1})
            except Exception:  # the class refuses 1 for this key: it is not the one
                continue
    key = max(removed, key=removed.get) if removed and max(removed.values()) > 0 else "config"
    held = f"{key} = {tiny[key]:,}" if key in tiny else "a key the shrinker does not know"
    raise SpecError(
        key, f"cannot shrink this config: {held} keeps the tiny model at {size:,} parameters (at most {MAX_TINY_PARAMS:,})"
    )


def attention_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """(name, module) of each block's attention, in order: the outermost submodules whose class name ends in
    'Attention'."""
    found = []
    for name, module in model.named_modules():
        if any(name.startswith(f"{outer}.") for outer, _ in found):
            continue
        if type(module).__name__.endswith("Attention"):
            found.append((name, module))
    return found


def _spread_positions(model, layer: int, kwargs: dict, x, ids) -> None:
    """Replace the position ids (B, T) the module sees, or the rotary tables the model computed for them, by
    those of `ids`. Not through the model's forward: position ids that are not consecutive read as packed
    sequences there, and every query would see only itself."""
    if kwargs.get("position_ids") is not None:
        kwargs["position_ids"] = ids
    if kwargs.get("position_embeddings") is None:
        return
    rotary = [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]
    types = getattr(model.config, "layer_types", None)
    with KeepFloat64():
        if "layer_type" in inspect.signature(rotary[0].forward).parameters and types:
            kwargs["position_embeddings"] = rotary[0](x, ids, types[layer])
        else:
            kwargs["position_embeddings"] = rotary[0](x, ids)


def _captured_call(model, module, tokens, positions=None):
    """(args, kwargs) the model passes `module` when it runs on tokens (B, T) (at position ids `positions`)."""
    seen = {}

    def hook(mod, args, kwargs):
        seen["args"], seen["kwargs"] = args, dict(kwargs)

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        call = {"input_ids": tokens}
        params = inspect.signature(model.forward).parameters
        if positions is not None and "position_ids" in params:
            call["position_ids"] = positions
        if "use_cache" in params:
            call["use_cache"] = False
        with torch.no_grad(), KeepFloat64():
            model(**call)
    finally:
        handle.remove()
    return seen["args"], seen["kwargs"]


def layer_function(real, layer: int, spec, sizing, seed: int):
    """(f, theta, x, P): f(theta, x) = the real attention module of block `layer` on hidden states x (B, T, d),
    called as the model calls it (its mask and position embeddings for those B sequences of T tokens)."""
    model = copy.deepcopy(real.module)
    prefix, module = attention_modules(model)[layer]
    output = getattr(module, "output", None)  # BERT: the block's LayerNorm after the residual add is not attention
    if output is not None and hasattr(output, "LayerNorm"):
        output.LayerNorm = torch.nn.Identity()
    names = [n for n, _ in module.named_parameters()]
    shapes = [tuple(p.shape) for _, p in module.named_parameters()]
    layout = FlatLayout(zip(names, shapes, strict=True), f"layer {layer}")
    gen = torch.Generator().manual_seed(int(seed) + 1)
    x = torch.randn(sizing.batch, sizing.seq_len, spec.d_model, generator=gen, dtype=DTYPE)
    tokens = torch.randint(real_vocab(model), (sizing.batch, sizing.seq_len), generator=gen)
    args, kwargs = _captured_call(model, module, tokens)
    if spec.rope_dims:  # spread positions turn the slow planes; the mask stays the contiguous one
        _spread_positions(model, layer, kwargs, x, position_ids(spec, sizing, seed).long())
    point = real.layout.unflatten(real.theta)  # the generic point, not the library's initial weights
    theta = torch.cat([point[f"{prefix}.{n}"].reshape(-1) for n in names])

    def f(th, hidden):
        params = layout.unflatten(th)
        call_args = (hidden, *args[1:]) if args else ()
        call_kwargs = {**kwargs, "hidden_states": hidden} if "hidden_states" in kwargs else kwargs
        with KeepFloat64():
            out = torch.func.functional_call(module, params, call_args, call_kwargs)
        return out[0] if isinstance(out, tuple) else out

    return f, theta, x, layout.size


def real_vocab(model) -> int:
    return model.get_input_embeddings().weight.shape[0]


def _verdict(row: dict) -> str:
    decided = row["gap"] >= MIN_GAP and row["margin"] >= MIN_MARGIN
    if row["P"] != row["P_spec"]:
        return "disagree"
    if not decided:
        return "undecided"
    ok = row["measured"] == row["count"] == row["measured_half"] and row["weak_measured"] == row["weak_count"]
    return "agree" if ok else "disagree"


def _layer_rank(f, theta, x) -> tuple[dict, dict, torch.Tensor]:
    J = torch.func.jacrev(lambda th: f(th, x).reshape(-1))(theta)  # (B T d, P)
    sigma = tall_svdvals(J)
    half = tall_svdvals(J[: J.shape[0] // 2])
    return numerical_rank(sigma, RANK_RTOL), numerical_rank(half, RANK_RTOL), sigma / sigma.max()


def check_layer(build, layer: int, spec, seed: int = 0, oversample: float = 3.0, max_len: int | None = None) -> dict:
    """One row: block `layer`'s real attention module against `count(spec)` (build(eps) gives the real model;
    max_len: the longest sequence it takes, the rows of a learned position table)."""
    start = time.perf_counter()
    counts = count(spec)
    sizing = input_sizing(spec, oversample)
    if max_len is not None and sizing.seq_len > max_len:
        sizing = input_sizing(spec, oversample, seq_len=max_len)
    f, theta, x, P = layer_function(build(None), layer, spec, sizing, seed)
    rank, half, sigma = _layer_rank(f, theta, x)
    row = {"part": f"layer {layer}", "spec": spec.label, "P": P, "P_spec": spec.n_params}
    row |= {"count": counts.unidentified, "measured": P - rank["rank"], "measured_half": P - half["rank"]}
    row |= {"gap": rank["gap"], "margin": rank["margin"], "weak_count": counts.weakly_identified, "weak_measured": 0}
    if spec.has_norm and spec.norm_eps > 0:
        f0, theta0, _, _ = layer_function(build(0.0), layer, spec, sizing, seed)
        rank0, _, _ = _layer_rank(f0, theta0, x)
        row["weak_measured"] = rank["rank"] - rank0["rank"]
        if row["weak_measured"] > 0:  # the gap and margin of the strong directions, above the weak ones
            strong = numerical_rank(sigma[: rank0["rank"]], RANK_RTOL)
            row |= {"weak_sigma_min": float(sigma[rank0["rank"] : rank["rank"]].min()), "margin": strong["margin"]}
    row["verdict"] = _verdict(row)
    row["seconds"] = time.perf_counter() - start
    return row


def check_config(cfg: dict, seed: int = 0, oversample: float = 3.0, whole: bool = True, log=None) -> list[dict]:
    """The self-check's rows (module docstring): every distinct attention layer, then the whole model."""
    from ..model.counting import count_model
    from ..model.real import build_real_model

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the config's class is built locally, never fetched
    tiny = tiny_config(cfg)
    cls_name = real_class(tiny)
    _refuse_if_large(cls_name, tiny)
    spec = model_spec(tiny, seq_len=SEQ_LEN)
    measured_eps = MIN_EPS if 0 < smallest_eps(spec) < MIN_EPS else None  # None: the config's own

    def build(eps, seed=seed):
        return build_real_model(cls_name, tiny, seed, measured_eps if eps is None else eps)

    rows, seen = [], []
    for i, block in enumerate(spec.layer_specs):
        if block.attention in seen:
            continue
        seen.append(block.attention)
        max_len = spec.seq_len if spec.positions == "learned" else None  # positions the table holds
        rows.append(check_layer(build, i, block.attention, seed, oversample, max_len))
        rows[-1]["measured_eps"] = measured_eps
        _log(log, rows[-1])
    if whole:
        try:
            count_model(spec)
        except SpecError as err:
            rows.append({"part": "whole model", "spec": spec.label, "verdict": "refused", "reason": str(err)})
        else:
            rows.append({**_check_whole(cls_name, spec, build, seed, oversample), "measured_eps": measured_eps})
        _log(log, rows[-1])
    return rows


def smallest_eps(spec) -> float:
    """The smallest eps > 0 of the model's norms and its layers' q/k norms (0 when none has one)."""
    values = [spec.norm_eps] + [b.attention.norm_eps for b in spec.layer_specs if b.attention.has_norm]
    return min((v for v in values if v > 0), default=0.0)


def _check_whole(cls_name: str, spec, build, seed: int, oversample: float) -> dict:
    """The whole-model row. Data-limited is not disagreement: while the first half of the sequences measures
    more than all of them (a ReLU unit active on few tokens hides directions), the data is doubled, twice."""
    from ..model.grid import verify_case

    def make(s, eps_zero):
        return _whole(build, s, eps_zero)

    for attempt in range(3):
        row = verify_case(cls_name, "transformers", spec, make, seed, oversample * 2**attempt, other_seed=False)
        if row["measured_half"] == row["measured"]:
            break
    row = {"part": "whole model", "spec": spec.label, **row, "oversample": oversample * 2**attempt}
    row["margin"] = math.log10(row["sigma_kept"] / RANK_RTOL)
    row["verdict"] = _verdict(row)
    return row


def _whole(build, seed, eps_zero):
    real = build(0.0 if eps_zero else None, seed)
    return real.forward, real.theta


def _log(log, row: dict) -> None:
    if log is None:
        return
    if row["verdict"] == "refused":
        log(f"{row['part']:12s} refused: {row['reason']}")
        return
    log(
        f"{row['part']:12s} P={row['P']} (spec {row['P_spec']}) count={row['count']} measured={row['measured']}"
        f" (half {row['measured_half']}) weak {row['weak_count']}/{row['weak_measured']}"
        f" gap={row['gap']:.1f} margin={row['margin']:.1f}: {row['verdict']}"
    )
