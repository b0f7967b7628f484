r"""The words a family's name map is written in, as plain data (no torch): one entry per parameter of its class.

A family module of this package defines NAME_MAPS = {model_type: names}, `names(spec, cfg)` listing, per
parameter of the `transformers` class, the entry that maps it onto fine blocks of the layout
(`attnid.gauge.point.FineLayout`). An entry is a tuple (kind, class parameter, fine block(s), sizes...) whose
kind `attnid.gauge.name_map` turns into the map of tensors and its inverse; every kind is a permutation of
coordinates, so the name map is exact and its adjoint is its inverse (`transformers` 5.24,
models/<type>/modeling_<type>.py):

    same, linear        the same tensor; a Linear weight (out, in), stored (in, out) (x W): a transpose
    heads, head_bias    q_proj.weight (n k, d) -> (n, d, k), its bias (n k,) -> (n, k), permuted inside a head
    out_heads           o_proj.weight (d, n v) -> W_O (n, v, d)
    permuted, rows      a permutation of the last axis; of the rows (axis -2)
    rotary pairs        rotate_half pairs dims (i, i + p/2) of a head's first p; this project pairs (2i, 2i + 1):
                        project dim 2i is the class's dim i, 2i + 1 is i + p/2 (:func:`rope_perm`)
    fused kinds         one class parameter holding several fine blocks, written by the family that has it
"""

from __future__ import annotations

from ...model.blocks import MoESpec


def rope_perm(k: int, p: int, interleaved: bool = False) -> tuple[int, ...]:
    """perm (k,): project dim j of a head is the class's dim perm[j] (module docstring)."""
    perm = list(range(k))
    if not interleaved:
        half = p // 2
        for i in range(half):
            perm[2 * i], perm[2 * i + 1] = i, i + half
    return tuple(perm)


def same(hf: str, fine: str) -> tuple:
    return ("same", hf, fine)


def linear(hf: str, fine: str) -> tuple:
    """Linear weight (out, in) <-> (in, out)."""
    return ("linear", hf, fine)


def heads(hf: str, fine: str, n: int, k: int, perm: tuple | None = None) -> tuple:
    """(n k, d) <-> (n, d, k), permuted inside each head."""
    return ("heads", hf, fine, n, k, perm)


def head_bias(hf: str, fine: str, n: int, k: int, perm: tuple | None = None) -> tuple:
    return ("head_bias", hf, fine, n, k, perm)


def permuted(hf: str, fine: str, perm: tuple) -> tuple:
    return ("permuted", hf, fine, perm)


def rows(hf: str, fine: str, perm: tuple) -> tuple:
    """Layout row t is the class's row perm[t]."""
    return ("rows", hf, fine, perm)


def out_heads(hf: str, fine: str, n: int, v: int) -> tuple:
    """o_proj.weight (d, n v) <-> W_O (n, v, d)."""
    return ("out_heads", hf, fine, n, v)


def norm(entries: list, hf_prefix: str, fine: str, bias: bool = False) -> None:
    entries.append(same(f"{hf_prefix}.weight", f"{fine}.gain"))
    if bias:
        entries.append(same(f"{hf_prefix}.bias", f"{fine}.bias"))


def attention_linear(entries, hf, fine, a, perm, q="q_proj", k="k_proj", v="v_proj", o="o_proj", o_prefix=None):
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


def mlp_linear(entries, hf, fine, mlp, up="up_proj", gate="gate_proj", down="down_proj"):
    names = ((gate, "gate"), (up, "up")) if mlp.gated else ((up, "up"),)
    for h, f in names + ((down, "down"),):
        entries.append(linear(f"{hf}.{h}.weight", f"{fine}.{f}"))
        if mlp.bias:
            entries.append(same(f"{hf}.{h}.bias", f"{fine}.{f}_bias"))


def expert_names(entries, hf, fine, moe: MoESpec, model_type: str):
    """Routed experts: Mixtral, Qwen3-MoE and DeepSeek gate_up_proj (E, 2m, d) = [gate; up] (`gate_up_rows`),
    down_proj (E, d, m); GPT-OSS gate_up_proj (E, d, 2m) interleaved, gate even and up odd columns
    (`gate_up_interleaved`, its bias alike), down (E, m, d); Aria's (stored (in, out)) gate_up_proj (E, d, 2m) =
    [gate | up] (`gate_up_columns`), down (E, m, d), its router `router`."""
    router = f"{hf}.router" if model_type in ("gpt_oss", "aria_text") else f"{hf}.gate"
    entries.append(linear(f"{router}.weight", f"{fine}.router"))
    if moe.router_bias:
        entries.append(same(f"{router}.bias", f"{fine}.router_bias"))
    if model_type == "gpt_oss":
        entries.append(("gate_up_interleaved", f"{hf}.experts.gate_up_proj", (f"{fine}.gate", f"{fine}.up")))
        entries.append(("gate_up_interleaved", f"{hf}.experts.gate_up_proj_bias", (f"{fine}.gate_bias", f"{fine}.up_bias")))
        entries += [same(f"{hf}.experts.down_proj", f"{fine}.down"), same(f"{hf}.experts.down_proj_bias", f"{fine}.down_bias")]
        return
    if model_type == "aria_text":
        entries.append(("gate_up_columns", f"{hf}.experts.gate_up_proj", (f"{fine}.gate", f"{fine}.up"), moe.d_expert))
        entries.append(same(f"{hf}.experts.down_proj", f"{fine}.down"))
        return
    entries.append(("gate_up_rows", f"{hf}.experts.gate_up_proj", (f"{fine}.gate", f"{fine}.up"), moe.d_expert))
    entries.append(linear(f"{hf}.experts.down_proj", f"{fine}.down"))


def head_names(entries: list, spec) -> None:
    """The unembedding, where it is not the embedding's transpose."""
    if not spec.tied:
        entries.append(linear("lm_head.weight", "unembed"))


def fused_per_head(hf: str, fine: str, a, perm: tuple) -> list[tuple]:
    """query_key_value (H 3 k, d): rows per head [q_h; k_h; v_h] (`qkv_per_head`; GPT-NeoX, BLOOM), dense the output."""
    H, k = a.n_heads, a.d_head_qk
    out = [("qkv_per_head", f"{hf}.query_key_value.weight", tuple(f"{fine}.{b}" for b in ("W_Q", "W_K", "W_V")), H, k, perm)]
    if a.biases:
        out.append(("qkv_per_head_bias", f"{hf}.query_key_value.bias", tuple(f"{fine}.{b}" for b in ("b_Q", "b_K", "b_V")), H, k, perm))
    out.append(out_heads(f"{hf}.dense.weight", f"{fine}.W_O", a.n_heads, a.d_head_v))
    if a.has_bias("o"):
        out.append(same(f"{hf}.dense.bias", f"{fine}.b_O"))
    return out

