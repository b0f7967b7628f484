"""Exact counts of identified and unidentified attention parameters.

The unidentified dimension of a spec is the dimension of the set of parameter points that give
the same function as a generic one (the fibre), i.e. P - rank of the Jacobian of theta -> Y.
It is counted from what the function can see (the "effective parameters"):

Query-key side, per KV group g with r = H/G query heads, m_q = d + [b_Q]:
  scores depend on the bilinear forms [W_Q^h; b_Q^h] R_{i-j} [W_K^g; b_K^g]^T, up to terms
  constant along the key axis, which softmax ignores. Split the k head dims into u = k - p
  unrotated and p rotated ones (p/2 planes with distinct frequencies):
  * unrotated: the stack over h of [W_Q^h; b_Q^h]_u (W_K^g)_u^T, an (r m_q) x d matrix of rank
    rho = min(u, d); its fibre is r m_q u + d u - rho (r m_q + d - rho) (= u^2 when u <= d:
    one GL(u) per group). The unrotated key bias only adds a constant along keys: all u of it
    are unidentified.
  * each rotated plane is a complex rank-one matrix z w^* (z: stacked queries incl. b_Q,
    w: key incl. b_K); its fibre is the complex scalars C^*, 2 real dims per plane: p in all.
    The rotated key bias is seen (its term varies with the key position through R_{i-j}).
Value-output side, per group: the products W_V^g W_O^h (h in g) form a d x (r d) matrix of
  rank rho_v = min(v, d); fibre d v + r v d - rho_v (d + r d - rho_v) (= v^2 when v <= d).
  Softmax rows sum to one, so the value bias only enters the constant c = sum_h b_V^g W_O^h
  + b_O. With b_O, c is free and all G v value-bias entries are unidentified; without b_O,
  c ranges over the span of the G row spaces of sum_{h in g} W_O^h, of dimension min(G v, d),
  so G v - min(G v, d) value-bias directions are unidentified.
Biases, jointly and marginally: b_Q enters only through b_Q^h (W_K^g)_u^T, so it is seen when
  u <= d; when u > d that map has a kernel of dimension u - d and r (u - d) entries of b_Q per
  group are unidentified (the product formula above counts them through m_q = d + 1 rows). The
  b_V / b_O redundancy is one shared constant c: the count is joint, and the breakdown books it
  on b_V ('value_bias') by convention, so b_O reads as seen.

Hypotheses (`hypotheses`, `check_hypotheses`; `count` refuses a spec that breaks one):
  generic parameters and generic (not LayerNorm-ed) inputs; RoPE frequencies omega_i with
  omega_i not in pi Z and omega_i != +-omega_j mod 2 pi (integer positions: a repeated frequency
  adds gl(k, C) per group of k planes; the standard omega_i = base^(-2i/p) with base > 1 lie in
  (0, 1] and are distinct, so they meet it, also doubled, unless base is within rounding of 1;
  `count(spec, check=False, frequencies=...)` counts collided planes by their commutant,
  `rope_clusters`, as measured: d4 k4 [1, 1]: 24, [pi, 1] and [0, 1]: 22 instead of 20);
  and enough positions, T >= T_min (`min_seq_len`).

  Sequence length. A query at position i and a key j != i see the form B_n = [W_Q; b_Q] R_n
  [W_K; b_K]^T at the offset n = j - i; the key j = i only its symmetric part; a term constant
  along the keys is removed by the softmax. A causal T has n_T = T - 1 offsets, no mask
  2 (T - 1). Per group (r query heads, m_q = d + [b_Q], m_k = d + [b_K], c_qk the group's
  query-key count incl. the unrotated key bias), the (r m_q + m_k) k - c_qk numbers the scores
  determine must fit in what r heads show, so N(T) >= count + G delta(T) (`short_sequence_excess`),

    delta(T) = [(r m_q + m_k) k - c_qk - r (n_T m_q m_k + d (d + 1) / 2 + d [b_Q, no b_K])]^+,

  and, causal T = 2 with d_k <= d and r = 1: delta = [c (c - 1) / 2 - a^2 + w (w + 1) / 2 - p
  - [b_K] min(u, p - 1)]^+ with c = 2 k - d - [b_Q, no b_K], a = min(u, c), w = [2 a - c]^+ (B_1 has
  rank k; the change it leaves, W_Q L W_K^T, escapes the diagonal when antisymmetric: c (c - 1) / 2
  dims of L; of those, L must vanish on the unrotated block, a^2 conditions of which
  w (w + 1) / 2 hold already, and on the p plane-diagonal parts; b_Q W_K^T x_i is seen on the
  diagonal, and without b_K that removes one of the c dims; the term min(u, p - 1) is measured). T_min = 2 without RoPE; with RoPE
  the least T with delta(T) = 0, from T = 3 for a causal T = 2 with d_k > d (there delta is
  only a lower bound) and for no mask when the doubled frequencies 2 omega_i
  collide (offsets -1 and +1). A causal sliding window w shows a query the offsets of a sequence
  of length w: w >= T_min. Variant specs (norms, sinks, windows, latent KV) keep the sufficient
  rule: d_k <= d: 2 no mask / 3 causal; d_k > d: p + 1 + [u > 0 or b_K] (a Vandermonde argument).
  Measured (dense Jacobian, float64, rtol 1e-10, contiguous positions, base 10; tests in
  tests/test_sequence_length.py): N = count at T_min on 172 random specs (d 2..8, d_k <= 12, G <= 2,
  r <= 3, every bias subset, both masks; 100 with T_min > 2, up to 10), delta exact at every T >= 3
  and at T = 2 without a mask there and on 80 more (T = 2..T_min), and at causal
  T = 2 on 105 narrow bias-free specs (d 2..12: d6 k5 p4: 1, d7 k6 p6: 4, d4 k4 p4: 2, d7 k7 p6: 14,
  d9 k8 p4: 2, d12 k12 p4: 8 (w = 4), d12 k12 p2: 0; r = 2: 0) and 207 narrow ones with b_Q and/or
  b_K (d 3..10, 74 with an excess: d9 k9 p4: 8 none, 2 b_Q, 5 b_K or b_QK). Where it is only a
  bound (d_k > d), causal T = 2 measures more: d6 h4 g2 k8 p2: 102 vs 94
  (delta = 0), d5 k9 p2 b_qk: 95 vs count + delta = 92, d7 h6 g2 k9 p6: 50 vs 44; on a grid of 60
  bias-free r = 1 wide heads (d 2..6, k d+1..d+4) delta is exact from two planes on, while one plane
  (p = 2) measures 4 extra when u >= d >= 3 and 3 when u = d - 1 >= 2, above delta from d = 5 on. Examples:
  d4 k8 v4 p8 causal T_min = 4 (T = 2, 3: 54, 38, count 24), no mask 3; d4 k10 v2 p8 no mask 3, causal 5
  (58, 42, 26, 16 at T = 2..5); d8 h2 k4 p4 causal 2; d4 k4 p4 causal 3 (T = 2: 22 vs 20).

The Jacobian check (`attnid.jacobian`) measures every one of these numbers at random points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .counting_variants import fibre_of_product, latent_breakdown, variant_breakdown
from .spec import AttentionSpec, SpecError, parse_rope

# Two RoPE angles (radians, mod 2 pi) closer than this count as equal: over any sequence a float64
# rank could use, planes that close never separate.
FREQUENCY_TOL = 1e-9


@dataclass(frozen=True)
class Counts:
    """Parameter counts of one attention layer; `breakdown` sums to `unidentified`."""

    total: int
    unidentified: int
    breakdown: dict  # source -> unidentified dims from that source
    conditions: tuple = field(default=(), compare=False)  # the hypotheses the count relies on, in words
    weakly_identified: int = 0  # exact symmetries a norm's eps > 0 breaks (singular values ~eps; not in unidentified)

    @property
    def identified(self) -> int:
        return self.total - self.unidentified

    @property
    def ratio(self) -> float:
        """unidentified / total."""
        return self.unidentified / self.total

    def to_dict(self, flat: bool = False) -> dict:
        """total, unidentified, identified, ratio and the breakdown (nested, or its keys inline if flat)."""
        head = {
            "total": self.total,
            "unidentified": self.unidentified,
            "identified": self.identified,
            "ratio": self.ratio,
            "weakly_identified": self.weakly_identified,
        }
        if flat:  # table rows: weakly_identified only where a variant has it, so plain tables keep their columns
            if not self.weakly_identified:
                del head["weakly_identified"]
            return {**head, **self.breakdown}
        return {**head, "breakdown": dict(self.breakdown), "conditions": list(self.conditions)}


def frequency_problem(frequencies, step: int = 1) -> str | None:
    """Why RoPE planes at these frequencies, seen at offsets `step` apart, are not separable (None if they are).

    Condition on theta_i = step * omega_i mod 2 pi: theta_i not in {0, pi} and theta_i != +-theta_j.
    """
    two_pi = 2 * math.pi

    def near(a: float, b: float) -> bool:
        gap = (a - b) % two_pi
        return min(gap, two_pi - gap) < FREQUENCY_TOL

    angles = [(step * w) % two_pi for w in frequencies]
    for i, a in enumerate(angles):
        if near(a, 0.0) or near(a, math.pi):
            return f"plane {i} turns by {step} x {frequencies[i]:.6g} rad, a multiple of pi per step: it cannot be told from its mirror"
        for j in range(i):
            if near(a, angles[j]) or near(a, -angles[j]):
                return f"planes {j} and {i} have the same frequency up to sign mod 2 pi ({frequencies[j]:.6g}, {frequencies[i]:.6g} rad)"
    return None


def rope_clusters(frequencies) -> tuple[int, int, list[int]]:
    """(planes at angle 0, planes at pi, sizes of the other groups of planes equal up to sign), angles mod 2 pi.

    The rotation R(1) of the planes has eigenvalues e^{+-i omega}; its commutant, the symmetry a
    group's queries and keys keep, is GL over each eigenspace: planes at 0 join the unrotated
    dims, planes at pi form one real block (R = -I there), and each other group of k planes is one
    GL(k, C). Distinct generic frequencies give (0, 0, [1, 1, ...]): one C^* per plane.
    """
    two_pi = 2 * math.pi
    folded = []  # angle in [0, pi]: omega and -omega mod 2 pi are the same plane read backwards
    for w in frequencies:
        a = float(w) % two_pi
        folded.append(min(a, two_pi - a))
    zero = sum(a < FREQUENCY_TOL for a in folded)
    half_turn = sum(abs(a - math.pi) < FREQUENCY_TOL for a in folded)
    clusters: list[list[float]] = []
    for a in sorted(x for x in folded if FREQUENCY_TOL <= x and abs(x - math.pi) >= FREQUENCY_TOL):
        if clusters and a - clusters[-1][-1] < FREQUENCY_TOL:
            clusters[-1].append(a)
        else:
            clusters.append([a])
    return zero, half_turn, [len(c) for c in clusters]


def _sufficient_seq_len(spec: AttentionSpec) -> int:
    """A length that is enough for every spec (no RoPE 2; d_k <= d: 2 without a mask, 3 causal;
    wider heads p + 1 + [u > 0 or b_K]): the Vandermonde argument, used for the modern variants."""
    p, k = spec.rope_dims, spec.d_head_qk
    if p == 0:
        return 2
    if k <= spec.d_model:
        return 3 if spec.causal or frequency_problem(spec.rope_frequencies(), step=2) else 2
    return p + 1 + (k > p or spec.has_bias("k"))


def _exact_at_causal_pair(spec: AttentionSpec) -> bool:
    """Is `short_sequence_excess` exact for a causal T = 2 (one offset and the diagonal)? Measured
    for narrow heads (d_k <= d) only."""
    return spec.d_head_qk <= spec.d_model


def short_sequence_excess(spec: AttentionSpec, seq_len: int) -> int:
    """G * delta(T): the directions beyond `count(spec)` left unidentified by T = seq_len positions.

    Exact (measured) for T >= 3, for T = 2 without a mask, and for a causal T = 2 when
    `_exact_at_causal_pair` (d_k <= d, any biases); otherwise (causal T = 2, heads wider than d) a
    lower bound. Formula and measurements in the module docstring.
    """
    if seq_len < 2:
        raise ValueError(f"seq_len: must be >= 2 (a score needs a query and another key), got {seq_len}")
    d, k, p, r, G = spec.d_model, spec.d_head_qk, spec.rope_dims, spec.group_size, spec.n_kv_heads
    bq, bk = spec.has_bias("q"), spec.has_bias("k")
    u, offsets = k - p, (seq_len - 1 if spec.causal else 2 * (seq_len - 1))
    c_qk = fibre_of_product(r * (d + bq), d, u) + p + bk * u  # one group's query-key count
    # what r = 1 query head shows per group: the forms at each offset (bias rows and columns included)
    # and the diagonal, less what is constant along the keys
    seen = offsets * (d + bq) * (d + bk) + d * (d + 1) // 2 + d * bq * (not bk)
    delta = max(0, (r * (d + bq) + d + bk) * k - c_qk - r * seen)
    if spec.causal and seq_len == 2 and k <= d and r == 1 and _exact_at_causal_pair(spec):
        c = max(0, 2 * k - d - (bq and not bk))  # dims shared by the column spaces of W_Q and W_K
        a = min(u, c)
        w = max(0, 2 * a - c)  # the unrotated block's row and column spaces meet in w dims
        key_bias = min(u, p - 1) if bk else 0  # the seen x_i W_Q (R_1 - 1) b_K fixes unrotated rows
        delta = max(delta, c * (c - 1) // 2 - (a * a - w * (w + 1) // 2) - p - key_bias)
    return G * delta


def min_seq_len(spec: AttentionSpec) -> int:
    """T_min: the shortest sequence at which the count holds (rule and measurements in the module docstring).

    No RoPE: 2. With RoPE: the least T with short_sequence_excess(spec, T) = 0, starting at 3 where
    T = 2 is not measured exact (causal, unless `_exact_at_causal_pair`) or the doubled
    frequencies collide (no mask, offsets -1 and +1). Modern variants keep the sufficient rule.
    """
    if spec.rope_dims == 0:
        return 2
    if spec.variants() or spec.kv_lora_rank:
        return _sufficient_seq_len(spec)
    step2 = frequency_problem(spec.rope_frequencies(), step=2)
    T = 3 if (not _exact_at_causal_pair(spec) if spec.causal else step2) else 2
    while short_sequence_excess(spec, T):
        T += 1
    return T


def hypotheses(spec: AttentionSpec) -> tuple[str, ...]:
    """The conditions under which `count(spec)` is the generic fibre dimension, in words."""
    conditions = ["generic parameters and generic inputs (not LayerNorm-ed rows, which lie on a hyperplane)"]
    if spec.rope_dims:
        conditions.append("RoPE frequencies omega_i = base^(-2i/p): omega_i not in pi Z, omega_i != +-omega_j mod 2 pi")
    if spec.d_cross:
        conditions.append("cross-attention: generic encoder states C, independent of X, with S >= 2 rows (keys) each")
    bound = min_seq_len(spec)
    mask = "causal" if spec.causal else "no mask"
    given = "long enough (not given)" if spec.seq_len is None else f"T = {spec.seq_len}"
    conditions.append(
        f"sequence length T >= T_min = {bound} ({mask}, p = {spec.rope_dims}, d_k = {spec.d_head_qk}): {given}"
    )
    if spec.index_topk:  # attnid.layer.counting_variants: longer sequences are not counted
        conditions.append(f"T <= index_topk = {spec.index_topk}: the sparse-attention indexer keeps every key")
    return tuple(conditions)


def _frequencies(spec: AttentionSpec, frequencies) -> list[float]:
    """The spec's RoPE frequencies, or the given ones (p/2 of them)."""
    if frequencies is None:
        return spec.rope_frequencies()
    frequencies = [float(w) for w in frequencies]
    if len(frequencies) != spec.rope_planes:
        raise SpecError("frequencies", f"{len(frequencies)} given, the spec has {spec.rope_planes} rotation planes")
    return frequencies


