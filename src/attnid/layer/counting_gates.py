"""What the gate function, the gate bias and differential attention do to the count (torch-free; fields in
`attnid.layer.spec_gates`, used by `attnid.layer.counting_variants.variant_breakdown`). u, v, H, G as there; c = G / 2.

  * the gate function (sigmoid or softplus) and a bias per head inside the gate change nothing: the element
    gate's argument (each value dim j of a group is its own unit, told apart by its gate) and the head gate's
    (a scalar per head commutes with GL(v); each b_V^g W_O^h is seen) only need the gate to be a function of
    x W_G^h (+ b_G^h) that is nowhere locally constant, and no change of W_V, W_O, W_G can move b_G^h (it shifts
    the gate's argument by a constant that no x-dependent term mimics): b_G and W_G are seen. Measured, not
    assumed (tests/test_gated_attention.py).
  * differential attention (DiffLlama; the layer in `attnid.layer.differential`): each score map is an ordinary
    query/key pair of GQA (query head h with group g(h)), each softmax ignores a constant along keys, so
    query_key and key_bias are plain attention's. The two value groups c and c + G/2 form one value of width
    2v per differential group, read through an RMSNorm without a gain over 2v dims: n(z M) = n(z) M only for
    orthogonal M (|z M| = |z|), so of GL(2v) O(2v) is left: c v (2v - 1) (for 2v <= d, as the spec demands); the
    value bias sits inside the norm, z = D X W_V + (1 - lambda) b_V: seen; scaling both value groups (and b_V)
    by one factor: c, exact for eps = 0, weakly identified for eps > 0. The four lambda vectors enter only
    through lambda = exp(l_q1 . l_k1) - exp(l_q2 . l_k2) + lambda_init, one number the output shows (the rows of
    D sum to 1 - lambda): 4k - 1.
"""

from __future__ import annotations


def differential_breakdown(spec, breakdown: dict) -> tuple[dict, int]:
    """(breakdown, scale symmetries of the norm) of differential attention from plain attention's breakdown."""
    c, v = spec.n_kv_heads // 2, spec.d_head_v
    out = {**breakdown, "value_output": c * v * (2 * v - 1), "value_bias": 0, "lambda": 4 * spec.d_head_qk - 1}
    return out, c
