"""Real `transformers` architectures as trained models: tiny LlamaForCausalLM, GPT2LMHeadModel and
MixtralForCausalLM in float64.

A run of `model: llama`, `gpt2` or `mixtral` trains the library's own class through its own forward pass:
`torch.func.functional_call(module, params, input_ids=...)` on the real module (eager attention, float64
kept through the library's casts by attnid.float64.KeepFloat64, as in attnid.model.real), vmapped over
the runs of a job by attnid.training.batched. Sizes come from the run config:

    llama  hidden_size d, num_attention_heads H, num_key_value_heads G (RunConfig.kv_ratio: GQA), head_dim
           d / H, RoPE on every query/key dim (base 10^4), RMSNorm, SwiGLU MLP of width mlp_ratio d,
           untied embeddings
    gpt2   n_embd d, n_head H, learned positions, LayerNorm, GELU MLP of width mlp_ratio d, q/k/v/o biases,
           tied embeddings, no dropout
    mixtral Llama's attention, norms and embeddings (MixtralForCausalLM), its MLP a sparse mixture of
           N_EXPERTS = 4 SwiGLU experts, TOP_K = 2 per token (softmax router, the chosen two renormalised),
           each of width mlp_ratio d / 2, no sliding window, no router jitter

Mixtral's experts (MixtralSparseMoeBlock, transformers/models/mixtral/modeling_mixtral.py): for a token x (d,),
p = softmax(W_r x) over the experts, S its TOP_K largest, and

    y = sum_{e in S} (p_e / sum_{e' in S} p_e') W_down,e (silu(W_gate,e x) * W_up,e x)

(gate_up_proj (E, 2F, d) stacks W_gate and W_up, down_proj (E, d, F)). Width F = mlp_ratio d / TOP_K: a token passes
through TOP_K experts, so it sees a hidden width of mlp_ratio d, Llama's at the same run config (the same compute
per token, twice the MLP parameters), and 4 experts at top-2 keep every expert trained on about half the tokens of a
tiny batch. The experts run through attnid.training.dense_experts' `dense` implementation, registered in `transformers`'
ExpertsInterface (transformers/integrations/moe.py): every expert on every token, weighted by the routing weights
scattered to (tokens, experts), zero for the experts not chosen, as two matrix products over the stacked weights;
the same sum as `batched_mm` to rounding, loss and gradient (tests/test_training_archs.py), and it vmaps over the
runs and is deterministic. Of transformers' own: the default `eager` loops over the experts hit with data-dependent
`torch.where`, which vmap cannot batch; `grouped_mm` refuses float64 (torch's grouped matmul: float32, bfloat16 or
float16 only); `batched_mm` vmaps but gathers every (token, choice)'s expert weights, a copy of (N TOP_K, 2F, d)
and (N TOP_K, d, F) that makes a 12-run Markov step (d_model 32) 3.9x Llama's where dense, at N_EXPERTS / TOP_K = 2
times the experts' multiply-adds, is 1.4x. The router's top-k makes the loss piecewise smooth in theta: smooth wherever no token's TOP_K-th and next
scores tie (a set of measure zero), the choice itself carrying no gradient. The whole-model orbit (attnid.gauge)
adds to Llama's sources each expert's hidden-unit scalings and the router's shift (W_r + 1 c^T leaves p unchanged).

Initial point (:func:`init_params`, from the run's model stream): weights N(0, 1/fan_in), embeddings
N(0, 1), norm gains 1, biases 0 (the scales of attnid.training.models' own transformer). fan_in is the size
of the axis a weight reads: a Linear's (out, in) last, a Conv1D's (in, out) first, Mixtral's router (E, d) d,
and a stacked expert weight (E, out, in) its last, (E, in, out) its middle where the experts class is
transposed (`is_transposed`, set by transformers' use_experts_implementation): gate_up_proj (E, 2F, d)
reads d, down_proj (E, d, F) reads F.

The attention layers inside, as attnid.layer.layout sees them (:func:`attention_maps`): for each block, the
AttentionSpec of its attention and an index vector that gathers that spec's flat layout (W_Q, [b_Q], W_K,
..., W_O, [b_O]) out of the run's flat parameter vector (`named_parameters()` order, each tensor row-major).
Llama's (and Mixtral's) rotary embedding rotates dim i with dim i + k/2 (`rotate_half`); attnid's RoPE rotates
the planes (0, 1), (2, 3), ...: the map sends layout dim 2j to Hugging Face dim j and 2j + 1 to j + k/2, which is
the same rotation at the same frequency base^(-2j/k) (tests/test_training_archs.py checks the attention output
of the gathered layout against the module's own to rounding). The symmetry tools (attnid.symmetry:
projection, balance, conserved quantities) then act on each layer through this map.
"""

