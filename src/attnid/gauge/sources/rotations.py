r"""The residual stream's rotations in a pre-LN model, the group `.residual.rotation_group` returns (source
`residual_rotations`; counted by `attnid.model.counting.residual`).

The stream h -> h (I + Xi): every writer X -> X (I + Xi); a norm reading the stream sees only its centred,
normalised part, which moves by the rotation A of Xi (A antisymmetric; on 1^perp after a LayerNorm, A 1 = 0),
so every map reading a norm takes D^-1 A^T D (D = diag(g)) and the norm's beta moves to beta D^-1 A D:

    dX = X A (writers), dW = -D^-1 A D W (readers of every norm), dbeta = beta D^-1 A D,
    and, with no final norm, the unembedding reading the raw stream dU = -Xi U; without a final LayerNorm
    Xi also shears the stream along 1: Xi = q 1^T / sqrt(d) (q in 1^perp) and 1 1^T / d

The basis of A is e_a e_b^T - e_b e_a^T (a < b), conjugated by an orthonormal basis Q of 1^perp after a
LayerNorm (A = Q E Q^T). Every block's tangent is L A R-shaped, so the group's Gram is written in closed form
(:func:`skew_gram`), and without the shear the finite action (R = exp(A)) and the adjoint too.
"""

from __future__ import annotations

import math

import torch

from ..group import Group, along_input, along_output
from ..point import DTYPE, Point, rows_update
from .writers import ones_complement, stream_writers


class StreamRotations:
    """The rotations (and, on a raw head after LayerNorms, the shear) of the stream at `point` (module docstring).

    readers: {norm: the maps reading it}; the coefficients are A's entries above the diagonal in the basis Q
    (m = d - 1 after a LayerNorm, else d), then, with the shear, q's d - 1 coordinates in Q and the 1 1^T / d one.
    """

    def __init__(self, point: Point, readers: dict):
        spec, d = point.spec, point.d
        self.point, self.readers, self.d = point, readers, d
        ln = point.layernorm
        self.m = d - 1 if ln else d
        self.Q = ones_complement(d) if ln else torch.eye(d, dtype=DTYPE)
        self.iu = torch.triu_indices(self.m, self.m, 1)
        self.n_rot = self.m * (self.m - 1) // 2
        raw = not spec.final_norm and not spec.tied  # the unembedding reads the raw stream
        self.shear = raw and ln  # Xi also shears the stream along 1 (d more)
        self.n = self.n_rot + (d if self.shear else 0)
        self.writers = stream_writers(point)
        self.head = "unembed" if raw else None
        self.ones = torch.ones(d, dtype=DTYPE) / math.sqrt(d)

    def blocks(self) -> tuple[str, ...]:
        point, readers = self.point, self.readers
        blocks = tuple(self.writers) + tuple(r.weight for rs in readers.values() for r in rs)
        blocks += tuple(f"{n}.bias" for n in readers if point.beta(n) is not None) + ((self.head,) if self.head else ())
        return tuple(dict.fromkeys(blocks))

    def tangent(self, c: torch.Tensor) -> dict:
        """c (..., n) -> the tangent's blocks: writers X Xi, readers -D^-1 A D W, beta D^-1 A D, the raw head -Xi U."""
        point, m, Q, iu, n_rot, d = self.point, self.m, self.Q, self.iu, self.n_rot, self.d
        lead = c.shape[:-1]
        B = torch.zeros(*lead, m, m, dtype=DTYPE)
        B[..., iu[0], iu[1]] = c[..., :n_rot]
        B = B - B.mT
        A = Q @ B @ Q.mT  # (..., d, d)
        Xi = A
        if self.shear:  # q_j 1^T / sqrt(d) for the columns q_j of Q, and 1 1^T / d
            ones = self.ones
            v = c[..., n_rot : n_rot + d - 1] @ Q.mT  # (..., d)
            Xi = A + v[..., :, None] * ones + c[..., -1:, None] * (ones[:, None] * ones)
        out = {}
        for name in self.writers:
            out[name] = rows_update(point, name, along_output(point.writer_rows(name), Xi))
        for norm, rs in self.readers.items():
            g = point.gain(norm)
            L = -(A * g) / g[:, None]  # -D^-1 A D
            for r in rs:
                out[r.weight] = out.get(r.weight, 0) + along_input(point.w[r.weight], L, r.axis)
            beta = point.beta(norm)
            if beta is not None:
                out[f"{norm}.bias"] = (beta @ ((A * g) / g[:, None]))
        if self.head:
            out[self.head] = along_input(point.w[self.head], -Xi, 0)
        return out

    def gram(self) -> torch.Tensor:
        """The Gram in closed form: every block's tangent is L A R-shaped, so <t_A, t_A'> = sum tr(A^T L A' R)."""
        point, d = self.point, self.d
        terms = []  # (L, R) (d, d) pairs
        S = sum(point.writer_rows(w).mT @ point.writer_rows(w) for w in self.writers)  # writers: tr(A^T S A')
        if self.head:
            U = point.w[self.head]
            terms.append((torch.eye(d, dtype=DTYPE), U @ U.mT))
        terms.append((S, torch.eye(d, dtype=DTYPE)))
        for norm, rs in self.readers.items():
            g = point.gain(norm)
            M = sum(input_gram(point.w[r.weight], r.axis) for r in rs)  # sum W W^T over the input axis
            terms.append((torch.diag(g**-2), g[:, None] * M * g))
            beta = point.beta(norm)
            if beta is not None:
                b = beta / g
                terms.append((b[:, None] * b, torch.diag(g**2)))
        return skew_gram(terms, self.Q, self.iu)

    def action(self, w: dict, c: torch.Tensor) -> dict:
        """R = exp(A): writers X R, readers D^-1 R^T D W, beta D^-1 R D, the raw head R^T U."""
        point, iu, d = self.point, self.iu, self.d
        B = c.new_zeros(self.m, self.m).index_put((iu[0], iu[1]), c)
        R = torch.linalg.matrix_exp(self.Q @ (B - B.mT) @ self.Q.mT)
        out = {}
        for name in self.writers:
            X = w[name]
            rows = point.writer_rows(name).shape[0]
            flat = X.reshape(-1, d)
            out[name] = torch.cat((flat[:rows] @ R, flat[rows:])).reshape(X.shape)
        for norm, rs in self.readers.items():
            gw = w[f"{norm}.gain"]
            g = 1.0 + gw if point.spec.gemma_gain else gw
            for r in rs:
                out[r.weight] = along_input(w[r.weight], R.mT * g / g[:, None], r.axis)
            if f"{norm}.bias" in w and point.beta(norm) is not None:
                out[f"{norm}.bias"] = w[f"{norm}.bias"] @ (R * g / g[:, None])
        if self.head:
            out[self.head] = R.mT @ w[self.head]
        return out

    def adjoint(self, v: dict) -> torch.Tensor:
        """<A, M>, M = sum X^T V_X - D^-1 (V_W W^T) D + D^-1 beta^T v_beta D - V_U U^T; its skew part in Q."""
        point, d, Q, iu = self.point, self.d, self.Q, self.iu
        some = next(iter(v.values()))
        mm = some.shape[0]
        M = torch.zeros(mm, d, d, dtype=DTYPE)
        for name in self.writers:
            if name in v:
                rows = point.writer_rows(name)
                M = M + rows.mT @ v[name].reshape(mm, -1, d)[:, : rows.shape[0]]
        for norm, rs in self.readers.items():
            g = point.gain(norm)
            part = torch.zeros(mm, d, d, dtype=DTYPE)
            for r in rs:
                if r.weight in v:
                    W = point.w[r.weight].movedim(r.axis, 0).reshape(d, -1)
                    part = part - v[r.weight].movedim(r.axis + 1, 1).reshape(mm, d, -1) @ W.mT
            beta = point.beta(norm)
            if beta is not None and f"{norm}.bias" in v:
                part = part + beta[:, None] * v[f"{norm}.bias"][:, None, :]
            M = M + part * g / g[:, None]
        if self.head and self.head in v:
            M = M - v[self.head] @ point.w[self.head].mT
        Mq = Q.mT @ M @ Q
        return Mq[:, iu[0], iu[1]] - Mq[:, iu[1], iu[0]]


