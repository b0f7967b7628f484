"""Real `transformers` architectures as trained models: tiny LlamaForCausalLM and GPT2LMHeadModel in float64.

A run of `model: llama` or `model: gpt2` trains the library's own class through its own forward pass:
`torch.func.functional_call(module, params, input_ids=...)` on the real module (eager attention, float64
kept through the library's casts by attnid.float64.KeepFloat64, as in attnid.model.real), vmapped over
the runs of a job by attnid.training.batched. Sizes come from the run config:

    llama  hidden_size d, num_attention_heads H, num_key_value_heads G (RunConfig.kv_ratio: GQA), head_dim
           d / H, RoPE on every query/key dim (base 10^4), RMSNorm, SwiGLU MLP of width mlp_ratio d,
           untied embeddings
    gpt2   n_embd d, n_head H, learned positions, LayerNorm, GELU MLP of width mlp_ratio d, q/k/v/o biases,
           tied embeddings, no dropout

Initial point (:func:`init_params`, from the run's model stream): weights N(0, 1/fan_in), embeddings
N(0, 1), norm gains 1, biases 0 (the scales of attnid.training.models' own transformer).

The attention layers inside, as attnid.layout sees them (:func:`attention_maps`): for each block, the
AttentionSpec of its attention and an index vector that gathers that spec's flat layout (W_Q, [b_Q], W_K,
..., W_O, [b_O]) out of the run's flat parameter vector (`named_parameters()` order, each tensor row-major).
Llama's rotary embedding rotates dim i with dim i + k/2 (`rotate_half`); attnid's RoPE rotates the planes
(0, 1), (2, 3), ...: the map sends layout dim 2j to Hugging Face dim j and 2j + 1 to j + k/2, which is the
same rotation at the same frequency base^(-2j/k) (tests/test_archs.py checks the attention output of the
gathered layout against the module's own to rounding). The symmetry tools (attnid.symmetry: projection,
balance, conserved quantities) then act on each layer through this map.
"""

from __future__ import annotations

import math

import torch

from ..float64 import KeepFloat64
from ..softmax import ShortSoftmax
from ..spec import AttentionSpec
from .tasks import STREAM_MODEL, generator

ARCHS = ("llama", "gpt2")
CLASSES = {"llama": "LlamaForCausalLM", "gpt2": "GPT2LMHeadModel"}
ROPE_BASE = 10000.0


def hf_config(model: str, spec: AttentionSpec, n_tokens: int, seq_len: int, n_layers: int, mlp_ratio: int) -> dict:
    """The config mapping of the tiny `model` (module docstring)."""
    d, H = spec.d_model, spec.n_heads
    common = {"pad_token_id": None, "bos_token_id": None, "eos_token_id": None}
    if model == "llama":
        return {"model_type": "llama", "vocab_size": n_tokens, "hidden_size": d, "intermediate_size": mlp_ratio * d,
                "num_hidden_layers": n_layers, "num_attention_heads": H, "num_key_value_heads": spec.G,
                "head_dim": spec.d_head_qk, "max_position_embeddings": seq_len, "rms_norm_eps": 1e-6,
                "rope_theta": ROPE_BASE, "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
                **common}  # fmt: skip
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
    if model == "llama" and getattr(config, "rope_parameters", None):  # the rope base (rope_parameters in 5.x)
        config.rope_parameters["rope_theta"] = ROPE_BASE
    with torch.device("cpu"):
        module = getattr(transformers, CLASSES[model])(config)
    return prepare_module(module)


def init_params(module: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """The run's initial parameters {name: tensor} (named_parameters order, tied ones once): module docstring."""
    from transformers.pytorch_utils import Conv1D

    gen = generator(seed, STREAM_MODEL)
    conv = {f"{n}.weight" for n, m in module.named_modules() if isinstance(m, Conv1D)}  # stored (in, out)
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
            fan_in = p.shape[0] if name in conv else p.shape[-1]
            out[name] = sample / math.sqrt(fan_in)
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
    from ..layout import Layout

    layout, offsets = Layout(spec), _offsets(module)
    H, G, d, k, v = spec.n_heads, spec.G, spec.d_model, spec.d_head_qk, spec.d_head_v
    n_layers = module.config.num_hidden_layers
    maps = []
    for layer in range(n_layers):
        blocks = {}
        if model == "llama":
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
    return module.model.layers[layer].self_attn if model == "llama" else module.transformer.h[layer].attn
