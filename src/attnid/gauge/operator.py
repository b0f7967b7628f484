r"""The generators of a whole model as one structured operator T: coefficients (n,) -> tangent (P,).

T stacks the groups of `attnid.gauge.sources` (a group's coefficients are a slice of c). It is never a
dense P x P matrix:

    apply(c)      (..., n) -> (..., P): sum over groups of each group's closed-form tangent
    adjoint(v)    (..., P) -> (..., n): T^T v, the vector-Jacobian product of `apply` (exact: apply is linear)
    gram()        K = T T^T (n, n), assembled group pair by group pair where their blocks meet (each group's
                  tangents of its own unit coefficients, restricted to the shared blocks; a group whose
                  tangents cover most of the model, the residual stream's, enters through its closed-form
                  Gram and the adjoint of the others instead of being materialised whole)
    matrix()      the dense (n, P) matrix (tiny sizes: the certificate)

Projection onto the span of the generators: P u = T^T K^+ T u; K is factored once per point
(:class:`Projection`): Cholesky when K is positive definite (independent generators, the generic case),
else its eigendecomposition with the Gram rule of `attnid.symmetry.linalg` (an eigenvalue counts when
above GRAM_RTOL n max).
"""

from __future__ import annotations

import math

import torch

from ..symmetry.linalg import nonzero, serial
from .group import Group
from .point import DTYPE, FineLayout

LARGE_GROUP = 2**26  # entries of a group's materialised tangents above which it enters the Gram through adjoints


