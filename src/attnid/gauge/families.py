r"""Each family's name map between its `transformers` class's `named_parameters()` and the ModelSpec layout.

A family (the model types of one of `attnid.hf.mapping`'s modules) lists, per parameter of its class, the
entry of `attnid.gauge.names` that maps it onto fine blocks; :func:`name_map` picks the family by model type.
What differs between the families' classes and the layout (`transformers` 5.24, models/<type>/modeling_<type>.py):

    Llama               the pieces of `attnid.gauge.names` (Linear, heads, rotary pairs)
    GPT-2               Conv1D c_attn (d, 3d) = [q | k | v] columns, c_proj (H v, d): already (in, out)
    GPT-NeoX, BLOOM     query_key_value (3 d, d) rows per head [q_h; k_h; v_h]
    Falcon (new arch)   query_key_value rows per KV group [q of its r heads; k; v]
    experts             Mixtral, Qwen3-MoE gate_up_proj (E, 2m, d) = [gate; up], down_proj (E, d, m);
                        GPT-OSS gate_up_proj (E, d, 2m) interleaved (gate even, up odd columns), down (E, m, d)
    OPT                 embed_positions has 2 unread rows first (the offset): layout row t is the class's row t + 2
    DeepSeek-V3         kv_a_proj_with_mqa rows [latent (r); rope key (p)]; kv_b_proj rows per head [k_nope; v];
                        routed experts as Mixtral's (router `mlp.gate`), shared experts one SwiGLU MLP of E_s m units;
                        with rope_interleave (the default) its rotary dims already pair (2i, 2i + 1)
"""

from __future__ import annotations

import torch

from ..errors import SpecError
from ..model.blocks import MoESpec
from ..model.spec import ModelSpec
from .names import (
    Entry,
    NameMap,
    fused,
    head_bias,
    heads,
    inverse_perm,
    linear,
    out_heads,
    permuted,
    rope_perm,
    same,
    single,
)


def _norm(entries, hf_prefix, fine, bias=False):
    entries.append(same(f"{hf_prefix}.weight", f"{fine}.gain"))
    if bias:
        entries.append(same(f"{hf_prefix}.bias", f"{fine}.bias"))


def _attention_linear(entries, hf, fine, a, perm, q="q_proj", k="k_proj", v="v_proj", o="o_proj", o_prefix=None):
    """q/k/v/o Linear projections of one attention layer (Llama-style names; o under o_prefix when it sits apart)."""
    op = o_prefix or hf
    H, G, kd, vd = a.n_heads, a.n_kv_heads, a.d_head_qk, a.d_head_v
    entries += [heads(f"{hf}.{q}.weight", f"{fine}.W_Q", H, kd, perm), heads(f"{hf}.{k}.weight", f"{fine}.W_K", G, kd, perm)]
    entries += [heads(f"{hf}.{v}.weight", f"{fine}.W_V", G, vd), out_heads(f"{op}.{o}.weight", f"{fine}.W_O", H, vd)]
    if a.has_bias("q"):
        entries.append(head_bias(f"{hf}.{q}.bias", f"{fine}.b_Q", H, kd, perm))
    if a.has_bias("k"):
        entries.append(head_bias(f"{hf}.{k}.bias", f"{fine}.b_K", G, kd, perm))
    if a.has_bias("v"):
        entries.append(head_bias(f"{hf}.{v}.bias", f"{fine}.b_V", G, vd))
    if a.has_bias("o"):
        entries.append(same(f"{op}.{o}.bias", f"{fine}.b_O"))


def _mlp_linear(entries, hf, fine, mlp, up="up_proj", gate="gate_proj", down="down_proj"):
    names = ((gate, "gate"), (up, "up")) if mlp.gated else ((up, "up"),)
    for h, f in names + ((down, "down"),):
        entries.append(linear(f"{hf}.{h}.weight", f"{fine}.{f}"))
        if mlp.bias:
            entries.append(same(f"{hf}.{h}.bias", f"{fine}.{f}_bias"))


