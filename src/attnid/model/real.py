"""Real `transformers` language models, whole, as pure float64 functions theta -> logits.

`build_real(cfg)` instantiates the model class of a (tiny) config mapping with eager attention,
draws a generic point (weights N(0, 1/fan_in), embeddings N(0, 1), norm gains 1 + N(0, 0.3^2) or
Gemma's w ~ N(0, 0.3^2), biases N(0, 0.3^2)), and `forward(theta, tokens)` runs it through
`torch.func.functional_call` (tied weights stay tied) inside `attnid.hf.modules.KeepFloat64`, so
the library's float32 casts become float64 ones. A `padding_idx` would zero one embedding row's
gradient although the forward pass reads it: the pad token is set to None (kept where the class counts position
ids from it: RoBERTa) and every embedding's `padding_idx` cleared. :data:`TINY` holds the tiny configs of the
whole-model grid.
"""

from __future__ import annotations

import copy
import functools
import math
import sys
import threading
from dataclasses import dataclass

import torch

from ..flat import FlatLayout
from ..float64 import DTYPE, KeepFloat64
from .forward import record_choice
from .spec import PAD_READS_POSITIONS  # a config mapping's flag: the class reads position ids from its pad id

_COMMON = {"pad_token_id": None, "bos_token_id": None, "eos_token_id": None}
_LLAMA = {"hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
          "num_key_value_heads": 1, "head_dim": 4, "max_position_embeddings": 64, "rms_norm_eps": 1e-6}  # fmt: skip
# name -> (class name, config mapping): d_model 8, 2 layers, vocab 16 (32 for a parallel block at layer 0, whose
# MLP must not reach its whole V x d output table: attnid.model.counting.token_points.first_mlp_table).
_BLOOM = {
    "model_type": "bloom",
    "vocab_size": 16,
    "hidden_size": 8,
    "n_head": 2,
    "n_layer": 1,
    "layer_norm_epsilon": 1e-5,
}
TINY = {
    "llama_untied": (
        "LlamaForCausalLM",
        {"model_type": "llama", "vocab_size": 16, "tie_word_embeddings": False, **_LLAMA},
    ),
    "llama_tied": (
        "LlamaForCausalLM",
        {"model_type": "llama", "vocab_size": 16, "tie_word_embeddings": True, **_LLAMA},
    ),
    "llama_bias": (
        "LlamaForCausalLM",
        {
            "model_type": "llama",
            "vocab_size": 16,
            "tie_word_embeddings": False,
            "attention_bias": True,
            "mlp_bias": True,
            **_LLAMA,
        },
    ),
    "qwen3": ("Qwen3ForCausalLM", {"model_type": "qwen3", "vocab_size": 16, "tie_word_embeddings": False, **_LLAMA}),
    "gemma": (
        "GemmaForCausalLM",
        {
            "model_type": "gemma",
            "vocab_size": 16,
            "tie_word_embeddings": True,
            "hidden_activation": "gelu_pytorch_tanh",
            **_LLAMA,
        },
    ),
    "gpt2": (
        "GPT2LMHeadModel",
        {
            "model_type": "gpt2",
            "vocab_size": 16,
            "n_embd": 8,
            "n_head": 2,
            "n_layer": 2,
            "n_inner": 16,
            "n_positions": 6,
            "layer_norm_epsilon": 1e-5,
        },
    ),
    "gpt_neox": (
        "GPTNeoXForCausalLM",
        {
            "model_type": "gpt_neox",
            "vocab_size": 32,
            "hidden_size": 8,
            "num_attention_heads": 2,
            "num_hidden_layers": 2,
            "intermediate_size": 8,
            "rotary_pct": 0.5,
            "max_position_embeddings": 64,
            "use_parallel_residual": True,
            "tie_word_embeddings": False,
            "layer_norm_eps": 1e-5,
        },
    ),
    # post-LN (OPT-350m's do_layer_norm_before=false), GELU instead of ReLU (a ReLU unit's activity depends on the draw)
    "opt_post_ln": (
        "OPTForCausalLM",
        {
            "model_type": "opt",
            "vocab_size": 16,
            "hidden_size": 8,
            "word_embed_proj_dim": 8,
            "num_attention_heads": 2,
            "num_hidden_layers": 2,
            "ffn_dim": 8,
            "max_position_embeddings": 6,
            "do_layer_norm_before": False,
            "activation_function": "gelu",
            "tie_word_embeddings": True,
        },
    ),
    # a LayerNorm on the word embeddings before pre-LN blocks, ALiBi, tied (embedding_norm_terms)
    "bloom": ("BloomForCausalLM", {**_BLOOM, "tie_word_embeddings": True}),
    # untied: the norm's 2d parameters and every stream rotation free (V + 2 <= 2d + 21 at d = 8)
    "bloom_untied": ("BloomForCausalLM", {**_BLOOM, "tie_word_embeddings": False}),
    # post-LN, token types (ids all 0), the MLM head; eps 1e-5 instead of BERT's 1e-12 (its scales stay above the cut)
    "bert_mlm": (
        "BertForMaskedLM",
        {
            "model_type": "bert",
            "vocab_size": 16,
            "hidden_size": 8,
            "num_attention_heads": 2,
            "num_hidden_layers": 1,
            "intermediate_size": 8,
            "max_position_embeddings": 6,
            "type_vocab_size": 2,
            "hidden_act": "gelu",
            "layer_norm_eps": 1e-5,
            "tie_word_embeddings": True,
        },
    ),
}
# DeepSeek's multi-head latent attention: 2 heads, nope 4 + rope 2, values 4, ranks r_kv 4 and r_q 6 (V3) or a
# plain q_proj (V2); one block with a dense SwiGLU MLP (first_k_dense_replace = n_layers). At V = 16 the first
# block's query latent reads fewer points than r_q (r_q + 1) / 2 + 1 = 22 (latent_token_points).
_DEEPSEEK = {"vocab_size": 16, "hidden_size": 8, "intermediate_size": 16, "moe_intermediate_size": 8,
             "num_hidden_layers": 1, "first_k_dense_replace": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
             "kv_lora_rank": 4, "qk_nope_head_dim": 4, "qk_rope_head_dim": 2, "v_head_dim": 4, "n_routed_experts": 2,
             "num_experts_per_tok": 1, "n_group": 1, "topk_group": 1, "max_position_embeddings": 64,
             "rms_norm_eps": 1e-6, "tie_word_embeddings": False}  # fmt: skip
