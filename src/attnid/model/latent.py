r"""Multi-head latent attention inside a whole model (DeepSeek-V2/V3): what the model may hold, and its count.

The block. A pre-LN block reads x = n(h) diag(g_1) (RMSNorm of the residual stream h, gain g_1) and
runs :func:`attnid.attention.attention` with a latent :class:`attnid.spec.AttentionSpec`
(kv_lora_rank > 0), whose tensor code is `attnid.variants.latent_qkv` (a pure float64 function of
the flat vector, so the model's forward needs nothing else):

    c_Q  = rms(x W_DQ) g_DQ,   Q_h = c_Q W_UQ^h          (Q_h = x W_Q^h when q_lora_rank = 0)
    c_KV = rms(x W_DKV) g_DKV, K_h = [x W_KR, c_KV W_UK^h],  V_h = c_KV W_UV^h
    Y    = sum_h softmax(RoPE(Q_h) RoPE(K_h)^T / sqrt(k)) V_h W_O^h

with r_q = q_lora_rank, r = kv_lora_rank, u = k - p nope dims, p RoPE dims (the key x W_KR is
shared by every head), v value dims.

The count (derived, then measured by `attnid.model.judge`). Per block, as in the layer alone
(`attnid.counting_variants`): each latent of rank r admits W_D -> W_D O (O orthogonal: rms is
unchanged), any gain g', and W_U -> diag(g')^-1 O^T diag(g) W_U: r (r + 1) / 2; GL(u) per head on
the nope query/key: H u^2; one C^* per RoPE plane between W_KR and the rope columns of every
query: p; GL(v) per head on (W_UV^h, W_O^h): H v^2; the scale of each down-projection W_D (exact
for eps = 0, weakly identified for eps > 0): 1 + [r_q > 0]. What the model adds is already in
`attnid.model.counting`'s rules and adds nothing new here: the pre-attention gain g_1 against the
rows of W_DQ (or W_Q), W_DKV and W_KR is rule 1 (d per norm); the latent gains against W_UQ,
W_UK, W_UV are inside r (r + 1) / 2; the residual gauge (c R on the stream) multiplies W_O^h on
its output side and the down-projections on their input side (rule 5); an RMSNorm's output spans
R^d, so the layer reads and writes d dims.

Finite inputs (new). Without learned positions the first block reads only the V points
x_t = n(E[t]) diag(g_1). A latent then admits W_D -> W_D A / kappa for every A and kappa > 0 with
|y_t A|^2 - |y_t|^2 = r eps (1 - kappa^2) at the V points y_t = x_t W_D (then every
rms(y_t A / kappa) is rms(y_t) A, which W_U -> diag(g')^-1 A^-1 diag(g) W_U takes back): S = A A^T meets
V generic linear conditions, so the first block holds max(0, r (r + 1) / 2 + 1 - V) exact
directions per latent beyond O(r) and the gains, the down-projection's scale among them (it is
no longer weakly identified there; at eps = 0 it was exact anyway). At real sizes the term is
large: DeepSeek-V3 (r_q = 1536, r = 512, V = 129,280) has
1,180,417 - 129,280 + 131,329 - 129,280 = 1,053,186 of them in its first block. Later blocks read
mixtures over the context: generic inputs. The rule needs V >= rank (the points span R^r).

Modelled: pre-LN, sequential blocks, RMSNorm, RoPE or no positions (learned positions would make
layer 0 read V * seq_len sums E[t] + pos[s], not generic points), no biases (as the layer).
"""

from __future__ import annotations

import dataclasses

from ..counting import count
from ..spec import AttentionSpec, SpecError


def latent_layers(spec) -> list[tuple[int, AttentionSpec]]:
    """(index, attention spec) of every block of a ModelSpec whose attention is latent."""
    return [(i, x.attention) for i, x in enumerate(spec.layer_specs) if x.attention.kv_lora_rank]


def check(spec) -> None:
    """SpecError naming the ModelSpec field when a model holds latent attention where it is not modelled."""
    latent = latent_layers(spec)
    if not latent:
        return
    i, a = latent[0]
    where = f"layer {i} has latent attention (kv_lora_rank={a.kv_lora_rank})"
    for field, ok, why in (
        ("norm", spec.norm == "rmsnorm", "modelled behind RMSNorm only"),
        ("norm_position", spec.norm_position == "pre", "modelled in pre-LN blocks only"),
        ("parallel", not spec.parallel, "modelled in sequential blocks only"),
        ("positions", spec.positions != "learned", "modelled with RoPE or no positions, not learned ones"),
        ("embedding_norm", not spec.embedding_norm, "modelled without an embedding norm"),
    ):
        if not ok:
            raise SpecError(field, f"{where}: {why}")
    ranks = max(max(a.kv_lora_rank, a.q_lora_rank) for _, a in latent)
    if spec.vocab_size < ranks:
        raise SpecError("vocab_size", f"{spec.vocab_size} is below the latent rank {ranks}: not modelled")


def latent_fibre(a: AttentionSpec) -> tuple[int, int]:
    """(unidentified, weakly identified) of one latent block behind an RMSNorm: the layer's own count
    (the block reads and writes all d dims; the gain and gauge terms are the model's rules 1 and 5)."""
    inner = count(dataclasses.replace(a, seq_len=None))
    return inner.unidentified, inner.weakly_identified


def token_point_terms(spec) -> tuple[int, int]:
    """(exact directions added, weakly identified directions removed) by the first block's latents reading
    only V points: per latent of rank r with e = r (r + 1) / 2 + 1 - V > 0, e exact directions, one of
    them the down-projection's scale, weak for eps > 0 on generic inputs (module docstring)."""
    a, V = spec.layer_specs[0].attention, spec.vocab_size
    exact = weak = 0
    for r in (a.kv_lora_rank, a.q_lora_rank) if a.kv_lora_rank else ():
        e = r * (r + 1) // 2 + 1 - V
        if r and e > 0:
            scale_weak = a.norm_eps > 0  # else the layer count holds the scale as exact already
            exact += e - (not scale_weak)
            weak += scale_weak
    return exact, weak