def _experts(entries, hf, fine, moe: MoESpec, model_type: str):
    m = moe.d_expert
    router = f"{hf}.router" if model_type == "gpt_oss" else f"{hf}.gate"
    entries.append(linear(f"{router}.weight", f"{fine}.router"))
    if moe.router_bias:
        entries.append(same(f"{router}.bias", f"{fine}.router_bias"))
    if model_type == "gpt_oss":  # (E, d, 2m), gate even and up odd columns; down (E, m, d)
        entries.append(fused(f"{hf}.experts.gate_up_proj", (f"{fine}.gate", f"{fine}.up"),
                             lambda x: (x[..., 0::2], x[..., 1::2]), lambda t: torch.stack(t, -1).flatten(-2)))  # fmt: skip
        entries.append(fused(f"{hf}.experts.gate_up_proj_bias", (f"{fine}.gate_bias", f"{fine}.up_bias"),
                             lambda x: (x[..., 0::2], x[..., 1::2]), lambda t: torch.stack(t, -1).flatten(-2)))  # fmt: skip
        entries += [same(f"{hf}.experts.down_proj", f"{fine}.down"), same(f"{hf}.experts.down_proj_bias", f"{fine}.down_bias")]
        return
    entries.append(fused(f"{hf}.experts.gate_up_proj", (f"{fine}.gate", f"{fine}.up"),
                         lambda x: (x[..., :m, :].transpose(-1, -2), x[..., m:, :].transpose(-1, -2)),
                         lambda t: torch.cat([y.transpose(-1, -2) for y in t], -2)))  # fmt: skip
    entries.append(linear(f"{hf}.experts.down_proj", f"{fine}.down"))


def llama_family(spec: ModelSpec, cfg: dict) -> list[Entry]:
    mt, e = cfg["model_type"], []
    e.append(same("model.embed_tokens.weight", "embed"))
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"model.layers.{i}", f"layers.{i}", x.attention
        perm = rope_perm(a.d_head_qk, a.rope_dims)
        _attention_linear(e, f"{hf}.self_attn", f"{fine}.attn", a, perm)
        if a.qk_norm != "none":
            e += [permuted(f"{hf}.self_attn.q_norm.weight", f"{fine}.attn.gain_Q", perm),
                  permuted(f"{hf}.self_attn.k_norm.weight", f"{fine}.attn.gain_K", perm)]  # fmt: skip
        if a.sinks:
            e.append(same(f"{hf}.self_attn.sinks", f"{fine}.attn.sink"))
        if isinstance(x.mlp, MoESpec):
            _experts(e, f"{hf}.mlp", f"{fine}.mlp", x.mlp, mt)
        else:
            _mlp_linear(e, f"{hf}.mlp", f"{fine}.mlp", x.mlp)
        _norm(e, f"{hf}.input_layernorm", f"{fine}.norm_1")
        if spec.output_norms:
            _norm(e, f"{hf}.post_attention_layernorm", f"{fine}.out_norm_1")
            _norm(e, f"{hf}.pre_feedforward_layernorm", f"{fine}.norm_2")
            _norm(e, f"{hf}.post_feedforward_layernorm", f"{fine}.out_norm_2")
        else:
            _norm(e, f"{hf}.post_attention_layernorm", f"{fine}.norm_2")
    _norm(e, "model.norm", "final_norm")
    if not spec.tied:
        e.append(linear("lm_head.weight", "unembed"))
    return e