TINY["deepseek_v3"] = ("DeepseekV3ForCausalLM", {"model_type": "deepseek_v3", "q_lora_rank": 6, **_DEEPSEEK})
TINY["deepseek_v2"] = ("DeepseekV2ForCausalLM", {"model_type": "deepseek_v2", "q_lora_rank": None, **_DEEPSEEK})
# DeepSeek-V3 whole: a dense block, then a block of 4 routed experts of width 4 (2 per token, sigmoid scores
# renormalised, scaled by 2.5) and one shared expert (attnid.model.blocks.MoESpec).
TINY["deepseek_v3_moe"] = (
    "DeepseekV3ForCausalLM",
    {**TINY["deepseek_v3"][1], "num_hidden_layers": 2, "first_k_dense_replace": 1, "n_routed_experts": 4,
     "num_experts_per_tok": 2, "n_shared_experts": 1, "moe_intermediate_size": 4},
)  # fmt: skip
# Mixtures of experts (attnid.model.blocks.MoESpec), one block of 4 experts of width 4, 2 per token: Mixtral (renormalised),
# Qwen3-MoE without norm_topk_prob, GPT-OSS (router and expert biases, clamped experts, attention sinks and biases).
_MOE = {"vocab_size": 16, "tie_word_embeddings": False, **_LLAMA, "num_hidden_layers": 1, "intermediate_size": 4,
        "moe_intermediate_size": 4, "num_experts_per_tok": 2}  # fmt: skip
TINY["mixtral_moe"] = ("MixtralForCausalLM", {"model_type": "mixtral", "num_local_experts": 4, **_MOE})
TINY["qwen3_moe"] = (
    "Qwen3MoeForCausalLM",
    {"model_type": "qwen3_moe", "num_experts": 4, "norm_topk_prob": False, **_MOE},
)
TINY["gpt_oss_moe"] = (
    "GptOssForCausalLM",
    {"model_type": "gpt_oss", "num_local_experts": 4, **_MOE, "rms_norm_eps": 1e-5},
)
# Gemma-2: each sublayer's output normed before the residual add; logit softcaps (invertible per entry) and the
# sliding window (beyond the sequence) leave the count as it is
TINY["gemma2"] = (
    "Gemma2ForCausalLM",
    {"model_type": "gemma2", "vocab_size": 16, "tie_word_embeddings": True, "hidden_activation": "gelu_pytorch_tanh",
     "query_pre_attn_scalar": 4, "sliding_window": 64, "attn_logit_softcapping": 50.0,
     "final_logit_softcapping": 30.0, **_LLAMA},
)  # fmt: skip
# Falcon-40B's block (new decoder: two norms, GQA, RoPE, no biases, tied) at vocab 12: layer 0's MLP reaches its
# whole V x d output table (first_mlp_table)
TINY["falcon_free_table"] = (
    "FalconForCausalLM",
    {"model_type": "falcon", "vocab_size": 12, "hidden_size": 8, "num_attention_heads": 2, "num_kv_heads": 1,
     "num_hidden_layers": 1, "new_decoder_architecture": True, "parallel_attn": True, "bias": False, "alibi": False,
     "ffn_hidden_size": 8, "max_position_embeddings": 64, "tie_word_embeddings": True, "layer_norm_epsilon": 1e-5},
)  # fmt: skip
SEQ_LEN = 6  # tokens per sequence in the real-model checks (GPT-2's n_positions, so every row is read)


