"""The decoder family of q/k/v/o_proj with RMSNorm, RoPE and an MLP of gate/up/down_proj: Llama and the model
types built like it. Each is Llama plus what its modular file changes (`transformers` 5.24,
models/<type>/modular_<type>.py, else modeling_<type>.py):

    biases       Qwen2: q, k, v (never o); Mistral, Mixtral, Phi-3, Ministral, Ministral-3, CWM: none (bias=False
                 in code); Helium (o_proj bias=False), GLM, GLM-4 (GlmAttention o_proj bias=False): q, k, v by
                 `attention_bias` (GLM's default true); Seed-OSS: q, k, v by `attention_bias` (default true), o by
                 `attention_out_bias`; ERNIE-4.5: every projection and the MLP by `use_bias`; InternLM-3: the Llama
                 class with `qkv_bias` read as attention_bias, `bias` as mlp_bias; the others follow `attention_bias`
                 (which also biases o_proj), default false except GPT-OSS (true)
    q/k norms    Qwen3, Qwen3-MoE, Gemma-3, Apertus, EXAONE-4: RMSNorm per head, one gain shared by all heads;
                 OLMo-2, OLMo-3: RMSNorm across all heads; HunYuan-Dense (query_layernorm, key_layernorm): the per-head
                 RMSNorm after RoPE; NanoChat (Llama4TextL2Norm): RMSNorm per head without a gain, after RoPE
    sinks        GPT-OSS: one learnable logit per head; Granite-SWA: `sinks` (H,), its sigmoid(lse - s) output scale
                 is the softmax with the sink logit
    softcap      Gemma-2, VaultGemma: attn_logit_softcapping on the scores; final_logit_softcapping on the logits
                 (invertible per entry: count-neutral)
    windows      Mistral, Mixtral, Phi-3, Ministral-3: every layer; Gemma-2, VaultGemma: alternating, local first;
                 Gemma-3, GPT-OSS, Ministral, CWM, OLMo-3, EXAONE-4, Granite-SWA, SmolLM3: `layer_types`, else the
                 class's pattern; Qwen2/3: only with use_sliding_window, from max_window_layers on
    no RoPE      SmolLM3: layers with no_rope_layers[i] = 0 (default every no_rope_layer_interval-th); EXAONE-4: the
                 full-attention layers when there is a window ("global NoPE"); Granite-SWA: layers whose
                 layer_rope_theta is 0; per-layer bases: Gemma-3 (rope_local_base_freq or rope_parameters by layer
                 type), OLMo-3 (rope_parameters by layer type), Granite-SWA (layer_rope_theta)
    blocks       OLMo-2, OLMo-3, EXAONE-4 (Olmo2DecoderLayer): no norm before a sublayer, one on its output,
                 h = h + Norm(f(h)); Gemma-2/3, GLM-4 (post_self_attn_layernorm, post_mlp_layernorm), HyperCLOVAX
                 (use_post_norm, default true): a norm before and after each sublayer; VaultGemma: Gemma-2's
                 blocks without the output norms
    MLP          SwiGLU (LlamaMLP), with `mlp_bias`; Gemma: GeGLU (hidden_activation); ungated act(x W_up) W_down
                 (NemotronMLP, CLIPMLP) in Arcee, Apertus, NanoChat (relu2, bias=False for Apertus and NanoChat);
                 Apertus's default activation xIELU has two learned parameters per layer (not modelled);
                 HunYuan-Dense, GLM, OLMo-2/3, EXAONE-4: no MLP bias
    sub-norms    BitNet: attn_sub_norm, an RMSNorm with a gain across all heads' outputs before o_proj, and
                 ffn_sub_norm, one on the MLP's hidden units before down_proj (BitNetAttention, BitNetMLP);
                 its MLP is GemmaMLP's gated one with hidden_act (relu2), no bias
    norms        Gemma, VaultGemma: gain stored as w, applied as 1 + w; NanoChat: RMSNorms without a gain, one of
                 them on the embeddings too (its model applies self.norm to inputs_embeds)
    scalings     Granite, Granite-SWA, HyperCLOVAX: embedding_multiplier, attention_multiplier (the scores'
                 scale), residual_multiplier (each sublayer's output), logits_scaling; Ministral-3's query scale
                 1 + beta log(1 + floor(pos / original_max_position_embeddings)): nonzero constants (per query
                 position), each absorbed by a map next to it: count-neutral
    head size    `head_dim` when given, else the class default (Gemma, VaultGemma 256; Qwen3, Helium, ERNIE-4.5,
                 Seed-OSS, InternLM-3, IQuestCoder, GLM, GLM-4, CWM, Ministral-3 128; GPT-OSS 64), else d / H
    eps          rms_norm_eps, else the class default (EPS_DEFAULTS); EXAONE's layer_norm_epsilon
    tied         tie_word_embeddings, class default true for Gemma, VaultGemma, ERNIE-4.5, SmolLM3, Granite-SWA

Moshi's text decoder (MoshiForCausalLM, models/moshi/modeling_moshi.py; its depth decoder and audio encoder are
MoshiForConditionalGeneration's): Llama's attention without biases (q/k/v/o in MoshiLinear), RoPE computed in the
module from position_ids, the causal mask of every layer plain (MoshiModel builds create_causal_mask; sliding_window
is read by no mask); MoshiGatingMLP is a SwiGLU of ffn_dim / 2 whose fc1 rows are [gate; up]; eps default 1e-8.
Emu3's text model (emu3_text_model, Emu3TextModel) is LlamaModel with a dropout after each sublayer (the identity in
eval), eps default 1e-5. Apertus-1.5's text model is Apertus with an lm_head of output_vocab_size rows when set (not
modelled).
EXAONE (3.x), InternLM-3 and IQuestCoder are built as LlamaForCausalLM from their own config classes (whose
attribute_map renames keys: EXAONE's num_layers, layer_norm_epsilon, activation_function).
"""