def check_hypotheses(spec: AttentionSpec, frequencies=None) -> None:
    """Raise SpecError (naming the field to change) if the spec breaks a hypothesis of the count.

    frequencies: RoPE angles per position replacing base^(-2i/p) (as the Jacobian check accepts them).
    """
    if spec.rope_dims:
        problem = frequency_problem(_frequencies(spec, frequencies))
        if problem and frequencies is not None:
            raise SpecError("frequencies", f"the count cannot use these RoPE frequencies: {problem}")
        if problem:
            raise SpecError("rope_base", f"{spec.rope_base!r} gives RoPE frequencies the count cannot use: {problem}")
    window = getattr(spec, "sliding_window", 0)
    field, window = ("sliding_window", window) if window else ("attention_chunk", getattr(spec, "attention_chunk", 0))
    if window and spec.rope_dims and window < min_seq_len(spec):
        raise SpecError(
            field,
            f"{window} shows each query only offsets 0..{window - 1}, fewer than a causal T_min = "
            f"{min_seq_len(spec)} needs for {spec.rope_dims} rotated of d_head_qk = {spec.d_head_qk}",
        )
    if spec.index_topk and (spec.index_topk < min_seq_len(spec) or (spec.seq_len or 0) > spec.index_topk):
        field = "index_topk" if spec.index_topk < min_seq_len(spec) else "seq_len"
        raise SpecError(field, f"the count holds for T_min = {min_seq_len(spec)} <= T <= index_topk = "
                        f"{spec.index_topk} (the indexer keeps every key), T = {spec.seq_len}")  # fmt: skip
    if spec.seq_len is not None and spec.seq_len < min_seq_len(spec):
        raise SpecError(
            "seq_len",
            f"{spec.seq_len} is below T_min = {min_seq_len(spec)} for this spec "
            f"({'causal' if spec.causal else 'no mask'}, {spec.rope_dims} rotated of d_head_qk = {spec.d_head_qk}); "
            + (
                "with fewer positions more directions can stay unidentified than the count says "
                "(short_sequence_excess gives how many; `attnid verify --outside-hypotheses` measures a shorter T)"
                if spec.d_head_qk > spec.d_model and spec.rope_dims
                else "with fewer positions more directions stay unidentified than the count says"
            ),
        )


