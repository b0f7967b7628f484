"""The whole model as a pure float64 function: logits = f(theta, tokens) (maths in `attnid.model.spec`,
the blocks in `attnid.model.blocks`); the whole-model form of `attnid.layer.forward`, one attention layer's.

Embedding rows are read by indexing (a gather), so every row's gradient is exact; there is no
padding row whose gradient is zeroed. `torch.func` can differentiate and batch `logits`. A mixture of
experts evaluates every expert on every position (the sizes here are tiny) and weights them by a dense
(..., E) vector that is zero off the chosen experts; the selection is piecewise constant, so no gradient
flows through it. While :func:`expert_loads` runs, every mixture records how many positions each
expert was routed (the judge needs every expert seen often enough).
"""

from __future__ import annotations

import contextlib
import math
import threading

import torch
import torch.nn.functional as F

from ..layer.forward import attention
from .blocks import MLPSpec, MoESpec
from .layout import ModelLayout
from .spec import ModelSpec


def norm(x: torch.Tensor, w: dict, name: str, spec: ModelSpec, eps: float | None = None) -> torch.Tensor:
    """LayerNorm or RMSNorm of x (..., d) over its last dim, with the gain (and bias) block `name`."""
    eps = spec.norm_eps if eps is None else eps
    if spec.norm == "layernorm":
        x = x - x.mean(-1, keepdim=True)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    if not spec.norm_gain:  # a norm without learnable parameters
        return y
    gain = w[f"{name}.gain"]
    y = y * (1.0 + gain if spec.gemma_gain else gain)
    if f"{name}.bias" in w:
        y = y + w[f"{name}.bias"]
    return y


def mlp(x: torch.Tensor, w: dict, prefix: str, spec: MLPSpec, eps: float = 0.0) -> torch.Tensor:
    """act(x W_up + b) W_down + b, or the gated (act(x W_gate) * x W_up) W_down: (..., d) -> (..., d); with
    sub_norm the hidden units are RMS-normed (eps) and scaled by their gain before W_down."""
    if isinstance(spec, MoESpec):
        return moe_forward(x, w, prefix, spec)

    def linear(z, name):
        out = z @ w[f"{prefix}.{name}"]
        bias = w.get(f"{prefix}.{name}_bias")
        return out if bias is None else out + bias

    up = linear(x, "up")  # (..., m)
    if spec.kind == "relu":
        hidden = torch.relu(up)
    elif spec.kind == "gelu":
        hidden = F.gelu(up)
    elif spec.kind == "relu2":
        hidden = torch.relu(up).square()
    elif spec.kind == "silu":
        hidden = F.silu(up)
    else:
        gate = linear(x, "gate")
        act = {
            "swiglu": F.silu,
            "geglu": lambda z: F.gelu(z, approximate="tanh"),
            "relu2glu": lambda z: z.relu().square(),
        }
        hidden = act[spec.kind](gate) * up
    if spec.sub_norm:
        hidden = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + eps) * w[f"{prefix}.sub_norm_gain"]
    return linear(hidden, "down")


_RECORDING = threading.local()  # .loads: while `expert_loads` runs in this thread, the list it collects


def _loads() -> list | None:
    return getattr(_RECORDING, "loads", None)


@contextlib.contextmanager
def expert_loads():
    """Inside: a list that collects, for every MoE block called in this thread (in order), the positions
    routed to each expert (E,) (per thread: the grid measures cases side by side)."""
    previous, _RECORDING.loads = _loads(), []
    try:
        yield _RECORDING.loads
    finally:
        _RECORDING.loads = previous


def record_choice(chosen, n_experts: int) -> None:
    """While `expert_loads` runs, add the positions routed to each expert by chosen (..., k) expert ids
    (a forward hook on a real model's router calls it)."""
    if _loads() is not None:
        _loads().append(torch.bincount(chosen.detach().reshape(-1), minlength=n_experts))