def deepseek(spec: ModelSpec, cfg: dict) -> list[Entry]:
    e = [same("model.embed_tokens.weight", "embed")]
    interleaved = cfg.get("rope_interleave", True)
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"model.layers.{i}.self_attn", f"layers.{i}.attn", x.attention
        H, k, p, v, r = a.n_heads, a.d_head_qk, a.rope_dims, a.d_head_v, a.kv_lora_rank
        u = k - p
        perm = torch.cat((torch.arange(u), u + rope_perm(p, p, interleaved)))  # the class's head: [nope; rope]
        if a.q_lora_rank:
            e += [linear(f"{hf}.q_a_proj.weight", f"{fine}.W_DQ"), same(f"{hf}.q_a_layernorm.weight", f"{fine}.gain_DQ")]
            e.append(heads(f"{hf}.q_b_proj.weight", f"{fine}.W_UQ", H, k, perm))
        else:
            e.append(heads(f"{hf}.q_proj.weight", f"{fine}.W_Q", H, k, perm))
        kr = rope_perm(p, p, interleaved)
        e.append(fused(f"{hf}.kv_a_proj_with_mqa.weight", (f"{fine}.W_DKV", f"{fine}.W_KR"),
                       lambda t, r=r, kr=kr: (t[..., :r, :].transpose(-1, -2), t[..., r:, :][..., kr, :].transpose(-1, -2)),
                       lambda y, kr=kr: torch.cat((y[0].transpose(-1, -2), y[1].transpose(-1, -2)[..., inverse_perm(kr), :]), -2)))  # fmt: skip
        e.append(same(f"{hf}.kv_a_layernorm.weight", f"{fine}.gain_DKV"))
        e.append(fused(f"{hf}.kv_b_proj.weight", (f"{fine}.W_UK", f"{fine}.W_UV"),
                       lambda t, H=H, u=u: (t.unflatten(-2, (H, -1))[..., :u, :].transpose(-1, -2),
                                            t.unflatten(-2, (H, -1))[..., u:, :].transpose(-1, -2)),
                       lambda y: torch.cat((y[0].transpose(-1, -2), y[1].transpose(-1, -2)), -2).flatten(-3, -2)))  # fmt: skip
        e.append(out_heads(f"{hf}.o_proj.weight", f"{fine}.W_O", H, v))
        if isinstance(x.mlp, MoESpec):  # router `gate` (E, d), experts as Mixtral's, shared experts one MLP
            _experts(e, f"model.layers.{i}.mlp", f"layers.{i}.mlp", x.mlp, cfg["model_type"])
            if x.mlp.n_shared:
                shared = f"model.layers.{i}.mlp.shared_experts"
                e += [linear(f"{shared}.{n}_proj.weight", f"layers.{i}.mlp.shared_{n}") for n in ("gate", "up", "down")]
        else:
            _mlp_linear(e, f"model.layers.{i}.mlp", f"layers.{i}.mlp", x.mlp)
        _norm(e, f"model.layers.{i}.input_layernorm", f"layers.{i}.norm_1")
        _norm(e, f"model.layers.{i}.post_attention_layernorm", f"layers.{i}.norm_2")
    _norm(e, "model.norm", "final_norm")
    if not spec.tied:
        e.append(linear("lm_head.weight", "unembed"))
    return e


def gpt2(spec: ModelSpec, cfg: dict) -> list[Entry]:
    e = [same("transformer.wte.weight", "embed"), same("transformer.wpe.weight", "pos")]
    d = spec.d_model
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"transformer.h.{i}", f"layers.{i}", x.attention
        H, k = a.n_heads, a.d_head_qk
        _norm(e, f"{hf}.ln_1", f"{fine}.norm_1", True)

        def split(t, H=H, k=k):  # (d, 3d) columns [q | k | v], each (H, k)
            return tuple(t[..., j * d : (j + 1) * d].unflatten(-1, (H, k)).transpose(-2, -3) for j in range(3))

        def join(y):
            return torch.cat([w.transpose(-2, -3).flatten(-2) for w in y], -1)

        e.append(fused(f"{hf}.attn.c_attn.weight", tuple(f"{fine}.attn.{b}" for b in ("W_Q", "W_K", "W_V")), split, join))
        e.append(fused(f"{hf}.attn.c_attn.bias", tuple(f"{fine}.attn.{b}" for b in ("b_Q", "b_K", "b_V")),
                       lambda t, H=H, k=k: tuple(t[..., j * d : (j + 1) * d].unflatten(-1, (H, k)) for j in range(3)),
                       lambda y: torch.cat([w.flatten(-2) for w in y], -1)))  # fmt: skip
        e.append(single(f"{hf}.attn.c_proj.weight", f"{fine}.attn.W_O", lambda t, H=H: t.unflatten(-2, (H, -1)), lambda y: y.flatten(-3, -2)))
        e.append(same(f"{hf}.attn.c_proj.bias", f"{fine}.attn.b_O"))
        _norm(e, f"{hf}.ln_2", f"{fine}.norm_2", True)
        e += [same(f"{hf}.mlp.c_fc.weight", f"{fine}.mlp.up"), same(f"{hf}.mlp.c_fc.bias", f"{fine}.mlp.up_bias")]
        e += [same(f"{hf}.mlp.c_proj.weight", f"{fine}.mlp.down"), same(f"{hf}.mlp.c_proj.bias", f"{fine}.mlp.down_bias")]
    _norm(e, "transformer.ln_f", "final_norm", True)
    if not spec.tied:
        e.append(linear("lm_head.weight", "unembed"))
    return e