def count(spec: AttentionSpec, check: bool = True, frequencies=None) -> Counts:
    """Exact total / unidentified counts with a breakdown by source (see the module docstring).

    With check=True (default) a spec that breaks a hypothesis of the count is refused with a
    SpecError naming the field. check=False counts it anyway: T below T_min is ignored (the
    count is then a lower bound), and RoPE planes whose frequencies collide are counted by their
    commutant (`rope_clusters`): planes at 0 join the unrotated dims, planes at pi form one real
    product, each group of k equal planes one complex product (2 k^2 when k fits: gl(k, C)).
    frequencies: RoPE angles per position replacing base^(-2i/p), as in the Jacobian check.
    """
    if check:
        check_hypotheses(spec, frequencies)
    d, G, r = spec.d_model, spec.n_kv_heads, spec.group_size
    k, v, p = spec.d_head_qk, spec.d_head_v, spec.rope_dims
    c_kv = spec.d_cross or d  # the rows of W_K and W_V: the encoder's width for cross-attention (counting_variants)
    zero, half_turn, clusters = rope_clusters(_frequencies(spec, frequencies)) if p else (0, 0, [])
    u = k - p + 2 * zero  # planes at angle 0 do not rotate
    rows = r * (d + spec.has_bias("q"))  # the group's stacked queries [W_Q^h; b_Q^h]

    rotated = fibre_of_product(rows, d, 2 * half_turn) + sum(2 * fibre_of_product(rows, d, c) for c in clusters)
    query_key = G * (fibre_of_product(rows, c_kv, u) + rotated)
    key_bias = G * u if spec.has_bias("k") else 0
    value_output = G * fibre_of_product(c_kv, r * d, v)
    if not spec.has_bias("v"):
        value_bias = 0
    elif spec.has_bias("o"):
        value_bias = G * v
    else:
        value_bias = G * v - min(G * v, d)
    breakdown = {
        "query_key": query_key,
        "value_output": value_output,
        "key_bias": key_bias,
        "value_bias": value_bias,
    }
    weak = 0
    if spec.kv_lora_rank:  # modern variants: attnid.layer.counting_variants
        breakdown, weak = latent_breakdown(spec)
    elif spec.variants():
        breakdown, weak = variant_breakdown(spec, breakdown)
    return Counts(
        total=spec.n_params,
        unidentified=sum(breakdown.values()),
        breakdown=breakdown,
        conditions=hypotheses(spec),
        weakly_identified=weak,
    )