class Generators:
    """The operator T of a list of groups at one point (module docstring)."""

    def __init__(self, layout: FineLayout, groups: list[Group]):
        self.layout, self.groups = layout, list(groups)
        self.offsets = []
        n = 0
        for g in self.groups:
            self.offsets.append(n)
            n += g.n
        self.n = n
        self.P = layout.size
        self._matrices = {}  # group index -> group_matrix, kept for the point (the Gram's and the rows' own)

    def slices(self) -> list[slice]:
        return [slice(o, o + g.n) for o, g in zip(self.offsets, self.groups)]

    def apply(self, c: torch.Tensor) -> torch.Tensor:
        """(..., n) -> (..., P)."""
        lead = c.shape[:-1]
        out = torch.zeros(*lead, self.P, dtype=DTYPE, device=c.device)
        for g, s in zip(self.groups, self.slices()):
            for name, t in g.apply(c[..., s]).items():
                b = self.layout.blocks[name]
                out[..., b.slice] += t.reshape(*lead, b.size)
        return out

    def group_adjoint(self, g: Group, v_blocks: dict) -> torch.Tensor:
        """(m, n_g): T_g^T v for m vectors given as blocks {name: (m, *shape)} (missing blocks are zero): the
        group's own adjoint where it writes one down (meta["adjoint"]), else the vjp of its apply."""
        m = next(iter(v_blocks.values())).shape[0]
        if "adjoint" in g.meta:
            shared = {b: v_blocks[b].to(DTYPE) for b in g.blocks if b in v_blocks}
            return g.meta["adjoint"](shared) if shared else torch.zeros(m, g.n, dtype=DTYPE)
        c0 = torch.zeros(g.n, dtype=DTYPE, requires_grad=True)
        with torch.enable_grad():
            out = g.apply(c0)
            shared = [b for b in g.blocks if b in v_blocks and b in out]
            if not shared:
                return torch.zeros(m, g.n, dtype=DTYPE)
            grads = torch.autograd.grad(
                [out[b] for b in shared], c0, grad_outputs=[v_blocks[b].to(DTYPE) for b in shared],
                is_grads_batched=True, allow_unused=True,
            )[0]  # fmt: skip
        return torch.zeros(m, g.n, dtype=DTYPE) if grads is None else grads

    def adjoint(self, v: torch.Tensor) -> torch.Tensor:
        """(..., P) -> (..., n): T^T v: each group's own adjoint where it writes one down, one backward pass
        through the others' `apply`."""
        lead = v.shape[:-1]
        flat = v.reshape(-1, self.P).to(DTYPE)
        blocks = self.layout.unflatten(flat)
        out = torch.zeros(flat.shape[0], self.n, dtype=DTYPE)
        rest = [i for i, g in enumerate(self.groups) if "adjoint" not in g.meta]
        sl = self.slices()
        for i, g in enumerate(self.groups):
            if "adjoint" in g.meta:
                out[:, sl[i]] = self.group_adjoint(g, blocks)
        if rest:
            c0 = torch.zeros(sum(self.groups[i].n for i in rest), dtype=DTYPE, requires_grad=True)
            with torch.enable_grad():
                tangent = Generators(self.layout, [self.groups[i] for i in rest]).apply(c0)
                grads = torch.autograd.grad(tangent, c0, grad_outputs=flat, is_grads_batched=True, allow_unused=True)[0]
            if grads is not None:
                offset = 0
                for i in rest:
                    out[:, sl[i]] = grads[:, offset : offset + self.groups[i].n]
                    offset += self.groups[i].n
        return out.reshape(*lead, self.n)

    def group_matrix(self, g: Group) -> dict:
        """{block: (n_g, *shape)}: the group's tangents of its unit coefficients (kept: the Gram and the rows of
        a Projection read the same ones)."""
        key = id(g)
        if key not in self._matrices:
            self._matrices[key] = g.apply(torch.eye(g.n, dtype=DTYPE))
        return self._matrices[key]

    def is_large(self, g: Group) -> bool:
        """Whether g is used through its adjoint and apply, never as a matrix: its materialised tangents would
        pass LARGE_GROUP entries, or it has a closed-form Gram with itself (the residual rotations: O(d^4) from
        the d x d Grams of the weights it touches, against 2 n^2 P for its rows, n = d(d-1)/2 over nearly every
        weight; Mixtral at d 32 on text: 2.7 -> 0.33 s a run and point)."""
        return g.gram is not None or g.n * sum(self.layout.blocks[b].size for b in g.blocks) > LARGE_GROUP

    def matrix(self, groups=None) -> torch.Tensor:
        """Dense (n, P) (or the rows of `groups`, a list of indices)."""
        idx = range(len(self.groups)) if groups is None else groups
        rows = []
        for i in idx:
            g = self.groups[i]
            rows.append(self.layout.flatten_partial(self.group_matrix(g), lead=(g.n,)) if g.n else torch.zeros(0, self.P, dtype=DTYPE))
        return torch.cat(rows) if rows else torch.zeros(0, self.P, dtype=DTYPE)

    def gram(self) -> torch.Tensor:
        """K = T T^T (n, n), group pair by group pair (module docstring)."""
        K = torch.zeros(self.n, self.n, dtype=DTYPE)
        sl = self.slices()
        large = [i for i, g in enumerate(self.groups) if self.is_large(g)]
        small = [i for i in range(len(self.groups)) if i not in large]
        mats = {i: self.group_matrix(self.groups[i]) for i in small}
        rows = {i: {n: m.reshape(self.groups[i].n, -1) for n, m in mats[i].items()} for i in small}  # (n_g, size)
        supports = [set(g.blocks) for g in self.groups]
        for a in small:
            for b in small:
                if b < a:
                    continue
                shared = sorted(supports[a] & supports[b] & set(mats[a]) & set(mats[b]))  # summed in a fixed order
                if not shared:
                    continue
                block = sum(rows[a][n] @ rows[b][n].mT for n in shared)
                K[sl[a], sl[b]] = block
                K[sl[b], sl[a]] = block.mT
        for a in large:
            g = self.groups[a]
            for b in small:
                if not supports[a] & supports[b]:
                    continue
                block = self.group_adjoint(g, mats[b])  # (n_b, n_a)
                K[sl[b], sl[a]] = block
                K[sl[a], sl[b]] = block.mT
            for b in large:
                if b < a or not supports[a] & supports[b]:
                    continue
                block = self._large_pair(a, b)
                if a == b:  # a group with itself: symmetric up to rounding, made exactly so
                    block = (block + block.mT) / 2
                K[sl[a], sl[b]] = block
                K[sl[b], sl[a]] = block.mT
        return K

    def _large_pair(self, a: int, b: int, chunk: int = 64) -> torch.Tensor:
        """T_a T_b^T for two large groups: T_b's unit tangents in chunks, through T_a's adjoint."""
        ga, gb = self.groups[a], self.groups[b]
        if ga.gram is not None and a == b:
            return ga.gram()
        out = torch.zeros(ga.n, gb.n, dtype=DTYPE)
        for s in range(0, gb.n, chunk):
            e = torch.eye(gb.n, dtype=DTYPE)[s : s + chunk]
            out[:, s : s + chunk] = self.group_adjoint(ga, gb.apply(e)).mT
        return out


