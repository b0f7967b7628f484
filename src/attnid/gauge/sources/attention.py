r"""Generators of one block's attention inside a model (source `attention`; counted by
`attnid.model.counting.attention`); latent attention (DeepSeek) is `.latent`.

Per KV group g of a plain layer (stacks of `attnid.symmetry.stacks`):

    query_key     X in the RoPE commutant (gl(u) on the unrotated dims, a I + b J per plane):
                  dW_Q^h = W_Q^h X, db_Q^h = b_Q^h X, dW_K^g = -W_K^g X^T, db_K^g = -b_K^g X^T
    key_bias      a constant along keys on an unrotated dim is invisible: db_K^g = e_j, or, with no b_K behind a
                  LayerNorm with beta, the reader's rank-one change dW_K^g = (1/g) e_j^T, which moves only the
                  effective bias beta W_K + b_K (the centred input n diag(g) is orthogonal to 1/g)
    value_output  N in gl(v): dW_V^g = W_V^g N, db_V^g = b_V^g N, dW_O^h = -N W_O^h
    value_bias    softmax rows sum to one, so an (effective) value bias y adds the constant y S_g,
                  S_g = sum_{h in g} W_O^h: traded with b_O (or a parallel MLP's down bias), else free where
                  the model cannot see that constant (its ones component in a centred stream, or the null space
                  of the stacked S_g)

q/k norms (one gain shared by all heads, `rms_head`): the norm is only scale-equivariant, so of GL(k) only
the per-dimension trade between the query and key gains survives, s constant on each RoPE plane:
dgain_Q = gain_Q s, dgain_K = -gain_K s (u + p/2), plus the scale of each query head and each key group,
exact for eps = 0 and weakly identified for eps > 0. Across heads (`rms_all`): per group, and two scales. After
RoPE (`rms_head_rotated`, HunYuan): the scores see only the product of the gains, so a trade on every dim (k).

Not written here (NotImplementedError, so a caller falls back or refuses): the product-kernel directions
of heads wider than what a factor reads (u > d + [b], v > d), q/k LayerNorms, gain-free q/k or value norms
(rms_plain, v_norm), keys or values seen through sinks or softcapping beyond their kernels.
"""

from __future__ import annotations

import torch

from ...layer.spec import AttentionSpec
from ...symmetry import commutant_basis
from ..group import Group, outer_input
from ..point import DTYPE, Point, rows_update
from .latent import latent_groups


def _conj_basis(a: AttentionSpec) -> torch.Tensor:
    """(u + p/2, k): the per-dimension trades a q/k norm's gains allow (one per unrotated dim, one per plane)."""
    k, p = a.d_head_qk, a.rope_dims
    rows = []
    for i in range(0, p, 2):
        r = torch.zeros(k, dtype=DTYPE)
        r[i] = r[i + 1] = 1.0
        rows.append(r)
    for j in range(p, k):
        r = torch.zeros(k, dtype=DTYPE)
        r[j] = 1.0
        rows.append(r)
    return torch.stack(rows) if rows else torch.zeros(0, k, dtype=DTYPE)