def _fused_per_head(hf, fine, a, perm):
    """query_key_value (H 3 k, d): rows per head [q_h; k_h; v_h] (GPT-NeoX, BLOOM)."""
    H, k = a.n_heads, a.d_head_qk
    inv = inverse_perm(perm)

    def split(t):
        x = t.unflatten(-2, (H, 3, k))  # (..., H, 3, k, d)
        q, kk, v = x[..., 0, :, :], x[..., 1, :, :], x[..., 2, :, :]
        return q[..., perm, :].transpose(-1, -2), kk[..., perm, :].transpose(-1, -2), v.transpose(-1, -2)

    def join(y):
        q, kk, v = y[0].transpose(-1, -2)[..., inv, :], y[1].transpose(-1, -2)[..., inv, :], y[2].transpose(-1, -2)
        return torch.stack((q, kk, v), -3).flatten(-4, -2)

    def split_b(t):
        x = t.unflatten(-1, (H, 3, k))
        return x[..., 0, :][..., perm], x[..., 1, :][..., perm], x[..., 2, :]

    def join_b(y):
        return torch.stack((y[0][..., inv], y[1][..., inv], y[2]), -2).flatten(-3)

    out = [fused(f"{hf}.query_key_value.weight", tuple(f"{fine}.{b}" for b in ("W_Q", "W_K", "W_V")), split, join)]
    if a.biases:
        out.append(fused(f"{hf}.query_key_value.bias", tuple(f"{fine}.{b}" for b in ("b_Q", "b_K", "b_V")), split_b, join_b))
    out.append(out_heads(f"{hf}.dense.weight", f"{fine}.W_O", a.n_heads, a.d_head_v))
    if a.has_bias("o"):
        out.append(same(f"{hf}.dense.bias", f"{fine}.b_O"))
    return out


def gpt_neox(spec: ModelSpec, cfg: dict) -> list[Entry]:
    e = [same("gpt_neox.embed_in.weight", "embed")]
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"gpt_neox.layers.{i}", f"layers.{i}", x.attention
        _norm(e, f"{hf}.input_layernorm", f"{fine}.norm_1", True)
        _norm(e, f"{hf}.post_attention_layernorm", f"{fine}.norm_2", True)
        e += _fused_per_head(f"{hf}.attention", f"{fine}.attn", a, rope_perm(a.d_head_qk, a.rope_dims))
        _mlp_linear(e, f"{hf}.mlp", f"{fine}.mlp", x.mlp, up="dense_h_to_4h", down="dense_4h_to_h")
    _norm(e, "gpt_neox.final_layer_norm", "final_norm", True)
    if not spec.tied:
        e.append(linear("lm_head.weight", "unembed"))
    return e


def bloom(spec: ModelSpec, cfg: dict) -> list[Entry]:
    e = [same("transformer.word_embeddings.weight", "embed")]
    _norm(e, "transformer.word_embeddings_layernorm", "embed_norm", True)
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"transformer.h.{i}", f"layers.{i}", x.attention
        _norm(e, f"{hf}.input_layernorm", f"{fine}.norm_1", True)
        e += _fused_per_head(f"{hf}.self_attention", f"{fine}.attn", a, torch.arange(a.d_head_qk))
        _norm(e, f"{hf}.post_attention_layernorm", f"{fine}.norm_2", True)
        _mlp_linear(e, f"{hf}.mlp", f"{fine}.mlp", x.mlp, up="dense_h_to_4h", down="dense_4h_to_h")
    _norm(e, "transformer.ln_f", "final_norm", True)
    if not spec.tied:
        e.append(linear("lm_head.weight", "unembed"))
    return e


def falcon(spec: ModelSpec, cfg: dict) -> list[Entry]:
    e = [same("transformer.word_embeddings.weight", "embed")]
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"transformer.h.{i}", f"layers.{i}", x.attention
        H, G, k, r = a.n_heads, a.n_kv_heads, a.d_head_qk, a.group_size
        if not cfg.get("new_decoder_architecture", False):
            raise SpecError("new_decoder_architecture", "the name map of Falcon's old decoder is not written")
        perm = rope_perm(k, a.rope_dims)
        inv = inverse_perm(perm)

        def split(t, G=G, r=r, k=k, perm=perm):  # rows per group [q of r heads; k; v]
            x = t.unflatten(-2, (G, r + 2, k))  # (..., G, r + 2, k, d)
            q = x[..., :r, :, :].flatten(-4, -3)[..., perm, :].transpose(-1, -2)  # (..., H, d, k)
            return q, x[..., r, :, :][..., perm, :].transpose(-1, -2), x[..., r + 1, :, :].transpose(-1, -2)

        def join(y, G=G, r=r, inv=inv):
            q = y[0].transpose(-1, -2)[..., inv, :].unflatten(-3, (G, r))
            kk = y[1].transpose(-1, -2)[..., inv, :][..., None, :, :]
            v = y[2].transpose(-1, -2)[..., None, :, :]
            return torch.cat((q, kk, v), -3).flatten(-4, -2)

        e.append(fused(f"{hf}.self_attention.query_key_value.weight", tuple(f"{fine}.attn.{b}" for b in ("W_Q", "W_K", "W_V")), split, join))
        if a.biases:
            raise SpecError("bias", "the name map of Falcon's biases is not written")
        e.append(out_heads(f"{hf}.self_attention.dense.weight", f"{fine}.attn.W_O", H, a.d_head_v))
        _mlp_linear(e, f"{hf}.mlp", f"{fine}.mlp", x.mlp, up="dense_h_to_4h", down="dense_4h_to_h")
        _norm(e, f"{hf}.ln_attn", f"{fine}.norm_1", True)
        _norm(e, f"{hf}.ln_mlp", f"{fine}.norm_2", True)
    _norm(e, "transformer.ln_f", "final_norm", True)
    if not spec.tied:
        e.append(linear("lm_head.weight", "unembed"))
    return e