def ratio_grid(d_model: int, heads, kv_groups, rope=("none",), biases=("none",)):
    """Counts over a grid: every head count H (d_head = d_model / H), MHA plus each GQA group count G < H
    that divides H (G = 1 is MQA), each RoPE variant and bias subset. Returns a DataFrame, one row per spec.

    RoPE variants that round to zero rotated dims (head size 1) or repeat another variant are skipped.
    """
    import pandas as pd

    rows = []
    for n_heads in heads:
        if d_model % n_heads:
            raise ValueError(f"counting.heads: {n_heads} does not divide counting.d_model={d_model}")
        d_head = d_model // n_heads
        groups = [n_heads] + sorted({g for g in kv_groups if g < n_heads and n_heads % g == 0}, reverse=True)
        for n_kv in groups:
            variant = "MHA" if n_kv == n_heads else ("MQA" if n_kv == 1 else f"GQA G={n_kv}")
            seen_rope = set()
            for rope_variant in rope:
                p = parse_rope(rope_variant, d_head)
                if (rope_variant != "none" and p == 0) or p in seen_rope:
                    continue
                seen_rope.add(p)
                for bias in biases:
                    spec = AttentionSpec(d_model, n_heads, n_kv, rope_dims=p, biases=bias)
                    rows.append(
                        {**spec.to_row(), "variant": variant, "rope": rope_variant, **count(spec).to_dict(flat=True)}
                    )
    columns = [
        "label",
        "variant",
        "d_model",
        "n_heads",
        "n_kv_heads",
        "d_head_qk",
        "d_head_v",
        "rope",
        "rope_dims",
        "biases",
        "causal",
    ]
    df = pd.DataFrame(rows)
    return df[columns + [c for c in df.columns if c not in columns]]
