"""Multi-head latent attention: DeepSeek-V2/V3, whose first `first_k_dense_replace` blocks have a dense MLP and
the others a mixture of experts (`experts`), and the dense models built on their attention: Youtu
(YoutuAttention = DeepseekV3Attention in Llama blocks, a SwiGLU MLP, tied by default) and MiniCPM3
(MiniCPM3Attention: DeepseekV2Attention's projections, v_head_dim d / H by default, a SwiGLU MLP, tied by
default; scale_emb, scale_depth / sqrt(L) on every sublayer's output and hidden_size / dim_model_base on the
logits are nonzero constants: count-neutral). The latent RMSNorms take the class default eps 1e-6, not
rms_norm_eps (DeepseekV3Attention, MiniCPM3Attention build them with the default). GLM-4.7-Flash
(glm4_moe_lite) is DeepSeek-V3's attention (Glm4MoeLiteAttention) with GLM-4.5's experts, its dense blocks by
mlp_layer_types (default: the first only). Sarvam-MLA (sarvam_mla) is DeepSeek-V3 under its own config class.
A.X-K1 (axk1, modular_axk1.py) is DeepSeek-V3 with its dense blocks by mlp_layer_types (default: the first only),
queries always factored (AXK1Attention builds q_a_proj biased by attention_bias, as V3's) and an RMSNorm on every
routed block's output (AXK1MoE.post_mlp_layernorm: not modelled, layers only). LongCat-Flash
(longcat_flash, modeling_longcat_flash.py) has two latent-attention sublayers per layer (LongcatFlashMLA: V3's with
the query factored always; the query and the normed key latent times the constants (d / r_q)^1/2 and
(d / r_kv)^1/2, absorbed by the maps next to them), two dense MLPs and a shortcut mixture with zero-computation
(identity) experts reading the first sublayer's input and added after the second (LongcatFlashDecoderLayer: not
modelled, layers only): one block per attention sublayer, 2 num_layers in all."""

from __future__ import annotations

from ...errors import SpecError
from ...model.blocks import LayerSpec, MLPSpec, MoESpec
from ...layer.spec import AttentionSpec
from .experts import experts
from .keys import mlp_kind, read_flag, read_float, read_int, read_str, rope, routed_layers
from .names import expert_names, head_names, heads, linear, mlp_linear, norm, out_heads, rope_perm, same
from .real_attention import llama_like

MODEL_TYPES = ("deepseek_v2", "deepseek_v3", "glm4_moe_lite", "sarvam_mla", "axk1")
# a config class of its own over DeepSeek-V3's classes -> (the type whose classes build it, its class defaults that
# differ): SarvamMLAConfig (models/sarvam_mla/modular_sarvam_mla.py) is DeepseekV3Config routing over one group
# (n_group, topk_group 1) with the first block dense, built as DeepseekV3ForCausalLM
CLASS_OF = {
    "sarvam_mla": ("deepseek_v3", {"n_group": 1, "topk_group": 1, "first_k_dense_replace": 1}),
    "axk1": ("deepseek_v3", {}),
}
DENSE_BY_LIST = ("glm4_moe_lite", "axk1")  # dense blocks by mlp_layer_types (default: the first only)
POST_MLP_WHY = "an RMSNorm on every routed block's output (AXK1MoE.post_mlp_layernorm): not modelled"
DENSE_TYPES = ("youtu", "minicpm3")
TIED_DEFAULTS = ("youtu", "minicpm3")