class AttentionBlock:
    """The generators of block `layer`'s attention (module docstring).

    normed: it reads a norm's output (whose name is `norm`: beta there makes effective q/k/v biases);
    sink: the block that absorbs a constant written where b_O is (b_O itself, a parallel MLP's down bias) or None;
    const_rank: the dims of a constant written there that the model sees (d, or d - 1 when its ones component is
    invisible, or trades with ones_sink: the E or position rows that shift along 1 to take it back)."""

    def __init__(self, point: Point, layer: int, normed: bool, norm: str | None, sink: str | None, const_rank: int,
                 ones_sink: str | None = None):  # fmt: skip
        self.p, self.layer, self.ones_sink = point, layer, ones_sink
        self.a = point.spec.layer_specs[layer].attention
        self.prefix = f"layers.{layer}.attn."
        self.normed, self.norm, self.sink, self.const_rank = normed, norm, sink, const_rank
        beta = point.beta(norm) if (normed and norm and point.layernorm) else None
        self.beta = beta
        self.inv_gain = 1.0 / point.gain(norm) if beta is not None else None

    def name(self, block: str) -> str:
        return self.prefix + block

    def has(self, block: str) -> bool:
        return self.name(block) in self.p.layout

    def W(self, block: str) -> torch.Tensor:
        return self.p.w[self.name(block)]

    # -------------------------------------------------------------------------------------------------
    def groups(self) -> list[Group]:
        a = self.a
        if a.kv_lora_rank:
            return latent_groups(self)
        if a.qk_norm not in ("none", "rms_head", "rms_all", "rms_head_rotated"):
            raise NotImplementedError(f"q/k norm {a.qk_norm!r} generators")
        if a.sub_norm:
            raise NotImplementedError("generators of a norm across the heads' outputs (sub_norm)")
        if a.v_norm:
            raise NotImplementedError("generators of a gain-free norm on the value heads (v_norm)")
        u = a.d_head_qk - a.rope_dims
        d_in = self.p.d - (self.p.layernorm and self.normed)
        if u > d_in or a.d_head_v > d_in:
            raise NotImplementedError("heads wider than what a factor reads (product-kernel directions)")
        out = self.qk_norm_groups() if a.qk_norm != "none" else [self.query_key()]
        out += [self.key_bias(), self.value_output(), self.value_bias()]
        return [g for g in out if g is not None and g.n]

    def query_key(self) -> Group:
        a, G, r = self.a, self.a.n_kv_heads, self.a.group_size
        basis = commutant_basis(a)  # (m, k, k)
        m = basis.shape[0]
        WQ, WK = self.W("W_Q"), self.W("W_K")
        bQ = self.W("b_Q") if self.has("b_Q") else None
        bK = self.W("b_K") if self.has("b_K") else None

        def fn(c):  # (..., G m)
            X = torch.einsum("...gm,mij->...gij", c.unflatten(-1, (G, m)), basis)  # (..., G, k, k)
            Xh = X.repeat_interleave(r, dim=-3)  # (..., H, k, k)
            out = {self.name("W_Q"): WQ @ Xh, self.name("W_K"): -(WK @ X.mT)}
            if bQ is not None:
                out[self.name("b_Q")] = (bQ[..., None, :] @ Xh)[..., 0, :]
            if bK is not None:
                out[self.name("b_K")] = -(bK[..., None, :] @ X.mT)[..., 0, :]
            return out

        def act(w, c):  # Q M, K M^-T with M = exp(X)
            X = torch.einsum("gm,mij->gij", c.unflatten(-1, (G, m)), basis)
            M, Mt = torch.linalg.matrix_exp(X), torch.linalg.matrix_exp(-X.mT)
            Mh = M.repeat_interleave(r, dim=0)
            out = {self.name("W_Q"): w[self.name("W_Q")] @ Mh, self.name("W_K"): w[self.name("W_K")] @ Mt}
            if bQ is not None:
                out[self.name("b_Q")] = (w[self.name("b_Q")][:, None, :] @ Mh)[:, 0]
            if bK is not None:
                out[self.name("b_K")] = (w[self.name("b_K")][:, None, :] @ Mt)[:, 0]
            return out

        def adjoint(v):  # C_g = sum_h W_Q^h^T V_Q^h + b_Q^h v_bQ^h - V_K^g^T W_K^g - v_bK^g b_K^g; <B_m, C_g>
            m_ = next(iter(v.values())).shape[0]
            C = torch.zeros(m_, G, WQ.shape[-1], WQ.shape[-1], dtype=DTYPE)
            if self.name("W_Q") in v:
                C = C + (WQ.mT @ v[self.name("W_Q")]).unflatten(1, (G, r)).sum(2)
            if bQ is not None and self.name("b_Q") in v:
                C = C + (bQ[:, :, None] * v[self.name("b_Q")][:, :, None, :]).unflatten(1, (G, r)).sum(2)
            if self.name("W_K") in v:
                C = C - v[self.name("W_K")].mT @ WK
            if bK is not None and self.name("b_K") in v:
                C = C - v[self.name("b_K")][..., :, None] * bK[:, None, :]
            return torch.einsum("mij,ngij->ngm", basis, C).reshape(m_, G * m)

        blocks = tuple(self.name(b) for b in ("W_Q", "b_Q", "W_K", "b_K") if self.has(b))
        return Group("attention", self.prefix + "query_key", G * m, fn, blocks, meta={"action": act, "adjoint": adjoint})

    def qk_norm_groups(self) -> list[Group]:
        a, G, H, r = self.a, self.a.n_kv_heads, self.a.n_heads, self.a.group_size
        # after RoPE (HunYuan) the scores see only the product of the two gains: a trade on every dim
        rotated = a.qk_norm == "rms_head_rotated"
        basis = torch.eye(a.d_head_qk, dtype=DTYPE) if rotated else _conj_basis(a)  # (m, k)
        m = basis.shape[0]
        one = 1.0 if self.p.spec.gemma_gain else 0.0  # Gemma's q/k norms apply 1 + w, as its other norms
        gQ, gK = self.W("gain_Q") + one, self.W("gain_K") + one  # the gains applied
        per_head = a.qk_norm in ("rms_head", "rms_head_rotated")
        n_trade = m if per_head else G * m

        def trade(c):
            if per_head:
                s = c @ basis  # (..., k)
                return {self.name("gain_Q"): gQ * s, self.name("gain_K"): -gK * s}
            s = c.unflatten(-1, (G, m)) @ basis  # (..., G, k)
            return {self.name("gain_Q"): gQ * s.repeat_interleave(r, dim=-2), self.name("gain_K"): -gK * s}

        def act(w, c):
            s = c @ basis if per_head else (c.unflatten(-1, (G, m)) @ basis)
            sq = s if per_head else s.repeat_interleave(r, dim=-2)
            q, k = w[self.name("gain_Q")] + one, w[self.name("gain_K")] + one
            return {self.name("gain_Q"): q * sq.exp() - one, self.name("gain_K"): k * (-s).exp() - one}

        gains = (self.name("gain_Q"), self.name("gain_K"))
        groups = [Group("attention", self.prefix + "qk_norm_gains", n_trade, trade, gains, meta={"action": act})]
        q_blocks = [b for b in ("W_Q", "b_Q") if self.has(b)]
        k_blocks = [b for b in ("W_K", "b_K") if self.has(b)]
        n_q, n_k = (H, G) if per_head else (1, 1)

        def scales(c):  # (..., n_q + n_k): one scale per query head and key group (or one each across heads)
            sq, sk = c[..., :n_q], c[..., n_q:]
            if not per_head:
                sq, sk = sq.expand(*sq.shape[:-1], H), sk.expand(*sk.shape[:-1], G)
            out = {}
            for b in q_blocks:
                t = self.W(b)
                out[self.name(b)] = t * sq.reshape(*sq.shape, *([1] * (t.dim() - 1)))
            for b in k_blocks:
                t = self.W(b)
                out[self.name(b)] = t * sk.reshape(*sk.shape, *([1] * (t.dim() - 1)))
            return out

        weak = a.norm_eps > 0
        blocks = tuple(self.name(b) for b in q_blocks + k_blocks)
        groups.append(Group("attention", self.prefix + "qk_norm_scales", n_q + n_k, scales, blocks, weak=weak))
        return groups

    def key_bias(self) -> Group | None:
        a, G = self.a, self.a.n_kv_heads
        k, p = a.d_head_qk, a.rope_dims
        u = k - p
        if a.qk_norm != "none" or u == 0:
            return None
        if a.sinks or a.softcap:  # seen except on the kernel of the stacked queries: none while u <= r (d + [b])
            return None
        if self.has("b_K"):

            def fn(c):
                out = torch.zeros(*c.shape[:-1], G, k, dtype=DTYPE)
                out[..., p:] = c.unflatten(-1, (G, u))
                return {self.name("b_K"): out}

            return Group("attention", self.prefix + "key_bias", G * u, fn, (self.name("b_K"),))
        if self.beta is None:
            return None
        col = self.inv_gain / (self.beta @ self.inv_gain)  # moves the effective bias beta W_K by e_j

        def via_reader(c):
            U = torch.zeros(*c.shape[:-1], G, k, dtype=DTYPE)
            U[..., p:] = c.unflatten(-1, (G, u))
            return {self.name("W_K"): outer_input(U, col, self.W("W_K").shape, 1)}

        return Group("attention", self.prefix + "key_bias", G * u, via_reader, (self.name("W_K"),))

    def value_output(self) -> Group:
        G, r, v = self.a.n_kv_heads, self.a.group_size, self.a.d_head_v
        WV, WO = self.W("W_V"), self.W("W_O")
        bV = self.W("b_V") if self.has("b_V") else None

        def fn(c):
            N = c.unflatten(-1, (G, v, v))  # (..., G, v, v)
            out = {self.name("W_V"): WV @ N, self.name("W_O"): -(N.repeat_interleave(r, dim=-3) @ WO)}
            if bV is not None:
                out[self.name("b_V")] = (bV[..., None, :] @ N)[..., 0, :]
            return out

        def act(w, c):  # V N, N^-1 W_O with N = exp(Y)
            Y = c.unflatten(-1, (G, v, v))
            N, Ni = torch.linalg.matrix_exp(Y), torch.linalg.matrix_exp(-Y).repeat_interleave(r, dim=0)
            out = {self.name("W_V"): w[self.name("W_V")] @ N, self.name("W_O"): Ni @ w[self.name("W_O")]}
            if bV is not None:
                out[self.name("b_V")] = (w[self.name("b_V")][:, None, :] @ N)[:, 0]
            return out

        def adjoint(vb):  # C_g = W_V^g^T V_V^g + b_V^g v_bV^g - sum_h V_O^h W_O^h^T
            m_ = next(iter(vb.values())).shape[0]
            C = torch.zeros(m_, G, v, v, dtype=DTYPE)
            if self.name("W_V") in vb:
                C = C + WV.mT @ vb[self.name("W_V")]
            if bV is not None and self.name("b_V") in vb:
                C = C + bV[:, :, None] * vb[self.name("b_V")][:, :, None, :]
            if self.name("W_O") in vb:
                C = C - (vb[self.name("W_O")] @ WO.mT).unflatten(1, (G, r)).sum(2)
            return C.reshape(m_, G * v * v)

        blocks = tuple(self.name(b) for b in ("W_V", "b_V", "W_O") if self.has(b))
        return Group("attention", self.prefix + "value_output", G * v * v, fn, blocks, meta={"action": act, "adjoint": adjoint})

    def value_sums(self) -> torch.Tensor:
        """S (G, v, d): S_g = sum_{h in g} W_O^h."""
        a = self.a
        return self.W("W_O").reshape(a.n_kv_heads, a.group_size, a.d_head_v, -1).sum(1)

    def value_bias(self) -> Group | None:
        """(Effective) value-bias directions and the constant they trade with (module docstring)."""
        a, G, v, d = self.a, self.a.n_kv_heads, self.a.d_head_v, self.p.d
        own = self.has("b_V")
        if not own and self.beta is None:
            return None
        if a.sinks:  # rows sum to less than one: b_V seen except on the left kernel of the stacked W_O
            if v > a.group_size * d:
                raise NotImplementedError("value bias under sinks with v > r d")
            return None
        S = self.value_sums()  # (G, v, d)
        if self.sink is None:  # free only where the model cannot see y S
            flat = S.reshape(G * v, d)
            if self.const_rank < d:
                flat = flat - flat.mean(-1, keepdim=True)  # the ones component is invisible
            # the left null space of flat (G v, d): generically of dimension G v - min(G v, const_rank)
            _, _, Vh = torch.linalg.svd(flat.mT, full_matrices=True)
            basis = Vh[min(G * v, self.const_rank) :]  # (n, G v)
        else:
            basis = torch.eye(G * v, dtype=DTYPE)
        n = basis.shape[0]
        if n == 0:
            return None
        col = None if own else self.inv_gain / (self.beta @ self.inv_gain)

        def fn(c):
            y = (c @ basis).unflatten(-1, (G, v))  # (..., G, v)
            out = {}
            if own:
                out[self.name("b_V")] = y
            else:
                out[self.name("W_V")] = outer_input(y, col, self.W("W_V").shape, 1)
            if self.sink is not None:
                out[self.sink] = -torch.einsum("...gv,gvd->...d", y, S)
            elif self.ones_sink is not None:  # the constant kappa 1 it writes, taken back by a shift along 1
                kappa = torch.einsum("...gv,gvd->...d", y, S).mean(-1)  # (...,)
                rows = self.p.writer_rows(self.ones_sink).shape[0]
                shift = -kappa[..., None, None] * torch.ones(rows, d, dtype=DTYPE)
                out[self.ones_sink] = rows_update(self.p, self.ones_sink, shift)
            return out

        blocks = ((self.name("b_V"),) if own else (self.name("W_V"),)) + ((self.sink,) if self.sink else ())
        blocks += (self.ones_sink,) if self.sink is None and self.ones_sink else ()
        return Group("attention", self.prefix + "value_bias", n, fn, blocks)
