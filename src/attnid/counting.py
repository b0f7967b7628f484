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
  so G v - min(G v, d) value-bias directions are unidentified. b_Q and b_O are always seen.

Modern variants (q/k norms, sinks, softcapping, sliding windows, ALiBi, latent attention) change
this breakdown as derived in `attnid.counting_variants`; `weakly_identified` counts the norm scale
symmetries that eps > 0 breaks only weakly (their own class: identified, but with singular values
~eps).

The Jacobian check (`attnid.jacobian`) measures every one of these numbers at random points.
"""

from __future__ import annotations

from dataclasses import dataclass

from .counting_variants import latent_breakdown, variant_breakdown
from .spec import AttentionSpec, parse_rope


def _fibre_of_product(rows: int, cols: int, inner: int) -> int:
    """dim of the fibre of (A, B) -> A B^T, A (rows, inner), B (cols, inner), at a generic point.

    Rank-rho matrices of shape rows x cols form a manifold of dimension rho (rows + cols - rho),
    rho = min(inner, rows, cols); the parameters number inner (rows + cols).
    """
    if inner == 0:
        return 0
    rho = min(inner, rows, cols)
    return inner * (rows + cols) - rho * (rows + cols - rho)


@dataclass(frozen=True)
class Counts:
    """Parameter counts of one attention layer; `breakdown` sums to `unidentified`."""

    total: int
    unidentified: int
    breakdown: dict  # source -> unidentified dims from that source
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
        return {**head, **self.breakdown} if flat else {**head, "breakdown": dict(self.breakdown)}


def total_params(spec: AttentionSpec) -> int:
    """P: all parameters of the layer (weights and the biases the spec has)."""
    return spec.n_params


def count(spec: AttentionSpec) -> Counts:
    """Exact total / unidentified counts with a breakdown by source (see the module docstring)."""
    d, G, r = spec.d_model, spec.n_kv_heads, spec.group_size
    k, v, p = spec.d_head_qk, spec.d_head_v, spec.rope_dims
    u = k - p
    m_q = d + spec.has_bias("q")

    query_key = G * (_fibre_of_product(r * m_q, d, u) + p)
    key_bias = G * u if spec.has_bias("k") else 0
    value_output = G * _fibre_of_product(d, r * d, v)
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
    if spec.kv_lora_rank:  # modern variants: attnid.counting_variants
        breakdown, weak = latent_breakdown(spec)
    elif spec.variants():
        breakdown, weak = variant_breakdown(spec, breakdown)
    return Counts(
        total=total_params(spec), unidentified=sum(breakdown.values()), breakdown=breakdown, weakly_identified=weak
    )


def unidentified_dim(spec: AttentionSpec) -> int:
    return count(spec).unidentified


def rope_dims_for(variant: str, d_head_qk: int) -> int:
    """Deprecated alias of :func:`attnid.spec.parse_rope`, kept until its last callers move."""
    return parse_rope(variant, d_head_qk)


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