from __future__ import annotations

from ...errors import SpecError
from ...model.blocks import LayerSpec, MLPSpec, MoESpec
from ...layer.spec import AttentionSpec
from .experts import experts
from .keys import (
    aliased,
    head_sizes,
    layer_types,
    mlp_kind,
    partial_factor,
    read_flag,
    read_float,
    read_int,
    read_str,
    rope,
)
from .names import attention_linear, expert_names, head_bias, head_names, linear, mlp_linear, norm, permuted
from .names import rope_perm, same
from .real_attention import llama_like

GATE_UP_DOWN = ("gate", "up", "down")
GLM4_NORMS = ("glm4", "kolibri1")  # Glm4DecoderLayer: post_self_attn_layernorm, post_attention_layernorm, post_mlp_layernorm
# rotary planes (2i, 2i + 1), this project's, not rotate_half's (i, i + p/2): the rotate_half of Helium, ERNIE-4.5, GLM and
# GLM-4 (modeling_<type>.py: x[..., 0::2], x[..., 1::2])
INTERLEAVED_ROPE = ("helium", "ernie4_5", "glm", "glm4")
FUSED_GATE_UP = ("phi3", "glm", "glm4")  # one Linear gate_up_proj (2m, d) = [gate; up] rows (Phi3MLP, GlmMLP, Glm4MLP)