def opt(spec: ModelSpec, cfg: dict) -> list[Entry]:
    rows = spec.max_positions
    shift = torch.roll(torch.arange(rows), -2)  # layout row t is the class's row t + 2

    e = [same("model.decoder.embed_tokens.weight", "embed")]
    e.append(single("model.decoder.embed_positions.weight", "pos", lambda x: x[..., shift, :], lambda y: y[..., inverse_perm(shift), :]))
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"model.decoder.layers.{i}", f"layers.{i}", x.attention
        _attention_linear(e, f"{hf}.self_attn", f"{fine}.attn", a, None, o="out_proj")
        _norm(e, f"{hf}.self_attn_layer_norm", f"{fine}.norm_1", True)
        _mlp_linear(e, hf, f"{fine}.mlp", x.mlp, up="fc1", down="fc2")
        _norm(e, f"{hf}.final_layer_norm", f"{fine}.norm_2", True)
    if spec.final_norm:
        _norm(e, "model.decoder.final_layer_norm", "final_norm", True)
    if not spec.tied:
        e.append(linear("lm_head.weight", "unembed"))
    return e


def bert(spec: ModelSpec, cfg: dict) -> list[Entry]:
    p = "bert.embeddings"
    e = [same(f"{p}.word_embeddings.weight", "embed"), same(f"{p}.position_embeddings.weight", "pos")]
    e.append(same(f"{p}.token_type_embeddings.weight", "token_type"))
    _norm(e, f"{p}.LayerNorm", "embed_norm", True)
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"bert.encoder.layer.{i}", f"layers.{i}", x.attention
        _attention_linear(e, f"{hf}.attention.self", f"{fine}.attn", a, None, "query", "key", "value", "dense", f"{hf}.attention.output")
        _norm(e, f"{hf}.attention.output.LayerNorm", f"{fine}.norm_1", True)
        e += [linear(f"{hf}.intermediate.dense.weight", f"{fine}.mlp.up"), same(f"{hf}.intermediate.dense.bias", f"{fine}.mlp.up_bias")]
        e += [linear(f"{hf}.output.dense.weight", f"{fine}.mlp.down"), same(f"{hf}.output.dense.bias", f"{fine}.mlp.down_bias")]
        _norm(e, f"{hf}.output.LayerNorm", f"{fine}.norm_2", True)
    e += [linear("cls.predictions.transform.dense.weight", "mlm.dense"), same("cls.predictions.transform.dense.bias", "mlm.dense_bias")]
    _norm(e, "cls.predictions.transform.LayerNorm", "mlm_norm", True)
    e.append(same("cls.predictions.bias", "unembed_bias"))
    return e


FAMILIES = {"gpt2": gpt2, "gpt_neox": gpt_neox, "bloom": bloom, "falcon": falcon, "opt": opt, "bert": bert,
            "deepseek_v2": deepseek, "deepseek_v3": deepseek}  # fmt: skip


def name_map(spec: ModelSpec, cfg: dict) -> NameMap:
    """The name map of a config's class (cfg: the config mapping; its model_type picks the family)."""
    from ..hf.mapping.llama import MODEL_TYPES as LLAMA

    mt = cfg["model_type"]
    family = llama_family if mt in LLAMA else FAMILIES.get(mt)
    if family is None:
        raise SpecError("model_type", f"{mt!r}: no name map between its class and the layout is written")
    return NameMap(family(spec, cfg))
