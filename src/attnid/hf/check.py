"""The self-check of any config: its real `transformers` class, shrunk, measured against the count.

A config.json of a mapped model type is shrunk to a tiny model with the same flags (`attnid.hf.tiny`: d_model 8,
two to four heads, two layers, one of each kind where layers differ), the class the config names is built from
it (random float64 weights, eager attention, float64 kept through the library's casts: `attnid.model.real`), and

* every distinct attention layer: P - rank of the Jacobian of that layer's attention module, inside the
  real model and called with the model's own masks and position embeddings on Gaussian inputs (a decoder's
  cross-attention, a spec with d_cross, also on Gaussian encoder states: a free input the model hands on), against
  `attnid.layer.counting.count` of its mapped spec at the tiny size;
* the whole model: P - rank of the Jacobian of all logits (`attnid.model.grid.verify_case`) against
  `attnid.model.count_model` at the tiny size; by default each position's V logits are sketched to 2 info + 2
  Gaussian combinations (`attnid.model.judge.sketch_rows`: r backward passes a position instead of V, and a
  QR of r / V the rows). rank S J <= rank J, so a sketch can only add unidentified directions, never hide one
  the count misses; `sketch=False` (`attnid check --full-jacobian`) measures the full J;

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

from ..layer.counting import count
from ..errors import SpecError
from ..flat import FlatLayout
from ..float64 import DTYPE, KeepFloat64
from ..jacobian import RANK_RTOL, input_sizing, numerical_rank, position_ids, tall_svdvals
from ..jacobian.verification import MIN_GAP, MIN_MARGIN
from ..model.real import SEQ_LEN  # positions per sequence of the whole-model check
from .mapping import CHECK_CLASSES, DECODER_SECTIONS, ENCODERS, TOWER_MODULES, model_spec
from .tiny import POSITIONS, tiny_config

MAX_TINY_PARAMS = 60_000  # a tiny model above this is refused: some key keeps it large
# A norm eps below this is measured at this value: the weakly identified directions' singular values scale with
# eps and would fall under the rank tolerance (BERT's 1e-12); every count is the same for any eps > 0.
MIN_EPS = 1e-6
# A weakly identified direction whose singular value falls as a higher power of eps (NanoChat's gainless norms:
# the smallest as 5e-3 eps^2 of the largest, measured at eps 1e-3 and 1e-2) sits under the rank tolerance at
# small eps. While the whole model measures exactly as many more unidentified directions as it measures fewer
# weak ones, it is re-measured at EPS_STEP times the eps, up to MAX_EPS: a truly unidentified direction stays
# unidentified at every eps, a weak one is resolved.
EPS_STEP, MAX_EPS = 100.0, 1e-2
def real_class(cfg: dict) -> str:
    """The `transformers` class the self-check builds: the causal LM of the model type (BERT: its masked LM; Emu3's
    text model: its wrapper's causal LM, `attnid.hf.mapping.CHECK_CLASSES`; a composite config's decoder
    section, MusicGen's: the causal LM of the composite type, `mapping.DECODER_SECTIONS`)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    mt = cfg["model_type"]
    mt = {section: outer for outer, section in DECODER_SECTIONS.items()}.get(mt, mt)
    if mt in ENCODERS or mt in CHECK_CLASSES:
        return {**ENCODERS, **CHECK_CLASSES}[mt]
    if mt not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise SpecError("model_type", f"{mt!r}: transformers registers no causal LM class for it")
    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[mt]


def meta_params(cls_name: str, tiny: dict) -> int:
    """How many parameters the class `cls_name` has when built from the config mapping `tiny` (on the meta
    device: no memory, no weights drawn; tied weights counted once)."""
    from ..model.real import instantiate, real_config

    with torch.device("meta"):
        model = instantiate(cls_name, real_config(tiny))
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
            except Exception:  # noqa: BLE001, S112 -- the class refuses 1 for this key: it is not the one
                continue
    key = max(removed, key=removed.get) if removed and max(removed.values()) > 0 else "config"
    held = f"{key} = {tiny[key]:,}" if key in tiny else "a key the shrinker does not know"
    raise SpecError(
        key, f"cannot shrink this config: {held} keeps the tiny model at {size:,} parameters (at most {MAX_TINY_PARAMS:,})"
    )


# linear attention named like softmax attention (MiniMax's lightning layers, Kimi's and Bailing's delta layers)
LINEAR_ATTENTION = ("LightningAttention", "DeltaAttention")


def text_modules(model: torch.nn.Module):
    """(name, module) of every submodule of the model that is no part of a multimodal wrapper's towers
    (`attnid.hf.mapping.TOWER_MODULES`): its text model's."""
    towers = TOWER_MODULES.get(model.config.model_type, ())
    for name, module in model.named_modules():
        if not any(name == t or name.startswith(f"{t}.") for t in towers):
            yield name, module


def attention_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """(name, module) of each block's softmax attention in the text model, in order: the outermost submodules whose
    class name ends in 'Attention' (or 'MLA': LongCat-Flash's latent attention) and names no linear attention
    (LINEAR_ATTENTION)."""
    found = []
    for name, module in text_modules(model):
        if any(name.startswith(f"{outer}.") for outer, _ in found):
            continue
        cls = type(module).__name__
        if cls.endswith(("Attention", "MLA")) and not cls.endswith(LINEAR_ATTENTION):  # LongcatFlashMLA
            found.append((name, module))
    return found


def _spread_positions(model, layer: int, kwargs: dict, x, ids, keep_ids: bool = False) -> None:
    """Replace the position ids (B, T) the module sees (unless keep_ids), or the rotary tables the model computed for
    them (for the layer type of model layer `layer`), by those of `ids`. Not through the model's forward: position
    ids that are not consecutive read as packed sequences there, and every query would see only itself."""
    if kwargs.get("position_ids") is not None and not keep_ids:
        kwargs["position_ids"] = ids
    if kwargs.get("position_embeddings") is None:
        return
    rotary = [m for _, m in text_modules(model) if type(m).__name__.endswith("RotaryEmbedding")]
    types = getattr(model.config.get_text_config(), "layer_types", None)
    with KeepFloat64():
        if "layer_type" in inspect.signature(rotary[0].forward).parameters and types:
            kwargs["position_embeddings"] = rotary[0](x, ids, types[layer])
        else:
            kwargs["position_embeddings"] = rotary[0](x, ids)


def _captured_call(model, module, tokens, positions=None, encoder=None):
    """(args, kwargs) the model passes `module` when it runs on tokens (B, T) (at position ids `positions`; with the
    encoder's states `encoder` (B, S, c), which a decoder's cross-attention reads)."""
    seen = {}

    def hook(mod, args, kwargs):
        seen["args"], seen["kwargs"] = args, dict(kwargs)

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        call = {"input_ids": tokens}
        params = inspect.signature(model.forward).parameters
        if positions is not None and "position_ids" in params:
            call["position_ids"] = positions
        if encoder is not None:  # WhisperForCausalLM names them encoder_outputs
            call["encoder_hidden_states" if "encoder_hidden_states" in params else "encoder_outputs"] = encoder
        takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        if "use_cache" in params or takes_kwargs:  # GraniteMoE's forward takes it through **kwargs
            call["use_cache"] = False
        with torch.no_grad(), KeepFloat64():
            model(**call)
    finally:
        handle.remove()
    if not seen:
        raise RuntimeError(f"the model never called its {type(module).__name__} on these inputs")
    return seen["args"], seen["kwargs"]


def layer_function(real, layer: int, spec, sizing, seed: int):
    """(f, theta, x, P): f(theta, x) = the real attention module of block `layer` on hidden states x (B, T, d),
    called as the model calls it (its mask and position embeddings for those B sequences of T tokens; a
    cross-attention spec's module also reads Gaussian encoder states (B, T, d_cross), a free input like x)."""
    model = copy.deepcopy(real.module)
    prefix, module = attention_modules(model)[layer]
    _drop_block_norms(module)
    names = [n for n, _ in module.named_parameters()]
    shapes = [tuple(p.shape) for _, p in module.named_parameters()]
    layout = FlatLayout(zip(names, shapes, strict=True), f"layer {layer}")
    gen = torch.Generator().manual_seed(int(seed) + 1)
    x = torch.randn(sizing.batch, sizing.seq_len, spec.d_model, generator=gen, dtype=DTYPE)
    # a model with one embedding table per token stream (MusicGen's K codebooks) reads (B K, T) ids and sums the
    # streams' embeddings (Moshi's config names audio codebooks too, but its input ids are one text stream)
    tables, codebooks = model.get_input_embeddings(), getattr(model.config, "num_codebooks", None)
    streams = codebooks if isinstance(tables, torch.nn.ModuleList) and len(tables) == codebooks else 1
    tokens = torch.randint(real_vocab(model), (sizing.batch * streams, sizing.seq_len), generator=gen)
    encoder = None
    if spec.d_cross:  # as many encoder states as tokens; the call hands them on (key_value_states)
        encoder = torch.randn(sizing.batch, sizing.seq_len, spec.d_cross, generator=gen, dtype=DTYPE)
    args, kwargs = _captured_call(model, module, tokens, encoder=encoder)
    for key in ("cache", "past_key_values"):  # a cache the model made anyway (XLM's) would grow with every call
        if key in kwargs:
            kwargs[key] = None
    if spec.rope_dims:  # spread positions turn the slow planes; the mask stays the contiguous one
        at = getattr(module, "layer_idx", layer)  # a hybrid's attention module sits in model layer layer_idx
        # an indexer numbers its key blocks by the position ids as slots (MiniMaxM3VLIndexer): they stay contiguous
        slots = getattr(module, "indexer", None) is not None and kwargs.get("position_embeddings") is not None
        _spread_positions(model, at, kwargs, x, position_ids(spec, sizing, seed).long(), keep_ids=slots)
    point = real.layout.unflatten(real.theta)  # the generic point, not the library's initial weights
    theta = torch.cat([point[f"{prefix}.{n}"].reshape(-1) for n in names])

    def f(th, hidden):
        params = layout.unflatten(th)
        # every positional copy of the hidden states (CTRL's MultiHeadAttention takes them as v, k and q)
        call_args = tuple(hidden if a is args[0] else a for a in args) if args else ()
        call_kwargs = {**kwargs, "hidden_states": hidden} if "hidden_states" in kwargs else kwargs
        with KeepFloat64():
            out = torch.func.functional_call(module, params, call_args, call_kwargs)
        return _attention_output(out, spec.d_model)

    return f, theta, x, layout.size


BLOCK_NORMS = ("LayerNorm", "ln", "self_attn_layer_norm")


def _drop_block_norms(module) -> None:
    """The block's LayerNorms that an encoder's attention module holds are not attention: BERT's after the residual
    add (output.LayerNorm), its pre-LN relatives' before attention (Megatron-BERT's ln, RoBERTa-PreLayerNorm's
    LayerNorm, XLM-RoBERTa-XL's self_attn_layer_norm). Each becomes the identity."""
    for owner in (module, getattr(module, "output", None)):  # q/k norms (Persimmon's q_layernorm) are attention
        for name in BLOCK_NORMS:
            if isinstance(getattr(owner, name, None), torch.nn.LayerNorm):
                setattr(owner, name, torch.nn.Identity())


def _attention_output(out, d: int):
    """The attention output (B, T, d) of what a module returns: a tensor, or a tuple / list whose first entry is
    it (GPT-1's Attention returns a list); GPT-NeoX-Japanese returns (output, weights, dense bias) for the
    layer to add, so a returned bias of shape (d,) is added here."""
    if not isinstance(out, (tuple, list)):
        return out
    bias = out[2] if len(out) == 3 else None
    if isinstance(bias, torch.Tensor) and bias.shape == (d,):
        return out[0] + bias
    return out[0]


def real_vocab(model) -> int:
    embeddings = model.get_input_embeddings()
    if isinstance(embeddings, torch.nn.ModuleList):  # MusicGen: one table per codebook, of the same size
        embeddings = embeddings[0]
    return embeddings.weight.shape[0]


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


def check_config(
    cfg: dict, seed: int = 0, oversample: float = 3.0, whole: bool = True, log=None, sketch: bool = True
) -> list[dict]:
    """The self-check's rows (module docstring): every distinct attention layer, then the whole model (sketch: its
    logits' Jacobian sketched to `attnid.model.judge.sketch_rows` rows a position; False: the full Jacobian)."""
    from ..model.counting import count_model
    from ..model.real import build_real_model

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the config's class is built locally, never fetched
    tiny = tiny_config(cfg)
    cls_name = real_class(tiny)
    _refuse_if_large(cls_name, tiny)
    spec = model_spec(tiny, seq_len=SEQ_LEN)
    measured_eps = MIN_EPS if 0 < smallest_eps(spec) < MIN_EPS else None  # None: the config's own

    def builder(at):  # build(eps, seed) -> the real model; eps None: at (None: the config's own)
        return lambda eps, seed=seed: build_real_model(cls_name, tiny, seed, at if eps is None else eps)

    build = builder(measured_eps)

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
            rows.append(_whole_row(cls_name, spec, builder, seed, oversample, measured_eps, sketch))
        _log(log, rows[-1])
    return rows


def smallest_eps(spec) -> float:
    """The smallest eps > 0 of the model's norms and its layers' q/k norms (0 when none has one)."""
    values = [spec.norm_eps] + [b.attention.norm_eps for b in spec.layer_specs if b.attention.has_norm]
    return min((v for v in values if v > 0), default=0.0)


def _whole_row(cls_name: str, spec, builder, seed: int, oversample: float, eps: float | None, sketch: bool) -> dict:
    """The whole-model row at eps (None: the config's own; builder(eps) gives the real model's build), re-measured
    at a larger eps while the only excess is weak directions left unresolved (EPS_STEP, MAX_EPS)."""
    while True:
        row = {**_check_whole(cls_name, spec, builder(eps), seed, oversample, sketch), "measured_eps": eps}
        excess, current = row["measured"] - row["count"], eps or smallest_eps(spec)
        unresolved = excess > 0 and excess == row["weak_count"] - row["weak_measured"]
        if row["verdict"] == "agree" or not unresolved or not 0 < current < MAX_EPS:
            return row
        eps = min(MAX_EPS, float(f"{EPS_STEP * current:.3g}"))


def _check_whole(cls_name: str, spec, build, seed: int, oversample: float, sketch: bool) -> dict:
    """The whole-model row. Data-limited is not disagreement: while the first half of the sequences measures
    more than all of them (a ReLU unit active on few tokens hides directions), the data is doubled, twice."""
    from ..model.grid import verify_case

    def make(s, eps_zero):
        return _whole(build, s, eps_zero)

    for attempt in range(3):
        row = verify_case(
            cls_name, "transformers", spec, make, seed, oversample * 2**attempt, other_seed=False, sketch=sketch
        )
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