HEAD_DIM_DEFAULTS = {
    "gemma": 256, "gemma2": 256, "gemma3_text": 256, "vaultgemma": 256, "qwen3": 128, "gpt_oss": 64, "helium": 128,
    "ernie4_5": 128, "seed_oss": 128, "internlm3": 128, "iquestcoder": 128, "glm": 128, "glm4": 128, "cwm": 128,
    "ministral3": 128,
}  # fmt: skip
FIXED_BIASES = {
    "qwen2": "qkv", "mistral": "", "mixtral": "", "phi3": "", "ministral": "", "ministral3": "", "cwm": "", "moshi": "",
}  # fmt: skip
QKV_ONLY = {"helium": False, "glm": True, "glm4": True}  # attention_bias on q, k, v only (its class default)
EPS_DEFAULTS = {
    **dict.fromkeys(("olmo2", "olmo3", "gpt_oss", "phi3", "mixtral", "arcee", "apertus", "exaone", "exaone4"), 1e-5),
    **dict.fromkeys(("ernie4_5", "internlm3", "iquestcoder", "hunyuan_v1_dense", "cwm", "ministral3"), 1e-5),
    **dict.fromkeys(("granite_swa", "bitnet", "emu3_text_model"), 1e-5), "moshi": 1e-8, "glm": 1.5625e-07,
    "glm4": 1.5625e-07, "helium": 1e-8,
}  # fmt: skip
TIED_DEFAULTS = ("gemma", "gemma2", "gemma3_text", "vaultgemma", "ernie4_5", "smollm3", "granite_swa")
WINDOW_EVERY_LAYER = ("mistral", "mixtral", "phi3", "ministral3")
# the class's layer pattern where the config lists no layer_types: is layer i sliding?
SLIDING_PATTERN = {
    "gemma2": lambda i: i % 2 == 0, "vaultgemma": lambda i: i % 2 == 0, "cwm": lambda i: i % 4 != 0,
    "olmo3": lambda i: (i + 1) % 4 != 0, "granite_swa": lambda i: i % 4 != 0, "ministral": lambda i: True,
}  # fmt: skip
UNGATED = {"arcee": "relu2", "apertus": "xielu", "nanochat": "relu2"}  # act(x W_up) W_down: the class's activation
ACT_DEFAULTS = {**UNGATED, "bitnet": "relu2"}
NO_MLP_BIAS = ("apertus", "nanochat", "hunyuan_v1_dense", "glm", "glm4", "olmo2", "olmo3", "exaone4", "bitnet")
ALIASES = {
    "exaone": {"num_layers": "num_hidden_layers", "layer_norm_epsilon": "rms_norm_eps", "activation_function": "hidden_act"},
    "internlm3": {"qkv_bias": "attention_bias", "bias": "mlp_bias"},
}  # fmt: skip
QK_NORMS = {
    **dict.fromkeys(("qwen3", "qwen3_moe", "gemma3_text", "apertus", "exaone4"), "rms_head"),
    "olmo2": "rms_all", "olmo3": "rms_all", "hunyuan_v1_dense": "rms_head_rotated", "nanochat": "rms_plain",
}  # fmt: skip
OUTPUT_NORMS = ("gemma2", "gemma3_text", "glm4")
NO_INPUT_NORMS = ("olmo2", "olmo3", "exaone4")  # Olmo2DecoderLayer: h = h + Norm(f(h))
MULTIPLIERS = ("embedding_multiplier", "attention_multiplier", "residual_multiplier", "logits_scaling")
MODEL_TYPES = (
    "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text", "olmo2",
    "phi3", "gpt_oss", "arcee", "apertus", "helium", "exaone", "exaone4", "ernie4_5", "seed_oss", "smollm3",
    "ministral", "ministral3", "internlm3", "iquestcoder", "hunyuan_v1_dense", "glm", "glm4", "cwm", "vaultgemma",
    "olmo3", "granite", "granite_swa", "hyperclovax", "nanochat", "bitnet", "apertus1p5_text", "emu3_text_model",
    "moshi",
)  # fmt: skip
BASE_TYPES = {"apertus1p5_text": "apertus", "emu3_text_model": "llama"}  # a type whose code is another's
MOSHI_TABLE_WHY = "an embedding of vocab_size + 1 rows beside an lm_head of vocab_size (MoshiModel): not modelled"


def _biases(cfg: dict, mt: str) -> str:
    if mt in FIXED_BIASES:
        return FIXED_BIASES[mt]
    if mt == "ernie4_5":
        return "qkvo" if read_flag(cfg, "use_bias", False) else ""
    if mt == "seed_oss":
        qkv = "qkv" if read_flag(cfg, "attention_bias", True) else ""
        return qkv + ("o" if read_flag(cfg, "attention_out_bias", False) else "")
    if mt in QKV_ONLY:
        return "qkv" if read_flag(cfg, "attention_bias", QKV_ONLY[mt]) else ""
    return "qkvo" if read_flag(cfg, "attention_bias", mt == "gpt_oss") else ""


