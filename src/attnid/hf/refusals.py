"""Why a model type of the installed `transformers` is not mapped: one true line per type (torch-free).

Each reason was read from the type's code in `transformers` 5.24 (models/<type>/modular_<type>.py where
there is one, else modeling_<type>.py, and its config class's defaults) and starts with its category:

    no softmax attention     every layer is a recurrence or a state-space model
    hybrid                   softmax attention in some layers, linear attention / state space / convolution in others
    encoder-decoder          the decoder half of an encoder-decoder model: cross-attention in every layer
    cross-attention          a decoder-only model with cross-attention layers
    multimodal               the registered class holds a vision or audio tower beside the language model
    M-RoPE                   multimodal rotary positions (sections of each head rotated by different position ids)
    attention not counted    softmax attention with a variant attnid.layer.counting does not model (named)
    not yet mapped           every attention layer is one the count models; no mapper names the type yet
                             (what a mapper would have to read or the whole-model count lacks is named)

A mapping family that examines a type says so in its own REFUSED dict, or maps it; either supersedes the
entry here (attnid.hf.coverage).
"""

from __future__ import annotations

CATEGORIES = (
    "no softmax attention",
    "hybrid",
    "encoder-decoder",
    "cross-attention",
    "multimodal",
    "M-RoPE",
    "attention not counted",
    "not yet mapped",
    "not examined",
)

_LLAMA = "Llama's block"
_BERT = "BERT's post-LN encoder"
_DSV3_ROUTER = "DeepSeek-V3's router (sigmoid scores, group-limited top-k, shared experts)"
_GDN = "Gated DeltaNet (linear attention) layers"
_V_NORM = "a gain-free RMSNorm on every value head (v_norm)"