def latent_attention(cfg: dict, mt: str) -> AttentionSpec:
    d, H = read_int(cfg, "hidden_size"), read_int(cfg, "num_attention_heads")
    nope, p = read_int(cfg, "qk_nope_head_dim"), read_int(cfg, "qk_rope_head_dim", minimum=0)
    v = read_int(cfg, "v_head_dim", default=d // H if mt == "minicpm3" else None)
    return AttentionSpec(
        d_model=d, n_heads=H, n_kv_heads=H, d_head_qk=nope + p, d_head_v=v,
        rope_dims=p, biases="qkvo" if read_flag(cfg, "attention_bias", False) else "", causal=True,
        rope_base=rope(cfg), kv_lora_rank=read_int(cfg, "kv_lora_rank"),
        q_lora_rank=read_int(cfg, "q_lora_rank", default=0, minimum=0), norm_eps=1e-6,
    )  # fmt: skip


def latent_fields(cfg: dict, mt: str, not_modelled: list) -> dict:
    eps_default = 1e-5 if mt in ("minicpm3", "glm4_moe_lite", "longcat_flash") else 1e-6
    return {
        "positions": "rope", "norm": "rmsnorm", "norm_bias": False, "norm_eps": read_float(cfg, "rms_norm_eps", default=eps_default),
        "tied": read_flag(cfg, "tie_word_embeddings", mt in TIED_DEFAULTS), "not_modelled": tuple(not_modelled),
    }  # fmt: skip


def deepseek(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    own = mt
    if mt == "axk1" and not cfg.get("q_lora_rank"):
        raise SpecError("q_lora_rank", "AXK1Attention always factors the queries (q_a_proj): a rank is needed")
    if mt in CLASS_OF:
        mt, defaults = CLASS_OF[mt]
        cfg = {**defaults, **{k: v for k, v in cfg.items() if v is not None}}
    attention = latent_attention(cfg, mt)
    n_layers = read_int(cfg, "num_hidden_layers")
    activation = read_str(cfg, "hidden_act", default="silu")
    dense = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(activation, True))
    n_experts, top_k = read_int(cfg, "n_routed_experts"), read_int(cfg, "num_experts_per_tok")
    not_modelled: list = []
    routed = experts(cfg, mt, n_experts, top_k, read_int(cfg, "moe_intermediate_size"), activation, not_modelled)
    if own in DENSE_BY_LIST:
        sparse = routed_layers(cfg, n_layers, 1) if cfg.get("mlp_layer_types") else [i > 0 for i in range(n_layers)]
    else:
        sparse = routed_layers({k: v for k, v in cfg.items() if k != "mlp_layer_types"}, n_layers, 0)
    layers = [LayerSpec(attention, routed if moe else dense) for moe in sparse]
    if own == "axk1" and any(sparse):
        not_modelled.append(("post_mlp_layernorm", POST_MLP_WHY))
    return layers, latent_fields(cfg, mt, not_modelled)


SHORTCUT_WHY = (
    "two attention and two MLP sublayers per layer, a shortcut mixture with zero-computation (identity) experts"
    " from the first sublayer to the second's output (LongcatFlashDecoderLayer): not modelled"
)


def longcat(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """LongCat-Flash: its latent-attention sublayers, two a layer (module docstring); layers only."""
    attention = latent_attention(cfg, mt)
    if not attention.q_lora_rank:
        raise SpecError("q_lora_rank", "LongcatFlashMLA always factors the queries (q_a_proj): a rank is needed")
    mlp = MLPSpec(read_int(cfg, "ffn_hidden_size"), mlp_kind(read_str(cfg, "hidden_act", default="silu"), True))
    layers = [LayerSpec(attention, mlp)] * (2 * read_int(cfg, "num_layers", "num_hidden_layers"))
    return layers, latent_fields(cfg, mt, [("num_layers", SHORTCUT_WHY)])


def dense_latent(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    """Youtu, MiniCPM3: latent attention and a dense SwiGLU MLP in every block."""
    for key in ("scale_emb", "scale_depth", "dim_model_base"):
        if read_float(cfg, key, default=1.0) == 0:
            raise SpecError(key, "0 makes the model constant: not modelled")
    attention = latent_attention(cfg, mt)
    mlp = MLPSpec(read_int(cfg, "intermediate_size"), mlp_kind(read_str(cfg, "hidden_act", default="silu"), True))
    return [LayerSpec(attention, mlp)] * read_int(cfg, "num_hidden_layers"), latent_fields(cfg, mt, [])


MAPPERS = {**dict.fromkeys(MODEL_TYPES, deepseek), **dict.fromkeys(DENSE_TYPES, dense_latent)}
MAPPERS["longcat_flash"] = longcat
# LongCat-Flash's tiny self-check model: one layer (two attention sublayers), two zero experts of the mixture's four
TINY_LAYERS = {"longcat_flash": lambda cfg, mt: {"num_layers": 1, "zero_expert_num": 2, "expert_ffn_hidden_size": 4}}


def deepseek_names(spec, cfg: dict) -> list[tuple]:
    """The class's parameters <-> the layout (`.names`): a head is [nope; rope] (rope dims already paired
    (2i, 2i + 1) with rope_interleave, the default), kv_a_proj_with_mqa rows [latent (r); rope key (p)], kv_b_proj
    rows per head [k_nope; v]; routed experts as Mixtral's (router `mlp.gate`), shared experts one SwiGLU MLP."""
    e = [same("model.embed_tokens.weight", "embed")]
    interleaved = cfg.get("rope_interleave", True)
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"model.layers.{i}.self_attn", f"layers.{i}.attn", x.attention
        H, k, p, v, r = a.n_heads, a.d_head_qk, a.rope_dims, a.d_head_v, a.kv_lora_rank
        u = k - p
        kr = rope_perm(p, p, interleaved)
        perm = tuple(range(u)) + tuple(u + j for j in kr)  # the class's head: [nope; rope]
        if a.q_lora_rank:
            e += [linear(f"{hf}.q_a_proj.weight", f"{fine}.W_DQ"), same(f"{hf}.q_a_layernorm.weight", f"{fine}.gain_DQ")]
            e.append(heads(f"{hf}.q_b_proj.weight", f"{fine}.W_UQ", H, k, perm))
        else:
            e.append(heads(f"{hf}.q_proj.weight", f"{fine}.W_Q", H, k, perm))
        e.append(("latent_rope_rows", f"{hf}.kv_a_proj_with_mqa.weight", (f"{fine}.W_DKV", f"{fine}.W_KR"), r, kr))
        e.append(same(f"{hf}.kv_a_layernorm.weight", f"{fine}.gain_DKV"))
        e.append(("kv_b_heads", f"{hf}.kv_b_proj.weight", (f"{fine}.W_UK", f"{fine}.W_UV"), H, u))
        e.append(out_heads(f"{hf}.o_proj.weight", f"{fine}.W_O", H, v))
        if isinstance(x.mlp, MoESpec):
            expert_names(e, f"model.layers.{i}.mlp", f"layers.{i}.mlp", x.mlp, cfg["model_type"])
            if x.mlp.n_shared:
                shared = f"model.layers.{i}.mlp.shared_experts"
                e += [linear(f"{shared}.{n}_proj.weight", f"layers.{i}.mlp.shared_{n}") for n in ("gate", "up", "down")]
        else:
            mlp_linear(e, f"model.layers.{i}.mlp", f"layers.{i}.mlp", x.mlp)
        norm(e, f"model.layers.{i}.input_layernorm", f"layers.{i}.norm_1")
        norm(e, f"model.layers.{i}.post_attention_layernorm", f"layers.{i}.norm_2")
    norm(e, "model.norm", "final_norm")
    head_names(e, spec)
    return e


NAME_MAPS = dict.fromkeys(("deepseek_v2", "deepseek_v3", "sarvam_mla"), deepseek_names)

def _shrink_latent(out: dict, cfg: dict, kv_groups: int) -> None:
    """The module-level check's latent sizes: ranks 8, heads of 4 + 2 rotary dims, two experts."""
    out.update(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=2, v_head_dim=4)
    out["q_lora_rank"] = 8 if cfg.get("q_lora_rank") else None
    out.pop("head_dim", None)
    out.update(n_routed_experts=2, num_experts_per_tok=1, n_group=1, topk_group=1)


REAL_ATTENTION = {  # the attention module the module-level check builds (`.real_attention`)
    "deepseek_v2": llama_like("deepseek_v2", "DeepseekV2", shrink=_shrink_latent),
    "deepseek_v3": llama_like("deepseek_v3", "DeepseekV3", shrink=_shrink_latent),
}