class Projection:
    """P u = T^T K^+ T u for the generators T at one point (module docstring); K factored once."""

    def __init__(self, generators: Generators, K: torch.Tensor | None = None):
        self.T = generators
        if K is None:
            with serial():  # many small products
                K = generators.gram()
        self.K = K
        L, info = torch.linalg.cholesky_ex(K)
        self.cholesky = int(info) == 0 and K.shape[0] > 0
        if self.cholesky:  # both triangles stored row-major: two triangular solves read each in its own order
            self.L, self.Lt = L, L.mT.contiguous()  # (cholesky_solve on one right-hand side is ~10x slower here)
            self.rank = K.shape[0]
        else:
            e, X = torch.linalg.eigh(K)
            keep = nonzero(e, K.shape[0])
            self.rank = int(keep.sum())
            self.pinv = (X[:, keep] / e[keep]) @ X[:, keep].mT
        self._rows = None

    def coefficients(self, u: torch.Tensor) -> torch.Tensor:
        """c (..., n) with T^T c the projection of u (..., P)."""
        return self.solve(self.T.adjoint(u))

    def solve(self, r: torch.Tensor) -> torch.Tensor:
        """c (..., n) = K^+ r for r (..., n) = T u (the coefficients of u's projection)."""
        if self.T.n == 0:
            return r
        if self.cholesky:
            flat = r.reshape(-1, r.shape[-1]).mT  # (n, m)
            y = torch.linalg.solve_triangular(self.L, flat, upper=False)
            return torch.linalg.solve_triangular(self.Lt, y, upper=True).mT.reshape(r.shape)
        return r @ self.pinv

    def __call__(self, u: torch.Tensor) -> torch.Tensor:
        return self.T.apply(self.coefficients(u))

    def rows(self) -> list[dict | None]:
        """Each group's rows of T on the blocks it touches, [{block: (n_g, block size)}] (kept): the group's
        tangents of its unit coefficients (`Generators.group_matrix`), the nonzero part of the dense T; None for
        a large group (`Generators.is_large`: the residual stream's rotations of a wide model), which
        :meth:`source_overlaps` reads through its adjoint and apply instead. They turn the adjoint and the
        applies of the other groups into a few matrix products."""
        if self._rows is None:
            with serial():
                self._rows = [
                    None if self.T.is_large(g)
                    else {b: t.reshape(g.n, -1) for b, t in self.T.group_matrix(g).items()} if g.n else {}
                    for g in self.T.groups
                ]  # fmt: skip
        return self._rows

    def source_overlaps(self, u: torch.Tensor) -> dict[str, torch.Tensor]:
        """||P u|| / ||u|| ('all', first) and per source ||T_s^T c_s|| / ||u|| (P u = sum_s T_s^T c_s, sources in
        the order they first appear) for u (..., P): what `Gauge.overlap` computes one vector at a time, to
        rounding, from each group's rows (:meth:`rows`): T u and the tangents T_g^T c_g as matrix products on the
        group's own blocks, summed per block in the groups' order (as `Generators.apply`). NaN where u = 0."""
        lead, layout = u.shape[:-1], self.T.layout
        flat = u.to(DTYPE).reshape(-1, self.T.P)  # (m, P)
        ub = {b: flat[:, layout.blocks[b].slice] for b in layout.blocks}
        rows, slices = self.rows(), self.T.slices()
        m = flat.shape[0]
        with serial():
            r = torch.zeros(m, self.T.n, dtype=DTYPE, device=flat.device)
            for g, g_rows, sl in zip(self.T.groups, rows, slices):
                if g_rows is None:  # a large group: its adjoint on its own blocks
                    r[:, sl] = self.T.group_adjoint(g, {b: ub[b].reshape(m, *layout.blocks[b].shape) for b in g.blocks})
                    continue
                for b in sorted(g_rows):  # a fixed order (attnid.gauge.operator.Generators.gram)
                    r[:, sl] += ub[b] @ g_rows[b].mT
            c = self.solve(r)  # (m, n)
            parts: dict[str, dict] = {}  # source -> {block: (m, size)}: T_s^T c_s on the blocks it touches
            for g, g_rows, sl in zip(self.T.groups, rows, slices):
                part = parts.setdefault(g.source, {})
                if g_rows is None:
                    tangents = {b: t.reshape(m, -1) for b, t in g.apply(c[:, sl]).items()}
                else:
                    tangents = {b: c[:, sl] @ rows_b for b, rows_b in g_rows.items()}
                for b, tangent in tangents.items():
                    part[b] = part[b] + tangent if b in part else tangent
        total: dict[str, torch.Tensor] = {}
        for part in parts.values():
            for b, t in part.items():
                total[b] = total[b] + t if b in total else t
        zero = torch.zeros(flat.shape[0], dtype=DTYPE, device=flat.device)
        norm = flat.norm(dim=-1)
        safe = torch.where(norm > 0, norm, 1)
        out = {}
        for key, blocks in (("all", total), *parts.items()):
            length = sum((t.square().sum(-1) for t in blocks.values()), zero).sqrt()  # ||T_s^T c_s|| (m,)
            out[key] = torch.where(norm > 0, length / safe, math.nan).reshape(lead)
        return out


def orthonormal_rows(M: torch.Tensor) -> tuple[torch.Tensor, dict]:
    """An orthonormal basis (rank, P) of the row span of M (n, P) after normalising its rows, and its
    numerical rank (attnid.jacobian.numerical_rank of the normalised rows' singular values: gap, margin)."""
    from ..jacobian import numerical_rank

    if M.shape[0] == 0:
        return M, {"rank": 0, "sigma_kept": math.nan, "sigma_dropped": 0.0, "gap": math.inf, "margin": math.nan}
    norms = M.norm(dim=1, keepdim=True)
    Mn = M / norms.clamp_min(torch.finfo(DTYPE).tiny)
    _, s, Vh = torch.linalg.svd(Mn, full_matrices=False)
    info = numerical_rank(s)
    return Vh[: info["rank"]], info