@dataclass
class RealModel:
    """A real model with its flat parameter vector; forward(theta, tokens) is a pure function."""

    name: str
    module: torch.nn.Module
    names: list
    shapes: list
    theta: torch.Tensor  # (P,) float64

    def __post_init__(self):
        self.layout = FlatLayout(zip(self.names, self.shapes, strict=True), self.name)

    def _own_module(self) -> torch.nn.Module:
        """The module for this thread: functional_call swaps a module's parameters while it runs, so a
        worker thread (the judge measures two halves side by side) calls its own copy."""
        if threading.current_thread() is threading.main_thread():
            return self.module
        local = self.__dict__.setdefault("_threads", threading.local())
        if not hasattr(local, "module"):
            local.module = copy.deepcopy(self.module)
        return local.module

    def forward(self, theta: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (T, V) of one sequence (T,) or (B, T, V) of a batch (B, T)."""
        params = self.layout.unflatten(theta)
        squeeze = tokens.dim() == 1
        ids = tokens[None] if squeeze else tokens
        with KeepFloat64():
            out = torch.func.functional_call(self._own_module(), params, (), {"input_ids": ids, "use_cache": False})
            out = out.logits
        return out[0] if squeeze else out


def build_real(name: str, seed: int = 0, eps: float | None = None) -> RealModel:
    """The model `name` of TINY at a generic float64 point drawn from `seed`; eps overrides the norms' eps."""
    class_name, cfg = TINY[name]
    return build_real_model(class_name, cfg, seed, eps, name)


def real_config(cfg: dict):
    """The `transformers` config object of a config mapping (its model_type's own class, local code only):
    eager attention, no special tokens (a pad row would lose its gradient; a multimodal wrapper's text_config keeps
    row 0 as its pad id), experts gathered per choice."""
    import transformers

    kwargs = {k: v for k, v in {**cfg, **_token_ids_read(cfg)}.items() if k != "model_type" and not k.startswith("_")}
    kwargs |= _token_ids_typed(cfg["model_type"])
    if isinstance(cfg.get("text_config"), dict) and cfg["text_config"].get("model_type"):
        text = cfg["text_config"]
        # the text model's pad id is row 0: Gemma-4's model reads that row's embedding at multimodal positions
        # (Gemma4Model.forward); no padding row either way (`prepare_module`)
        kwargs["text_config"] = {**text, **_COMMON, "pad_token_id": 0, **_token_ids_typed(text["model_type"])}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **kwargs)
    config._attn_implementation = "eager"
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    if any(cfg.get(key) or text.get(key) for key in ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")):
        config._experts_implementation = "batched_mm"  # experts gathered per (token, choice): no data-dependent loop
    return config


def _token_ids_typed(model_type: str) -> dict:
    """Row 0 for each special token id that the config class of `model_type` types as int (CWM, ModernBERT's decoder,
    Emu3's text model: None is refused there): no padding row either way (`prepare_module`)."""
    import transformers

    fields = getattr(transformers.CONFIG_MAPPING[model_type], "__dataclass_fields__", {})
    return {key: 0 for key in _COMMON if key in fields and fields[key].type in (int, "int")}


def _token_ids_read(cfg: dict) -> dict:
    """The special token ids of the real config: none (_COMMON), except a pad token id that the class reads in its
    forward (RoBERTa's position ids from padding_idx, XLM's sequence lengths; the config mapping says so by
    PAD_READS_POSITIONS, set by `attnid.hf.tiny` from the family's `unread_position_rows` or TINY_KEYS), which stays
    the config's."""
    if cfg.get(PAD_READS_POSITIONS) and cfg.get("pad_token_id") is not None:
        return {k: v for k, v in _COMMON.items() if k != "pad_token_id"}
    return _COMMON


def instantiate(class_name: str, config) -> torch.nn.Module:
    """The `transformers` class `class_name` built from a config object as the auto classes build it: a class whose
    config class is the config's text_config class is built from that section (Emu3ForCausalLM from Emu3Config's
    text_config; models/auto/auto_factory.py, _BaseAutoModelClass.from_config)."""
    import transformers

    cls = getattr(transformers, class_name)
    text_class = (getattr(config, "sub_configs", None) or {}).get("text_config")
    if text_class is not None and getattr(cls, "config_class", None) == text_class:
        config = config.get_text_config()
    return cls(config)


def prepare_module(model: torch.nn.Module, eps: float | None = None) -> torch.nn.Module:
    """A real module made measurable: float64, eval, embeddings without a padding row, routers recording their
    loads (`attnid.model.forward.expert_loads`), BLOOM's GELU as its plain formula, DBRX's experts gathered; eps
    overrides the norms' (OLMo's, written into its forward, by the same formula at that eps)."""
    model = model.to(DTYPE).eval()
    for sub in model.modules():  # a router returns (..., expert ids): its loads for attnid.model.forward.expert_loads
        if type(sub).__name__.lower().endswith("router") and hasattr(sub, "num_experts"):
            sub.register_forward_hook(lambda module, args, out: record_choice(out[-1], module.num_experts))
    for sub in model.modules():
        if isinstance(sub, torch.nn.Embedding):
            sub.padding_idx = None
        if type(sub).__name__ == "BloomGelu":  # its autograd.Function has no functorch rule: the same formula, plain
            sub.forward = sys.modules[type(sub).__module__].bloom_gelu_forward
        if type(sub).__name__ == "DbrxExperts":  # loops over the experts hit (data-dependent): the same sum, gathered
            sub.forward = functools.partial(_dbrx_experts_gathered, sub)
        if eps is not None:
            for attr in ("variance_epsilon", "eps"):
                if isinstance(getattr(sub, attr, None), float):
                    setattr(sub, attr, eps)
            if type(sub).__name__ == "OlmoLayerNorm":  # eps 1e-5 is written into its forward: the same formula
                sub.forward = functools.partial(_layer_norm_without_parameters, sub.normalized_shape, eps)
    return model


def _dbrx_experts_gathered(experts, hidden: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor):
    """DbrxExperts.forward (models/dbrx/modeling_dbrx.py, transformers 5.24) without its loop over the experts hit:
    out_n = sum_j w_nj W2_e^T (act(W1_e x_n) * (V1_e x_n)), e = top_k_index[n, j], each expert's (F, D) blocks of
    the stacked w1, v1, w2 gathered per (token, choice). hidden (B, T, D) -> (B, T, D)."""
    B, D = hidden.shape[0], experts.hidden_size
    x = hidden.reshape(-1, D)  # (N, D)
    split = (experts.num_experts, experts.ffn_hidden_size, D)
    w1, v1, w2 = (getattr(experts.mlp, n).view(split)[top_k_index] for n in ("w1", "v1", "w2"))  # (N, k, F, D)
    gate = experts.mlp.activation_fn(torch.einsum("nd,nkfd->nkf", x, w1))
    up = torch.einsum("nd,nkfd->nkf", x, v1)
    out = torch.einsum("nkf,nkfd->nkd", gate * up, w2)  # (N, k, D)
    return (out * top_k_weights[..., None]).sum(1).view(B, -1, D)


def _layer_norm_without_parameters(shape, eps: float, x: torch.Tensor) -> torch.Tensor:
    """OlmoLayerNorm.forward at another eps: F.layer_norm without gain or bias."""
    return torch.nn.functional.layer_norm(x, shape, None, None, eps=eps)


def generic_point(model: torch.nn.Module, seed: int, gemma_gain: bool = False) -> tuple[list, list, torch.Tensor]:
    """(names, shapes, theta) of a generic float64 point of `model`'s parameters (tied ones appear once): weights
    N(0, 1/fan_in), embeddings N(0, 1), norm gains 1 + N(0, 0.3^2) (Gemma's w ~ N(0, 0.3^2)), biases N(0, 0.3^2)."""
    from transformers.pytorch_utils import Conv1D

    gen = torch.Generator().manual_seed(int(seed))
    conv = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, Conv1D)}  # weights stored (in, out)
    names, shapes, values = [], [], []
    for pname, p in model.named_parameters():
        sample = torch.randn(p.shape, generator=gen, dtype=DTYPE)
        if p.dim() == 1:
            is_gain = "norm" in pname.lower() or ".ln" in pname or pname.startswith("ln") and "bias" not in pname
            is_gain = is_gain and not pname.endswith("bias")
            sample = (0.0 if gemma_gain else 1.0) + 0.3 * sample if is_gain else 0.3 * sample
        elif "emb" not in pname and "wte" not in pname and "wpe" not in pname:
            sample = sample / math.sqrt(p.shape[0] if pname in conv else p.shape[-1])
        names.append(pname)
        shapes.append(tuple(p.shape))
        values.append(sample.reshape(-1))
    return names, shapes, torch.cat(values)


def build_real_model(class_name: str, cfg: dict, seed: int = 0, eps: float | None = None, name: str = "") -> RealModel:
    """The `transformers` class `class_name` built from the config mapping `cfg` at a generic float64 point."""
    import transformers

    model = prepare_module(instantiate(class_name, real_config(cfg)), eps)
    names, shapes, theta = generic_point(model, seed, gemma_gain=cfg["model_type"].startswith("gemma"))
    return RealModel(name or class_name, model, names, shapes, theta)