from __future__ import annotations

import math

import torch

from ..float64 import KeepFloat64
from ..softmax import ShortSoftmax
from ..layer.spec import AttentionSpec
from .dense_experts import DENSE, register
from .tasks import STREAM_MODEL, generator

ARCHS = ("llama", "gpt2", "mixtral")
CLASSES = {"llama": "LlamaForCausalLM", "gpt2": "GPT2LMHeadModel", "mixtral": "MixtralForCausalLM"}
ROPE_BASE = 10000.0
N_EXPERTS, TOP_K = 4, 2  # mixtral's experts and experts per token (module docstring)
EXPERTS_IMPLEMENTATION = DENSE  # attnid.training.dense_experts: vmaps, no gather, no data-dependent loop


def hf_config(model: str, spec: AttentionSpec, n_tokens: int, seq_len: int, n_layers: int, mlp_ratio: int) -> dict:
    """The config mapping of the tiny `model` (module docstring)."""
    d, H = spec.d_model, spec.n_heads
    common = {"pad_token_id": None, "bos_token_id": None, "eos_token_id": None}
    llama = {"vocab_size": n_tokens, "hidden_size": d, "intermediate_size": mlp_ratio * d,
             "num_hidden_layers": n_layers, "num_attention_heads": H, "num_key_value_heads": spec.G,
             "head_dim": spec.d_head_qk, "max_position_embeddings": seq_len, "rms_norm_eps": 1e-6,
             "rope_theta": ROPE_BASE, "tie_word_embeddings": False, **common}  # fmt: skip
    if model == "llama":
        return {"model_type": "llama", **llama, "attention_bias": False, "mlp_bias": False}
    if model == "mixtral":  # Mixtral has no bias keys: its projections have none (modeling_mixtral.py)
        return {"model_type": "mixtral", **llama, "intermediate_size": max(1, mlp_ratio * d // TOP_K),
                "num_local_experts": N_EXPERTS, "num_experts_per_tok": TOP_K, "sliding_window": None,
                "router_jitter_noise": 0.0, "output_router_logits": False}  # fmt: skip
    if model == "gpt2":  # gelu_pytorch_tanh: GPT-2's gelu_new (the tanh approximation) as one fused kernel, equal
        # to it within 8.9e-16 on 1e5 float64 draws of 3 N(0, 1), 3.4x faster forward + backward here
        return {"model_type": "gpt2", "vocab_size": n_tokens, "n_embd": d, "n_head": H, "n_layer": n_layers,
                "activation_function": "gelu_pytorch_tanh",
                "n_inner": mlp_ratio * d, "n_positions": seq_len, "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0,
                "embd_pdrop": 0.0, "attn_pdrop": 0.0, "tie_word_embeddings": True, **common}  # fmt: skip
    raise ValueError(f"model must be one of {ARCHS}, got {model!r}")


def build_module(model: str, spec: AttentionSpec, n_tokens: int, seq_len: int, n_layers: int, mlp_ratio: int):
    """The `transformers` module (float64, eval mode, eager attention, no padding row); its parameters are
    placeholders: every forward pass goes through functional_call with a run's own."""
    import transformers

    from ..model.real import prepare_module, real_config

    cfg = hf_config(model, spec, n_tokens, seq_len, n_layers, mlp_ratio)
    config = real_config(cfg)
    if model in ("llama", "mixtral") and getattr(config, "rope_parameters", None):  # the base (rope_parameters, 5.x)
        config.rope_parameters["rope_theta"] = ROPE_BASE
    if model == "mixtral":
        register()  # DENSE in transformers' ExpertsInterface, before the class checks the name
        config._experts_implementation = EXPERTS_IMPLEMENTATION
    # built inside KeepFloat64: the rotary tables' inverse frequencies, computed at construction in float32
    # (LlamaRotaryEmbedding / MixtralRotaryEmbedding.compute_default_rope_parameters, models/{llama,mixtral}/
    # modeling_*.py: `torch.arange(0, dim, 2, dtype=torch.float)`), come out float64, so
    # the module's RoPE turns at attnid's base^(-2j/k) to rounding (float32: 2e-10 off at k = 4)
    with torch.device("cpu"), KeepFloat64():
        module = getattr(transformers, CLASSES[model])(config)
    return prepare_module(module)


def fan_in(module: torch.nn.Module) -> dict[str, int]:
    """{name: the size of the axis it reads} of every weight of 2 or more dims (module docstring)."""
    from transformers.pytorch_utils import Conv1D

    out = {}
    for prefix, sub in module.named_modules():
        for name, p in sub.named_parameters(prefix=prefix, recurse=False):
            if p.dim() == 3:  # stacked experts (E, out, in), or (E, in, out) transposed (integrations/moe.py)
                out[name] = p.shape[1] if getattr(sub, "is_transposed", False) else p.shape[2]
            elif p.dim() == 2:
                out[name] = p.shape[0] if isinstance(sub, Conv1D) else p.shape[1]  # Conv1D stores (in, out)
    return out


def init_params(module: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """The run's initial parameters {name: tensor} (named_parameters order, tied ones once): module docstring."""
    gen = generator(seed, STREAM_MODEL)
    fans = fan_in(module)
    out = {}
    for name, p in module.named_parameters():
        if p.dim() == 1:
            gain = ("norm" in name or ".ln_" in name or name.startswith("ln_") or ".ln_f" in name) and name.endswith(
                "weight"
            )
            out[name] = torch.ones(p.shape, dtype=torch.float64) if gain else torch.zeros(p.shape, dtype=torch.float64)
            continue
        sample = torch.randn(p.shape, generator=gen, dtype=torch.float64)
        if "emb" in name or "wte" in name or "wpe" in name:
            out[name] = sample
        else:
            out[name] = sample / math.sqrt(fans[name])
    return out


def forward_plain(module: torch.nn.Module, params: dict, tokens: torch.Tensor, last_only: bool = False) -> torch.Tensor:
    """Logits (B, T, V) of the real module at `params` (or (B, 1, V) of the last position), in its own dtypes."""
    kwargs = {"input_ids": tokens, "use_cache": False}
    if last_only:
        kwargs["logits_to_keep"] = 1
    with ShortSoftmax():  # the class's attention softmax over a short key axis, in the layout that is fast here
        return torch.func.functional_call(module, params, (), kwargs).logits


def forward(module: torch.nn.Module, params: dict, tokens: torch.Tensor, last_only: bool = False) -> torch.Tensor:
    """:func:`forward_plain` in float64 throughout (the library's float32 casts become float64 ones)."""
    with KeepFloat64():
        return forward_plain(module, params, tokens, last_only)


def _offsets(module: torch.nn.Module) -> dict[str, tuple[int, tuple]]:
    """{name: (offset in the flat vector, shape)} in named_parameters order."""
    out, offset = {}, 0
    for name, p in module.named_parameters():
        out[name] = (offset, tuple(p.shape))
        offset += p.numel()
    return out


def _flat_index(offset: int, shape: tuple, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Flat positions of entries [rows, cols] of a 2-D parameter stored row-major at `offset`."""
    return offset + rows * shape[1] + cols


def attention_maps(model: str, module: torch.nn.Module, spec: AttentionSpec) -> list[torch.Tensor]:
    """Per block, the index vector (P_layer,) of attnid's layout of `spec` in the flat parameter vector."""
    from ..layer.layout import Layout

    layout, offsets = Layout(spec), _offsets(module)
    H, G, d, k, v = spec.n_heads, spec.G, spec.d_model, spec.d_head_qk, spec.d_head_v
    n_layers = module.config.num_hidden_layers
    maps = []
    for layer in range(n_layers):
        blocks = {}
        if model in ("llama", "mixtral"):  # Mixtral's attention is Llama's (MixtralAttention, no biases)
            pre = f"model.layers.{layer}.self_attn."
            hf_dim = torch.tensor([j // 2 + (j % 2) * (k // 2) for j in range(k)])  # layout dim -> HF dim
            for name, proj, heads in (("W_Q", "q_proj", H), ("W_K", "k_proj", G)):
                off, shape = offsets[pre + proj + ".weight"]  # (heads k, d): q = x W^T
                h, i, j = torch.meshgrid(torch.arange(heads), torch.arange(d), torch.arange(k), indexing="ij")
                blocks[name] = _flat_index(off, shape, h * k + hf_dim[j], i)  # W[h, i, j] = weight[h k + j', i]
            off, shape = offsets[pre + "v_proj.weight"]
            g, i, j = torch.meshgrid(torch.arange(G), torch.arange(d), torch.arange(v), indexing="ij")
            blocks["W_V"] = _flat_index(off, shape, g * v + j, i)
            off, shape = offsets[pre + "o_proj.weight"]  # (d, H v): y = heads W_O^T
            h, j, i = torch.meshgrid(torch.arange(H), torch.arange(v), torch.arange(d), indexing="ij")
            blocks["W_O"] = _flat_index(off, shape, i, h * v + j)
        elif model == "gpt2":
            pre = f"transformer.h.{layer}.attn."
            off, shape = offsets[pre + "c_attn.weight"]  # Conv1D (d, 3d): qkv = x W + b
            boff, _ = offsets[pre + "c_attn.bias"]
            for name, bias, start in (("W_Q", "b_Q", 0), ("W_K", "b_K", d), ("W_V", "b_V", 2 * d)):
                size = v if name == "W_V" else k
                h, i, j = torch.meshgrid(torch.arange(H), torch.arange(d), torch.arange(size), indexing="ij")
                blocks[name] = _flat_index(off, shape, i, start + h * size + j)
                hb, jb = torch.meshgrid(torch.arange(H), torch.arange(size), indexing="ij")
                blocks[bias] = boff + start + hb * size + jb
            off, shape = offsets[pre + "c_proj.weight"]  # Conv1D (H v, d)
            h, j, i = torch.meshgrid(torch.arange(H), torch.arange(v), torch.arange(d), indexing="ij")
            blocks["W_O"] = _flat_index(off, shape, h * v + j, i)
            boff, _ = offsets[pre + "c_proj.bias"]
            blocks["b_O"] = boff + torch.arange(d)
        else:
            raise ValueError(f"model must be one of {ARCHS}, got {model!r}")
        index = torch.cat([blocks[b.name].reshape(-1) for b in layout])
        if index.numel() != layout.size or index.unique().numel() != index.numel():
            raise AssertionError(f"{model}: the attention map of layer {layer} is not a set of {layout.size} positions")
        maps.append(index)
    return maps


def attention_module(model: str, module: torch.nn.Module, layer: int) -> torch.nn.Module:
    """The attention sub-module of block `layer` (for tests: its output against attnid's layer)."""
    return module.transformer.h[layer].attn if model == "gpt2" else module.model.layers[layer].self_attn