def _attention_variant(cfg: dict, mt: str, eps: float) -> dict:
    variant = {"qk_norm": QK_NORMS[mt], "norm_eps": eps} if mt in QK_NORMS else {}
    if mt in ("gpt_oss", "granite_swa"):
        variant["sinks"] = True
    if mt in ("gemma2", "vaultgemma"):
        variant["softcap"] = read_float(cfg, "attn_logit_softcapping", default=0.0)
    if mt == "bitnet":
        variant |= {"sub_norm": True, "norm_eps": eps}
    return variant


def _types(cfg: dict, mt: str, n_layers: int) -> list[str]:
    """'full_attention' / 'sliding_attention' of every layer, from the config or the class's pattern."""
    if "layer_types" not in cfg and mt in SLIDING_PATTERN:
        return ["sliding_attention" if SLIDING_PATTERN[mt](i) else "full_attention" for i in range(n_layers)]
    if "layer_types" not in cfg and mt == "smollm3":  # windows only on the layers without RoPE
        window = read_flag(cfg, "use_sliding_window", False) and cfg.get("sliding_window") is not None
        return ["sliding_attention" if window and not r else "full_attention" for r in _smollm3_rope(cfg, n_layers)]
    return layer_types(cfg, n_layers)


def _windows(cfg: dict, mt: str, types: list[str]) -> list[int]:
    """The sliding window of every layer (0 = full attention)."""
    n_layers = len(types)
    window = read_int(cfg, "sliding_window", default=0, minimum=0)
    if mt in ("qwen2", "qwen3", "qwen3_moe"):
        window = window if read_flag(cfg, "use_sliding_window", False) else 0
        if window and "layer_types" not in cfg:
            first = read_int(cfg, "max_window_layers", default=28, minimum=0)
            types = ["sliding_attention" if i >= first else "full_attention" for i in range(n_layers)]
    if mt == "smollm3" and not read_flag(cfg, "use_sliding_window", False):
        window = 0
    every = mt in WINDOW_EVERY_LAYER
    return [window if window and (every or t == "sliding_attention") else 0 for t in types]


def _smollm3_rope(cfg: dict, n_layers: int) -> list[int]:
    """SmolLM3's no_rope_layers: 1 where a layer uses RoPE (default: all but every no_rope_layer_interval-th)."""
    flags = cfg.get("no_rope_layers")
    if flags is None:
        interval = read_int(cfg, "no_rope_layer_interval", default=4)
        return [int((i + 1) % interval != 0) for i in range(n_layers)]
    if not isinstance(flags, list) or len(flags) != n_layers or any(f not in (0, 1) or f is True for f in flags):
        raise SpecError("no_rope_layers", f"must list 0 or 1 for each of the {n_layers} layers, got {flags!r}")
    return flags


def _thetas(cfg: dict, mt: str, types: list[str], windows: list[int]) -> list[float]:
    """Every layer's RoPE base, 0 where the layer has no RoPE."""
    n_layers = len(types)
    if mt == "granite_swa" and cfg.get("layer_rope_theta") is not None:
        thetas = cfg["layer_rope_theta"]
        if not isinstance(thetas, list) or len(thetas) != n_layers:
            raise SpecError("layer_rope_theta", f"must list one base for each of the {n_layers} layers, got {thetas!r}")
        return [read_float({"layer_rope_theta": t}, "layer_rope_theta", default=0.0) for t in thetas]
    theta = [rope(cfg, t) for t in types]
    if mt == "gemma3_text" and cfg.get("rope_local_base_freq") is not None:
        local = read_float(cfg, "rope_local_base_freq", positive=True)
        theta = [local if t == "sliding_attention" else x for t, x in zip(types, theta, strict=True)]
    if mt == "smollm3":
        theta = [x if r else 0.0 for x, r in zip(theta, _smollm3_rope(cfg, n_layers), strict=True)]
    if mt == "exaone4" and cfg.get("sliding_window") is not None:  # global NoPE: RoPE on the sliding layers only
        theta = [x if w else 0.0 for x, w in zip(theta, windows, strict=True)]
    return theta