REASONS: dict[str, str] = {
    # every layer a recurrence or a state-space model
    "falcon_mamba": "no softmax attention: Mamba selective state-space blocks (FalconMambaMixer) with weight-free RMSNorms on B, C, dt",
    "mamba": "no softmax attention: Mamba selective state-space blocks (MambaMixer), no attention layer",
    "mamba2": "no softmax attention: Mamba-2 state-space blocks (Mamba2Mixer), no attention layer",
    "rwkv": "no softmax attention: RWKV time-mix (a linear recurrence, RwkvLinearAttention) and channel-mix blocks",
    "xlstm": "no softmax attention: xLSTM's mLSTM blocks (matrix-memory recurrence), no attention layer",
    # softmax attention in some layers only
    "qwen4_exp": f"hybrid: {_GDN} with gated attention, a QSA token indexer, n-gram and per-layer embeddings, gated residuals, M-RoPE",
    "qwen4_exp_text": f"hybrid: {_GDN} with gated attention, a QSA token indexer, n-gram and per-layer embeddings, gated residuals (text model)",
    # cross-attention layers in a decoder-only model
    "blt": "cross-attention: Byte Latent Transformer: byte-level local encoder and decoder cross-attend to the patches of a global model",
    "mllama": "cross-attention: Llama text layers interleaved with gated cross-attention layers (cross_attention_layers) to image states",
    # a vision or audio tower inside the registered class
    "gemma3n": "multimodal: Gemma3nForConditionalGeneration's vision tower is a timm model (TimmWrapperModel: no local code builds it without timm) around Gemma-3n's text model",
    # multimodal rotary positions
    "cohere_compass_text": "M-RoPE: Cohere-2's layers with Qwen3-VL's interleaved multimodal rotary (mrope_section) per layer type",
    # softmax attention with a variant the count does not model
    "big_bird": "attention not counted: block-sparse attention (attention_type block_sparse: global, sliding and random blocks)",
    "bitnet": "attention not counted: an RMSNorm over the heads' concatenated outputs before o_proj (attn_sub_norm)",
    "cpmant": "attention not counted: a learned segment-aware relative position bias (CpmAntSegmentPositionEmbedding)",
    "deepseek_v4": "attention not counted: keys and values compressed over windows by learned gates (compress_rates) and a sparse indexer",
    "doge": "attention not counted: dynamic-mask attention (a mask from the values through dt_proj and A, top keep_window_size keys)",
    "dory": "attention not counted: normalised (nGPT-style) attention: L2-normalised q/k scaled by learned sqk, an output gate",
    "gemma4_assistant": f"attention not counted: a drafter whose Gemma-4 text model ({_V_NORM}) reads the backbone's hidden states",
    "gemma4_unified_assistant": f"attention not counted: a drafter whose Gemma-4 text model ({_V_NORM}) reads the backbone's states",
    "hunyuan_v1_dense": "attention not counted: per-head q/k RMSNorm applied after the rotary embedding (query_layernorm, key_layernorm)",
    "inkling2_loop_text": "attention not counted: learned relative position logits (r_proj) and short convolutions on keys and values, looped",
    "inkling2_text": "attention not counted: learned relative position logits (r_proj) and short convolutions on keys and values",
    "inkling_text": "attention not counted: learned relative position logits (r_proj) and short convolutions on keys and values",
    "jetmoe": "attention not counted: a mixture of attention experts (JetMoeMoA: query and output projections routed per token)",
    "ministral3": "attention not counted: queries scaled by a position-dependent factor (rope_parameters.llama_4_scaling_beta, 0.1)",
    "nanochat": "attention not counted: gain-free per-head q/k RMSNorm (NanoChatRMSNorm); ReLU-squared MLP, final logit softcapping",
    "prophetnet": "attention not counted: n-gram self-attention (main and predicting streams, learned relative position buckets)",
    "reformer": "attention not counted: LSH (hashed-bucket) and local self-attention with shared query-key, reversible layers",
    "xlnet": "attention not counted: two-stream attention with relative positions and learned biases (r_w_bias, r_r_bias, r_s_bias)",
    "zaya": "attention not counted: compressed convolutional attention (ZayaCCAProjection: q/k mixed by a causal convolution)",
    # attention the count models, no mapper yet
    "apertus": "not yet mapped: per-head q/k RMSNorm attention; the MLP is up/down with the trainable xIELU activation (no kind for it)",
    "apertus1p5_text": "not yet mapped: Apertus's text model (per-head q/k RMSNorm; an up/down MLP with the trainable xIELU activation)",
    "arcee": f"not yet mapped: {_LLAMA} with an up/down MLP of ReLU squared (NemotronMLP, hidden_act relu2; no kind for it)",
    "biogpt": "not yet mapped: OPT's pre-LN block (learned positions at an offset of 2) with embeddings scaled by sqrt(d) (scale_embedding)",
    "codegen": "not yet mapped: GPT-J's parallel block with a fused q/k/v projection in mp_num = 4 blocks (qkv_proj)",
    "cohere": "not yet mapped: a parallel block with one bias-free LayerNorm, logits times logit_scale; use_qk_norm (off): a gain per head",
    "cohere2": "not yet mapped: Cohere's parallel block; RoPE only in the sliding-window layers, no positions in the others",
    "ctrl": "not yet mapped: pre-LN blocks with fixed sinusoidal positions (no such positions kind), embeddings times sqrt(d)",
    "cwm": f"not yet mapped: {_LLAMA} with sliding-window and full layers (layer_types) and llama3 rotary scaling",
    "dbrx": "not yet mapped: GQA with a fused, clamped Wqkv (clip_qkv) in bias-free LayerNorm blocks; softmax top-k experts, p-norm weights",
    "dots1": f"not yet mapped: Qwen3's attention (per-head q/k RMSNorm) with DeepSeek-V3's blocks and {_DSV3_ROUTER}",
    "ernie4_5": f"not yet mapped: {_LLAMA} with use_bias on q/k/v/o and the MLP",
    "ernie4_5_moe": "not yet mapped: Ernie-4.5's block with softmax experts (selection corrected by moe_statics) in an interval of layers",
    "exaone": f"not yet mapped: LlamaForCausalLM under its own config class (ExaoneConfig, {_LLAMA}'s keys)",
    "exaone4": "not yet mapped: OLMo-2's post-norm block with per-head q/k RMSNorm; with a sliding_window, RoPE in the sliding layers only",
    "exaone_moe": f"not yet mapped: EXAONE-4's attention (per-head q/k norm, RoPE in sliding layers) with {_DSV3_ROUTER}",
    "flex_olmo": "not yet mapped: OLMo-2's post-norm block (q/k RMSNorm across heads) with OLMoE's softmax top-k experts",
    "flint": "not yet mapped: Qwen3-MoE's attention with sinks, RoPE in the sliding-window layers only; sigmoid experts, a shared one",
    "glm": f"not yet mapped: {_LLAMA} with Phi-3's fused gate_up MLP; q/k/v biased, o_proj not; partial rotary (0.5)",
    "glm4": "not yet mapped: GLM's block with norms on the attention and MLP outputs (post_self_attn_layernorm, post_mlp_layernorm)",
    "glm4_moe": f"not yet mapped: GLM attention (partial rotary 0.5, optional per-head q/k norm) with {_DSV3_ROUTER}",
    "glm4_moe_lite": "not yet mapped: DeepSeek-V3's latent attention and experts under GLM's config (Glm4MoeLiteConfig)",
    "gpt-sw3": "not yet mapped: GPT-2's own classes (GPT2Config, GPT2LMHeadModel) under another model type",
    "gpt_bigcode": "not yet mapped: GPT-2's block with multi-query attention (multi_query: one key/value head, fused c_attn)",
    "gpt_neo": "not yet mapped: GPT-2-like blocks; local layers see window_size keys; q/k/v unbiased, out_proj biased, scores unscaled",
    "gpt_neox_japanese": "not yet mapped: GPT-NeoX-like sequential blocks, bias-free projections; only the last layer's attention output has a bias",
    "granite": f"not yet mapped: {_LLAMA} with constant multipliers (embedding, residual, attention, logits_scaling)",
    "granite_swa": "not yet mapped: Granite's block with sinks on every layer and sliding-window layers (layer_types)",
    "granitemoe": "not yet mapped: Granite's block (constant multipliers) with Mixtral-like experts (top-k logits, then softmax)",
    "granitemoe_swa": "not yet mapped: Granite-MoE-shared's block with sinks and sliding-window layers (layer_types)",
    "granitemoeshared": "not yet mapped: Granite-MoE's block with a shared gated MLP beside the experts (shared_mlp)",
    "helium": f"not yet mapped: {_LLAMA} (o_proj never biased)",
    "hyperclovax": "not yet mapped: Granite's block (constant multipliers) with norms on the sublayer outputs (use_post_norm)",
    "internlm3": f"not yet mapped: LlamaForCausalLM under its own config class (InternLM3Config, {_LLAMA}'s keys)",
    "iquestcoder": f"not yet mapped: LlamaForCausalLM under its own config class (IQuestCoderConfig, {_LLAMA}'s keys)",
    "jais2": f"not yet mapped: {_LLAMA} with LayerNorms and an up/down ReLU-squared MLP (hidden_act relu2; no kind for it)",
    "longcat_flash": "not yet mapped: two latent-attention sublayers and two MLPs per layer, a shortcut MoE with zero (identity) experts",
    "mimo_v2_flash": "not yet mapped: value heads of their own size, sliding layers with twice the key/value heads and sinks; experts",
    "minicpm3": "not yet mapped: DeepSeek-V2's latent attention in dense blocks; residuals times scale_depth / sqrt(L), scaled logits",
    "minimax_m2": "not yet mapped: OLMo-2's q/k RMSNorm across heads in Mixtral blocks with sigmoid experts (e_score_correction_bias)",
    "ministral": "not yet mapped: Mistral's block with sliding-window and full layers (layer_types)",
    "modernbert-decoder": "not yet mapped: ModernBERT's pre-LN blocks as a decoder (embedding norm, GeGLU, sliding layers, prediction head)",
    "mpt": "not yet mapped: BLOOM-like ALiBi blocks (MPT's slopes, alibi_bias_max 8) with bias-free projections and LayerNorms",
    "nemotron": "not yet mapped: partial rotary (0.5); LayerNorms with gain 1 + w (LayerNorm1P), an up/down ReLU-squared MLP",
    "olmo": f"not yet mapped: {_LLAMA} with parameter-free LayerNorms (no gain, no bias); clip_qkv clamps q/k/v when set",
    "olmo3": "not yet mapped: OLMo-2's block with sliding-window and full layers (layer_types)",
    "olmoe": "not yet mapped: OLMo-2's q/k RMSNorm across heads in pre-norm blocks with softmax top-k experts (not renormalised)",
    "openai-gpt": "not yet mapped: GPT-1's post-LN blocks (LayerNorm after each residual add, no final norm), learned positions, tied",
    "persimmon": "not yet mapped: LayerNorms, fused biased q/k/v, partial rotary (0.5), per-head q/k LayerNorm; a ReLU-squared MLP (no kind)",
    "phimoe": "not yet mapped: Mixtral's block with LayerNorms (gain and bias) and the SparseMixer router (sparsemixer)",
    "qwen2_moe": "not yet mapped: Qwen2's attention with softmax top-k experts and a shared expert behind a sigmoid gate",
    "sarvam_moe": "not yet mapped: Glm4MoeForCausalLM under its own config class (SarvamMoEConfig, per-head q/k norm on)",
    "seed_oss": f"not yet mapped: {_LLAMA}; q/k/v biased by attention_bias, o_proj by attention_out_bias",
    "smollm3": f"not yet mapped: {_LLAMA} with every fourth layer without RoPE (no_rope_layers)",
    "solar_open": f"not yet mapped: {_LLAMA} (o_proj never biased) with GLM-4-MoE's experts (sigmoid, group-limited, shared)",
    "stablelm": "not yet mapped: LayerNorms, partial rotary (0.25), use_qkv_bias, parallel residual optional; qk_layernorm (off): a gain per head",
    "starcoder2": "not yet mapped: Mistral-style attention with use_bias on q/k/v/o, a GELU MLP with biases, LayerNorms",
    "vaultgemma": "not yet mapped: Gemma-2's block without the norms on the sublayer outputs",
    "xglm": "not yet mapped: pre-LN blocks with fixed sinusoidal positions (offset 2; no such positions kind), embeddings times sqrt(d)",
    "youtu": "not yet mapped: DeepSeek-V3's latent attention in dense Llama blocks (no experts)",
}