def moe_forward(x, w: dict, prefix: str, moe: MoESpec):
    """The mixture of experts of the block `prefix` (parameters w[prefix + '.router'], ...): (..., d) -> (..., d)."""

    p = f"{prefix}."
    E, k = moe.n_experts, moe.top_k
    z = x @ w[p + "router"]  # (..., E)
    if moe.router_bias:
        z = z + w[p + "router_bias"]
    score = {"softmax": lambda: z.softmax(-1), "topk_softmax": lambda: z, "sigmoid": lambda: z.sigmoid()}[moe.scoring]()
    choice = score.detach()  # the selection is piecewise constant: no gradient flows through it
    if moe.selection_bias:  # moves the selection only (Ernie-4.5's e_score_correction_bias)
        choice = choice + w[p + "selection_bias"].detach()
    if moe.n_group > 1:  # keep the topk_group best groups (a group's score: its best, or best two for sigmoid)
        groups = choice.unflatten(-1, (moe.n_group, E // moe.n_group))  # (..., n_group, E / n_group)
        group_score = groups.topk(2, -1).values.sum(-1) if moe.scoring == "sigmoid" else groups.amax(-1)
        best = group_score.topk(moe.topk_group, -1).indices  # (..., topk_group)
        keep = (best[..., None] == torch.arange(moe.n_group)).any(-2)  # (..., n_group)
        choice = choice.masked_fill(~keep.repeat_interleave(E // moe.n_group, -1), -math.inf)
    chosen = choice.topk(k, -1).indices  # (..., k)
    mask = (chosen[..., None] == torch.arange(E)).any(-2).to(x.dtype)  # (..., E): 1 on the chosen experts
    if moe.scoring == "topk_softmax":
        weight = (z.masked_fill(mask == 0, -math.inf)).softmax(-1)  # softmax over the chosen logits
    else:
        weight = score * mask
        if moe.norm_topk_prob:  # by the sum, or the p-norm (DBRX)
            weight = weight / weight.norm(p=moe.topk_norm, dim=-1, keepdim=True)
    weight = weight * moe.routed_scaling_factor  # (..., E)
    if _loads() is not None:
        _loads().append(mask.detach().reshape(-1, E).sum(0))

    gate = torch.einsum("...d,edm->...em", x, w[p + "gate"])  # (..., E, m)
    up = torch.einsum("...d,edm->...em", x, w[p + "up"])
    if moe.expert_bias:
        gate, up = gate + w[p + "gate_bias"], up + w[p + "up_bias"]
    if moe.activation == "swiglu":
        hidden = F.silu(gate) * up
    else:
        gate = gate.clamp(max=moe.swiglu_limit)
        up = up.clamp(-moe.swiglu_limit, moe.swiglu_limit)
        hidden = (up + 1) * gate * torch.sigmoid(moe.swiglu_alpha * gate)
    out = torch.einsum("...em,emd->...ed", hidden, w[p + "down"])  # (..., E, d)
    if moe.expert_bias:
        out = out + w[p + "down_bias"]
    y = torch.einsum("...e,...ed->...d", weight, out)
    if moe.n_shared:
        shared = (F.silu(x @ w[p + "shared_gate"]) * (x @ w[p + "shared_up"])) @ w[p + "shared_down"]  # (..., d)
        if moe.shared_expert_gate:  # Qwen2-MoE: scaled by sigmoid(x w_s)
            shared = shared * torch.sigmoid(x @ w[p + "shared_expert_gate"])[..., None]
        y = y + shared
    return y


def sinusoidal_table(n: int, d: int, dtype=torch.float64) -> torch.Tensor:
    """S (n, d) of `positions == "sinusoidal"`: row t = [sin(t w_j), cos(t w_j)], w_j = 10000^(-j / (d/2 - 1)),
    j < d/2 (fairseq's and XGLM's table; an odd d ends with a zero column). The count needs only the rank of the
    rows in use, so other fixed tables (XGLM's read from row 2, CTRL's exponents 2j / d) count alike."""
    half = d // 2
    freq = torch.exp(torch.arange(half, dtype=dtype) * -(math.log(10000.0) / max(half - 1, 1)))  # (d/2,)
    angle = torch.arange(n, dtype=dtype)[:, None] * freq[None]  # (n, d/2)
    table = torch.cat([angle.sin(), angle.cos()], dim=1)
    return torch.cat([table, torch.zeros(n, d % 2, dtype=dtype)], dim=1)


def position_ids(tokens: torch.Tensor, spec: ModelSpec) -> torch.Tensor:
    """The learned row each token reads (B, T): its position, or with a pad token (RoBERTa's
    create_position_ids_from_input_ids, shifted to rows from 0) the pad's own row for the pad and n - 1 for the
    n-th token that is not the pad."""
    T = tokens.shape[1]
    if spec.pad_row is None:
        return torch.arange(T).expand_as(tokens)
    real = tokens != spec.pad_token
    return torch.where(real, torch.cumsum(real, dim=1) - 1, spec.pad_row)


def add_token_type(h, w: dict):
    """h (B, T, d) + the token-type row 0 (every token_type_id is 0)."""
    return h + w["token_type"][0] if "token_type" in w else h


def mlm_transform(h, w: dict, spec: ModelSpec):
    """BERT's prediction-head transform: Norm(GELU(h W + b)) (B, T, d)."""
    if not spec.mlm_head:
        return h
    return norm(F.gelu(h @ w["mlm.dense"] + w["mlm.dense_bias"]), w, "mlm_norm", spec)


def logits(
    theta: torch.Tensor, tokens: torch.Tensor, spec: ModelSpec, layout: ModelLayout | None = None
) -> torch.Tensor:
    """Logits (B, T, V) of token ids (B, T) (or (T,) -> (T, V)) for flat parameters theta (P,)."""
    layout = layout or ModelLayout(spec)
    w = layout.unflatten(theta)
    squeeze = tokens.dim() == 1
    if squeeze:
        tokens = tokens[None]
    T = tokens.shape[1]
    if T > spec.seq_len:
        raise ValueError(f"sequence length {T} exceeds seq_len={spec.seq_len}")
    h = w["embed"][tokens] * spec.embed_scale  # (B, T, d)
    if "pos" in w:
        h = h + w["pos"][position_ids(tokens, spec)]
    elif spec.positions == "sinusoidal":
        h = h + sinusoidal_table(T, spec.d_model, h.dtype)
    h = add_token_type(h, w)  # token_type_ids all 0
    if spec.embedding_norm:
        h = norm(h, w, "embed_norm", spec)
    for i, layer in enumerate(spec.layer_specs):
        p = f"layers.{i}"

        def attn(x, p=p, a=layer.attention, a_layout=layout.attention_layouts[i]):
            return attention(w[f"{p}.attn"], x, a, a_layout)

        def ff(x, p=p, m=layer.mlp):
            return mlp(x, w, f"{p}.mlp", m, spec.norm_eps)

        if spec.norm_position == "post":
            h = norm(h + attn(h), w, f"{p}.norm_1", spec)
            h = norm(h + ff(h), w, f"{p}.norm_2", spec)
        elif spec.parallel:
            a = norm(h, w, f"{p}.norm_1", spec)
            m = a if spec.shared_norm else norm(h, w, f"{p}.norm_2", spec)
            h = h + attn(a) + ff(m)
        elif not spec.input_norms:  # OLMo-2: the sublayers read the raw stream, their outputs normed
            h = h + norm(attn(h), w, f"{p}.out_norm_1", spec)
            h = h + norm(ff(h), w, f"{p}.out_norm_2", spec)
        elif spec.output_norms:  # Gemma-2/3: each sublayer's output normed before the residual add
            h = h + norm(attn(norm(h, w, f"{p}.norm_1", spec)), w, f"{p}.out_norm_1", spec)
            h = h + norm(ff(norm(h, w, f"{p}.norm_2", spec)), w, f"{p}.out_norm_2", spec)
        else:
            h = h + attn(norm(h, w, f"{p}.norm_1", spec))
            h = h + ff(norm(h, w, f"{p}.norm_2", spec))
    if spec.final_norm:
        h = norm(h, w, "final_norm", spec)
    h = mlm_transform(h, w, spec)
    out = h @ (w["embed"].T if spec.tied else w["unembed"])  # (B, T, V)
    if "unembed_bias" in w:
        out = out + w["unembed_bias"]
    return out[0] if squeeze else out