def _mlps(cfg: dict, mt: str, n_layers: int, not_modelled: list) -> list:
    """Every block's MLP: dense, or routed where the config has experts (Qwen3-MoE: dense in
    mlp_only_layers and where (i + 1) % decoder_sparse_step != 0, Qwen3MoeDecoderLayer)."""
    activation = read_str(cfg, "hidden_act", "hidden_activation", default=ACT_DEFAULTS.get(mt, "silu"))
    bias_key = "use_bias" if mt == "ernie4_5" else "mlp_bias"
    bias = (read_flag(cfg, bias_key, False) or mt == "gpt_oss") and mt not in NO_MLP_BIAS
    n_experts = read_int(cfg, "num_local_experts", "num_experts", default=0, minimum=0)
    if not n_experts:
        if activation == "xielu":  # Apertus: alpha_p and alpha_n per layer, learned
            not_modelled.append(
                ("hidden_act", "xIELU has learned parameters of its own (alpha_p, alpha_n): not modelled")
            )
            return [MLPSpec(read_int(cfg, "intermediate_size"), "silu", bias)] * n_layers
        kind = mlp_kind(activation, mt not in UNGATED)
        width = read_int(cfg, "ffn_dim") // 2 if mt == "moshi" else read_int(cfg, "intermediate_size")
        return [MLPSpec(width, kind, bias, sub_norm=mt == "bitnet")] * n_layers
    width = read_int(cfg, "moe_intermediate_size", "intermediate_size")
    top_k = read_int(cfg, "num_experts_per_tok", "experts_per_token")
    routed = experts(cfg, mt, n_experts, top_k, width, activation, not_modelled)
    if mt != "qwen3_moe":
        return [routed] * n_layers
    step = read_int(cfg, "decoder_sparse_step", default=1)
    dense_layers = cfg.get("mlp_only_layers") or []
    if not isinstance(dense_layers, list) or not all(isinstance(i, int) for i in dense_layers):
        raise SpecError("mlp_only_layers", f"must be a list of layer indices, got {dense_layers!r}")
    dense = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(activation, True), bias)
    return [routed if i not in dense_layers and (i + 1) % step == 0 else dense for i in range(n_layers)]


def _check_multipliers(cfg: dict) -> None:
    for key in MULTIPLIERS:  # nonzero constants: each is absorbed by the map next to it
        if read_float(cfg, key, default=1.0) == 0:
            raise SpecError(key, "0 makes the model constant: not modelled")


