r"""A parallel block at layer 0 without learned positions: its MLP reads only V points.

With no position table, the first block's input at a position is the token's row E[t]. Its MLP
reads only the V points u_t = Norm_2(E[t]) (unit vectors of the d_c-dim space a norm's output
spans, d_c = d - 1 for LayerNorm, d for RMSNorm) and writes the V x d_out table M[t] = MLP(u_t):

    h_1 = W[t] + Attn_0(Norm_1(E[.]))        W[t] = E[t] + M[t]  (the written table)

So E and the layer-0 MLP enter the logits only through the written table W (V x d_out), the
reading points u_t (read by layer 0's attention through Norm_1) and, when tied, the unembedding
E^T. The other rules count E as one object that reads and writes; here is what they miss.

At fixed E the table moves in P_eff directions (the MLP's effective parameters, net of its own
symmetries, `MLPSpec.effective`), plus, untied, the V row scales r_t of E[t] = r_t u_t, which no
norm sees. Once the table is free, E's reading role decouples from its writing role, and the
reduced model (W, E, the rest) has k symmetries that E alone does not have:

* untied: every (A, c) with |A u_t + c| = 1 for all V points (layer 0's readers take the inverse;
  c only when every reader absorbs a constant: the norm's beta or q, k, v biases): the fibre of
  (A, c) -> (A^T A, A^T c) is O(d_c), and the quadric (A^T A, A^T c) meets V generic linear
  conditions: k_read = d_c (d_c - 1)/2 + max(0, Q + [c] d_c - V), Q = d_c (d_c + 1)/2.
* tied: the unembedding sees E, so E may move only as E -> E B with the final norm absorbing B:
  B = D_f R D'^-1 (+ (1/g') z^T for LayerNorm, whose head reads centred vectors), R orthogonal on
  what the norm spans; the points then move linearly iff 1 B is along 1 (LayerNorm: d - 1
  conditions) and |u_t B| is one constant (min(Q, V) - 1 conditions on B P B^T):
  k_read = Q + 1 + 2 [LayerNorm] - min(Q, V).
* both: a uniform shift of W traded with a constant layer 0 adds outside its MLP (b_O: d_const;
  the value bias through W_O: min(G d_v, d_const)), unless the MLP's own bias already trades.

Each such direction is a fibre direction iff its table part lies in the reachable tangent (codim
V d_out - reach, generic position), so the model gains

    excess = max(0, reach + k - V d_out),   reach = P_eff (+ V untied)

over the other rules: 0 while the table is data-limited, the MLP's surplus plus k once it is free.
Measured against the Jacobian on both sides of the crossover (d 4-10, V 12-45, d_ff 4-32, LayerNorm
and RMSNorm, shared and separate norms, biases, GQA, RoPE, tied and untied). Without a final norm
the unembedding reads the raw stream, whose gauge differs: a reachable table is refused there.
"""

from __future__ import annotations

from ..spec import SpecError


def reading_gauge(spec, d_c: int, shifts: bool) -> int:
    """k_read of the module docstring: the point transformations the rest of the model absorbs."""
    V, quadric = spec.vocab_size, d_c * (d_c + 1) // 2
    if spec.tied:
        return quadric + 1 + 2 * (spec.norm == "layernorm") - min(quadric, V)
    return d_c * (d_c - 1) // 2 + max(0, quadric + (d_c if shifts else 0) - V)


def first_mlp_excess(spec, d_c: int, d_out: int, d_const: int) -> int:
    """The excess of the module docstring for a pre-LN parallel model without learned positions (else 0)."""
    if not spec.parallel or spec.positions == "learned" or spec.norm_position != "pre":
        return 0
    first = spec.layer_specs[0]
    a, V = first.attention, spec.vocab_size
    reach = first.mlp.effective(d_c, d_out, spec.norm_bias) + (0 if spec.tied else V)
    shifts = spec.norm_bias or all(a.has_bias(x) for x in "qkv")  # every reader of the points absorbs a constant
    if first.mlp.bias:
        shift = 0  # the MLP's own constant already trades with b_O and the value bias
    elif a.has_bias("o"):
        shift = d_const
    elif a.has_bias("v") or spec.norm_bias:
        shift = min(a.n_kv_heads * a.d_head_v, d_const)
    else:
        shift = 0
    excess = max(0, reach + reading_gauge(spec, d_c, shifts) + shift - V * d_out)
    if excess and not spec.final_norm:
        raise SpecError(
            "final_norm",
            f"layer 0's parallel MLP reaches its whole V x {d_out} output table (V={V}) and the unembedding reads "
            "the raw stream: not modelled",
        )
    return excess