def input_gram(W: torch.Tensor, axis: int) -> torch.Tensor:
    """W W^T contracted over every axis but the input one: (d, d)."""
    Wm = W.movedim(axis, 0).reshape(W.shape[axis], -1)
    return Wm @ Wm.mT


def skew_gram(terms, Q: torch.Tensor, iu) -> torch.Tensor:
    """K[(a,b),(c,d)] = sum over (L, R) of tr(E_ab^T L' E_cd R'), L' = Q^T L Q, R' = Q^T R Q, E_ab = e_a e_b^T - e_b e_a^T:
    with K4 = sum_t L'_t (x) R'_t (Kronecker, one product of (m^2, t) by (t, m^2)), K4[ab, cd] - K4[ab, dc] -
    K4[ba, cd] + K4[ba, dc] (L, R symmetric)."""
    a, b = iu
    Ls = torch.stack([(Q.mT @ L @ Q).reshape(-1) for L, _ in terms])  # (t, m^2): index a m + c
    Rs = torch.stack([(Q.mT @ R @ Q).reshape(-1) for _, R in terms])  # index b m + d
    m = Q.shape[1]
    K4 = (Ls.mT @ Rs).reshape(m, m, m, m).permute(0, 2, 1, 3).reshape(m * m, m * m)  # [(a, b), (c, d)]
    ab, ba = a * m + b, b * m + a
    return K4[ab][:, ab] - K4[ab][:, ba] - K4[ba][:, ab] + K4[ba][:, ba]