def llama_family(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """(every block, the ModelSpec fields) of a config of the family."""
    own_type, mt = mt, BASE_TYPES.get(mt, mt)
    cfg = aliased(cfg, ALIASES.get(mt, {}))
    d, H, G, k = head_sizes(cfg, HEAD_DIM_DEFAULTS.get(mt))
    n_layers = read_int(cfg, "num_hidden_layers")
    _check_multipliers(cfg)
    types = _types(cfg, mt, n_layers)
    windows = _windows(cfg, mt, types)
    thetas = _thetas(cfg, mt, types, windows)
    biases = _biases(cfg, mt)
    eps = read_float(cfg, "rms_norm_eps", default=EPS_DEFAULTS.get(own_type, EPS_DEFAULTS.get(mt, 1e-6)))
    variant = _attention_variant(cfg, mt, eps)
    not_modelled: list = []
    if own_type == "apertus1p5_text" and read_int(cfg, "output_vocab_size", default=None) not in (
        None,
        cfg.get("vocab_size"),
    ):
        not_modelled.append(("output_vocab_size", "an unembedding of other rows than the embedding: not modelled"))
    if mt == "moshi":
        not_modelled.append(("vocab_size", MOSHI_TABLE_WHY))
    mlps = _mlps(cfg, mt, n_layers, not_modelled)
    layers = []
    for t, window, theta, mlp in zip(types, windows, thetas, mlps, strict=True):
        p = int(k * partial_factor(cfg, layer_type=t)) // 2 * 2 if theta else 0
        attention = AttentionSpec(
            d_model=d, n_heads=H, n_kv_heads=G, d_head_qk=k, rope_dims=p, biases=biases, causal=True,
            rope_base=theta or 10000.0, sliding_window=window, **variant,
        )  # fmt: skip
        layers.append(LayerSpec(attention, mlp))
    gemma = mt.startswith("gemma") or mt == "vaultgemma"
    output_norms = mt in OUTPUT_NORMS or mt in NO_INPUT_NORMS
    output_norms |= mt == "hyperclovax" and read_flag(cfg, "use_post_norm", True)
    fields = {
        "positions": "rope" if any(thetas) else "none", "norm": "rmsnorm", "norm_bias": False, "norm_eps": eps,
        "gemma_gain": gemma, "tied": read_flag(cfg, "tie_word_embeddings", mt in TIED_DEFAULTS),
        "output_norms": output_norms, "input_norms": mt not in NO_INPUT_NORMS, "not_modelled": tuple(not_modelled),
    }  # fmt: skip
    if mt == "nanochat":
        fields |= {"norm_gain": False, "embedding_norm": True}
    return layers, fields


MAPPERS = dict.fromkeys(MODEL_TYPES, llama_family)
# Relatives of the family that the description does not hold (examined in their modular files).
REFUSED = {
    "dory": "attention not counted: a normalised stream updated by learned interpolation rates (lambda_1, lambda_2),"
    " a gated and rescaled"
    " attention output, learned per-token logit scales",
}


QK_NORM_NAMES = {"hunyuan_v1_dense": ("query_layernorm", "key_layernorm")}  # the q/k norms, where not q_norm/k_norm
SECOND_NORM = {"vaultgemma": "pre_feedforward_layernorm"}  # the norm before the MLP, where not post_attention_layernorm
SHARED_EXPERT = {"flint": "shared_expert"}  # the shared SwiGLU's module, where not shared_experts
MLP_NAMES = {"starcoder2": {"up": "c_fc", "down": "c_proj"}}  # an ungated MLP's Linear layers, where not up/down_proj


def _norms(spec):
    """`.names.norm` for this model's norms: a LayerNorm's bias where it has one (StarCoder2, StableLM), nothing
    where its norms have no parameters (OLMo)."""

    def entries(e: list, hf_prefix: str, fine: str) -> None:
        if spec.norm_gain:
            norm(e, hf_prefix, fine, spec.norm_bias)

    return entries


def llama_names(spec, cfg: dict) -> list[tuple]:
    """The class's parameters <-> the layout (`.names`): Llama-style Linear q/k/v/o with rotary pairs, q/k norm
    gains permuted alike, sinks, experts (Mixtral, Qwen3-MoE, GPT-OSS; Mellum's, HY-V3's and Kolibri-1's with their
    shared experts, Aria's), Phi-3's and GLM's fused gate_up_proj, Gemma-2/3's output norms (GLM-4's blocks' in GLM-4
    and Kolibri-1), LayerNorms with a bias (StarCoder2, StableLM, Nemotron, Jais-2), StarCoder2's c_fc/c_proj."""
    mt, e = cfg["model_type"], []
    block_norm = _norms(spec)
    e.append(same("model.embed_tokens.weight", "embed"))
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"model.layers.{i}", f"layers.{i}", x.attention
        perm = rope_perm(a.d_head_qk, a.rope_dims, interleaved=mt in INTERLEAVED_ROPE)
        attention_linear(e, f"{hf}.self_attn", f"{fine}.attn", a, perm)
        q_norm, k_norm = (f"{hf}.self_attn.{n}.weight" for n in QK_NORM_NAMES.get(mt, ("q_norm", "k_norm")))
        if a.qk_norm == "rms_all":  # one RMSNorm over all heads' q (k): a gain per head and dim (OLMo-2, OLMoE)
            e += [head_bias(q_norm, f"{fine}.attn.gain_Q", a.n_heads, a.d_head_qk, perm),
                  head_bias(k_norm, f"{fine}.attn.gain_K", a.n_kv_heads, a.d_head_qk, perm)]  # fmt: skip
        elif a.qk_norm != "none":
            e += [permuted(q_norm, f"{fine}.attn.gain_Q", perm), permuted(k_norm, f"{fine}.attn.gain_K", perm)]
        if a.sinks:
            e.append(same(f"{hf}.self_attn.sinks", f"{fine}.attn.sink"))
        if isinstance(x.mlp, MoESpec):
            expert_names(e, f"{hf}.mlp", f"{fine}.mlp", x.mlp, mt)
            if x.mlp.n_shared:  # one SwiGLU (HY-V3's shared_experts, FLINT's shared_expert)
                shared = f"{hf}.mlp.{SHARED_EXPERT.get(mt, 'shared_experts')}"
                e += [linear(f"{shared}.{n}_proj.weight", f"{fine}.mlp.shared_{n}") for n in GATE_UP_DOWN]
        elif mt in FUSED_GATE_UP:
            e.append(("gate_up_rows", f"{hf}.mlp.gate_up_proj.weight", (f"{fine}.mlp.gate", f"{fine}.mlp.up"), x.mlp.d_ff))
            e.append(linear(f"{hf}.mlp.down_proj.weight", f"{fine}.mlp.down"))
        else:
            mlp_linear(e, f"{hf}.mlp", f"{fine}.mlp", x.mlp, **MLP_NAMES.get(mt, {}))
        if not spec.input_norms:  # OLMo-2's, EXAONE-4's blocks: the sublayers' outputs normed only
            block_norm(e, f"{hf}.post_attention_layernorm", f"{fine}.out_norm_1")
            block_norm(e, f"{hf}.post_feedforward_layernorm", f"{fine}.out_norm_2")
            continue
        block_norm(e, f"{hf}.input_layernorm", f"{fine}.norm_1")
        if spec.output_norms and mt in GLM4_NORMS:  # Glm4DecoderLayer's names
            block_norm(e, f"{hf}.post_self_attn_layernorm", f"{fine}.out_norm_1")
            block_norm(e, f"{hf}.post_attention_layernorm", f"{fine}.norm_2")
            block_norm(e, f"{hf}.post_mlp_layernorm", f"{fine}.out_norm_2")
        elif spec.output_norms:
            block_norm(e, f"{hf}.post_attention_layernorm", f"{fine}.out_norm_1")
            block_norm(e, f"{hf}.pre_feedforward_layernorm", f"{fine}.norm_2")
            block_norm(e, f"{hf}.post_feedforward_layernorm", f"{fine}.out_norm_2")
        else:
            block_norm(e, f"{hf}.{SECOND_NORM.get(mt, 'post_attention_layernorm')}", f"{fine}.norm_2")
    block_norm(e, "model.norm", "final_norm")
    head_names(e, spec)
    return e


NAME_MAPS = dict.fromkeys(MODEL_TYPES, llama_names)

# the attention module of each type the module-level check builds (`.real_attention`); Mistral's, Mixtral's,
# Qwen2's and Phi-3's read their sliding window from the config
REAL_ATTENTION = {
    **{mt: llama_like(mt, prefix) for mt, prefix in [
        ("llama", "Llama"), ("qwen3", "Qwen3"), ("qwen3_moe", "Qwen3Moe"), ("gemma", "Gemma"), ("gemma2", "Gemma2"),
        ("olmo2", "Olmo2"), ("gpt_oss", "GptOss"),
    ]},
    **{mt: llama_like(mt, prefix, window_from_config=True) for mt, prefix in [
        ("mistral", "Mistral"), ("mixtral", "Mixtral"), ("qwen2", "Qwen2"), ("phi3", "Phi3"),
    ]},
    "gemma3_text": llama_like("gemma3", "Gemma3"),
}  # fmt: skip
