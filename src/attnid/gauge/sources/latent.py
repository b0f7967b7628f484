r"""Generators of a latent attention block inside a model (DeepSeek's multi-head latent attention; source
`attention`, counted by `attnid.model.counting.attention`; part of `.attention`).

At the layer level it is counted by `attnid.layer.counting_variants`. Per head gl(u) on the nope query/key, one C^* per
plane of the shared RoPE key (all heads' rope query columns against W_KR), gl(v) per head on (W_UV, W_O),
and per latent of rank r its orthogonal group and gains, O(r) x R^r: dW_D = W_D X (X skew),
dW_U = -D^-1 X D W_U, dgain = gain s, dW_U = -diag(s) W_U; the down-projection's scale is weak for eps > 0.
"""

from __future__ import annotations

import torch

from ...layer.spec import AttentionSpec
from ...symmetry import commutant_basis
from ..group import Group
from ..point import DTYPE


def latent_groups(block) -> list[Group]:
    """The groups of a latent attention block (an `attnid.gauge.sources.attention.AttentionBlock`): module docstring."""
    a, H = block.a, block.a.n_heads
    k, p, v = a.d_head_qk, a.rope_dims, a.d_head_v
    u = k - p
    qname = "W_UQ" if a.q_lora_rank else "W_Q"
    WQ, WUK, WUV, WO, WKR = (block.W(b) for b in (qname, "W_UK", "W_UV", "W_O", "W_KR"))
    groups = []

    def nope(c):  # (..., H u u)
        X = c.unflatten(-1, (H, u, u))
        dq = torch.zeros(*c.shape[:-1], *WQ.shape, dtype=DTYPE)
        dq[..., :u] = WQ[..., :u] @ X
        return {block.name(qname): dq, block.name("W_UK"): -(WUK @ X.mT)}

    def nope_act(w, c):
        X = c.unflatten(-1, (H, u, u))
        q = w[block.name(qname)]
        return {block.name(qname): torch.cat((q[..., :u] @ torch.linalg.matrix_exp(X), q[..., u:]), -1),
                block.name("W_UK"): w[block.name("W_UK")] @ torch.linalg.matrix_exp(-X.mT)}  # fmt: skip

    groups.append(Group("attention", block.prefix + "query_key", H * u * u, nope, (block.name(qname), block.name("W_UK")),
                        meta={"action": nope_act}))  # fmt: skip
    if p:
        planes = commutant_basis(AttentionSpec(d_model=2, n_heads=1, d_head_qk=p, rope_dims=p))  # (p, p, p)

        def rope(c):  # (..., p)
            M = torch.einsum("...m,mij->...ij", c, planes)  # (..., p, p)
            dq = torch.zeros(*c.shape[:-1], *WQ.shape, dtype=DTYPE)
            dq[..., u:] = WQ[..., u:] @ M[..., None, :, :]
            return {block.name(qname): dq, block.name("W_KR"): -(WKR @ M.mT)}

        def rope_act(w, c):
            X = torch.einsum("m,mij->ij", c, planes)
            q = w[block.name(qname)]
            return {block.name(qname): torch.cat((q[..., :u], q[..., u:] @ torch.linalg.matrix_exp(X)), -1),
                    block.name("W_KR"): w[block.name("W_KR")] @ torch.linalg.matrix_exp(-X.mT)}  # fmt: skip

        groups.append(Group("attention", block.prefix + "rope_key", p, rope, (block.name(qname), block.name("W_KR")),
                            meta={"action": rope_act}))  # fmt: skip

    def vo(c):
        N = c.unflatten(-1, (H, v, v))
        return {block.name("W_UV"): WUV @ N, block.name("W_O"): -(N @ WO)}

    def vo_act(w, c):
        Y = c.unflatten(-1, (H, v, v))
        return {block.name("W_UV"): w[block.name("W_UV")] @ torch.linalg.matrix_exp(Y),
                block.name("W_O"): torch.linalg.matrix_exp(-Y) @ w[block.name("W_O")]}  # fmt: skip

    groups.append(Group("attention", block.prefix + "value_output", H * v * v, vo, (block.name("W_UV"), block.name("W_O")),
                        meta={"action": vo_act}))  # fmt: skip
    latents = [("W_DKV", "gain_DKV", ("W_UK", "W_UV"), a.kv_lora_rank)]
    if a.q_lora_rank:
        latents.append(("W_DQ", "gain_DQ", ("W_UQ",), a.q_lora_rank))
    for down, gain, ups, r in latents:
        groups += latent(block, down, gain, ups, r)
    return groups


def latent(block, down: str, gain: str, ups: tuple, r: int) -> list[Group]:
    """O(r) and the gains of one latent (module docstring), and its down-projection's scale."""
    WD, g = block.W(down), block.W(gain)
    Ups = {b: block.W(b) for b in ups}  # (H, r, .)
    iu = torch.triu_indices(r, r, 1)
    tag = down[2:].lower()

    def rot(c):  # (..., r (r - 1) / 2): X skew
        X = torch.zeros(*c.shape[:-1], r, r, dtype=DTYPE)
        X[..., iu[0], iu[1]] = c
        X = X - X.mT
        L = -(X * g) / g[:, None]  # -D^-1 X D
        out = {block.name(down): WD @ X}
        for b, t in Ups.items():
            out[block.name(b)] = L[..., None, :, :] @ t
        return out

    def gains(c):  # (..., r)
        out = {block.name(gain): g * c}
        for b, t in Ups.items():
            out[block.name(b)] = -(t * c[..., None, :, None])
        return out

    def gains_act(w, c):
        out = {block.name(gain): w[block.name(gain)] * c.exp()}
        for b in Ups:
            out[block.name(b)] = w[block.name(b)] * (-c).exp()[None, :, None]
        return out

    blocks = (block.name(down),) + tuple(block.name(b) for b in ups)
    out = [
        Group("attention", f"{block.prefix}latent_{tag}_rotations", r * (r - 1) // 2, rot, blocks),
        Group("attention", f"{block.prefix}latent_{tag}_gains", r, gains, (block.name(gain),) + blocks[1:],
              meta={"action": gains_act}),
    ]  # fmt: skip

    def scale(c):
        return {block.name(down): c[..., :1, None] * WD}

    out.append(
        Group(
            "attention", f"{block.prefix}latent_{tag}_scale", 1, scale, (block.name(down),),
            weak=block.a.norm_eps > 0, meta={"latent": down},
        )
    )  # fmt: skip
    return [x for x in out if x.n]

