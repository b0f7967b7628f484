r"""The first block without learned positions reads finitely many inputs: the V token points.

With no position table, the first block's input at a position is the token's row E[t], so what the
first block reads through a norm is one of V points x_t = Norm(E[t]) (t = 1..V). Maps that only need
to be right on those V points gain directions the generic-input rules do not count. Three places where
they do (d_c = d - 1 after a LayerNorm, d after an RMSNorm; V = vocab):

* a parallel block's MLP, which writes a V x d_out table (:func:`first_mlp_table`);
* per-head q/k norms, which see each point's projection only through its direction
  (:func:`qk_norm_token_points`);
* the latents of multi-head latent attention (:func:`latent_token_points`).

Later blocks read mixtures over the context: generic inputs. Learned or sinusoidal positions make V T distinct
inputs: nothing is added.
"""

from __future__ import annotations

from ...layer.spec import SpecError
from .mlp import effective_params


def _reading_gauge(spec, d_c: int, shifts: bool) -> int:
    """k_read of :func:`first_mlp_table`: the point transformations the rest of the model absorbs."""
    V, quadric = spec.vocab_size, d_c * (d_c + 1) // 2
    if spec.tied:
        return quadric + 1 + 2 * (spec.norm == "layernorm") - min(quadric, V)
    return d_c * (d_c - 1) // 2 + max(0, quadric + (d_c if shifts else 0) - V)


def first_mlp_table(spec, d_c: int, d_out: int, d_const: int) -> int:
    r"""Extra free directions of a pre-LN parallel block's MLP at layer 0 without learned positions.

    Proposition (the first MLP's table). The MLP reads only the V points u_t = Norm_2(E[t]) and writes the
    V x d_out table M[t] = MLP(u_t), added to E[t]: h_1 = W[t] + Attn_0(Norm_1(E[.])), W = E + M. So E and
    the MLP enter the logits only through W, the reading points u_t and, when tied, the unembedding E^T. At
    fixed E the table moves in reach = P_eff directions (the MLP's effective parameters, net of its own
    symmetries, `effective_params`), plus, untied, the V row scales of E[t], which no norm sees. Once the
    table is free, E's reading role decouples from its writing role, and the reduced model has k
    symmetries that E alone does not have:
    * untied: every (A, c) with |A u_t + c| = 1 for all V points (layer 0's readers take the inverse; c
      only when every reader absorbs a constant): k_read = d_c (d_c - 1)/2 + max(0, Q + [c] d_c - V),
      Q = d_c (d_c + 1)/2;
    * tied: E -> E B with the final norm absorbing B, the points moving linearly iff 1 B is along 1
      (LayerNorm) and |u_t B| is one constant: k_read = Q + 1 + 2 [LayerNorm] - min(Q, V);
    * both: a uniform shift of W traded with a constant layer 0 adds outside its MLP (b_O: d_const; the
      value bias through W_O: min(G d_v, d_const)), unless the MLP's own bias already trades.
    Each such direction is free iff its table part lies in the reachable tangent, so the model gains
    max(0, reach + k - V d_out): 0 while the table is data-limited (Falcon-7B), the MLP's surplus plus k once
    it is free (Falcon-40B). Measured on both sides of the crossover (d 4-10, V 12-45, d_ff 4-32, LayerNorm
    and RMSNorm, shared and separate norms, biases, GQA, RoPE, tied and untied). With eps > 0 the split into
    exact and weakly identified directions is measured while V < d_c (d_c + 1) / 2 (+ [c] d_c untied), where
    the quadric conditions take up the scales (V 12, 20 agree at eps 1e-5); beyond it (V 32 at d 8: tied 1,
    untied 4 of the counted directions are only weakly identified) the free table with eps > 0 is refused.
    Without a final norm the unembedding reads the raw stream, whose gauge differs: a reachable table is
    refused there.
    """
    excess = table_excess(spec, d_c, d_out, d_const)
    V = spec.vocab_size
    if excess and not spec.final_norm:
        raise SpecError(
            "final_norm",
            f"layer 0's parallel MLP reaches its whole V x {d_out} output table (V={V}) and the unembedding reads "
            "the raw stream: not modelled",
        )
    shifts = _reading_shifts(spec)
    quadric = d_c * (d_c + 1) // 2 + (0 if spec.tied else d_c * shifts)
    if excess and spec.norm_eps > 0 and V >= quadric:
        raise SpecError(
            "norm_eps",
            f"layer 0's parallel MLP reaches its whole output table and V={V} >= {quadric} points fix the reading"
            " gauge's quadric: which free directions eps > 0 leaves weakly identified is not derived (measured, d 8,"
            " V 32, eps 1e-5: tied 1, untied 4 more than counted)",
        )
    return excess


def _reading_shifts(spec) -> bool:
    """Every reader of layer 0's token points absorbs a constant (a norm bias, or biases on q, k and v)."""
    a = spec.layer_specs[0].attention
    return spec.norm_bias or all(a.has_bias(x) for x in "qkv")


def table_excess(spec, d_c: int, d_out: int, d_const: int) -> int:
    """max(0, reach + k + shift - V d_out) of :func:`first_mlp_table`, without its refusals (0 unless a pre-LN
    parallel block without learned positions)."""
    if not spec.parallel or spec.adds_positions or spec.norm_position != "pre":
        return 0
    first = spec.layer_specs[0]
    a, V = first.attention, spec.vocab_size
    reach = effective_params(first.mlp, d_c, d_out, spec.norm_bias) + (0 if spec.tied else V)
    shifts = _reading_shifts(spec)
    if first.mlp.bias:
        shift = 0  # the MLP's own constant already trades with b_O and the value bias
    elif a.has_bias("o"):
        shift = d_const
    elif a.has_bias("v") or spec.norm_bias:
        shift = min(a.n_kv_heads * a.d_head_v, d_const)
    else:
        shift = 0
    return max(0, reach + _reading_gauge(spec, d_c, shifts) + shift - V * d_out)


def _normed_projections(a, beta: bool) -> list[tuple[int, int, bool]]:
    """(how many, width w, has a bias) of the normed query and key projections of attention spec a."""
    k = a.d_head_qk - (a.qk_norm in ("layernorm_head", "layernorm_heads"))  # a centred head spans k - 1 dims
    q_bias, k_bias = a.has_bias("q") or beta, a.has_bias("k") or beta
    if a.qk_norm == "rms_all":
        return [(1, a.n_heads * k, q_bias), (1, a.n_kv_heads * k, k_bias)]
    return [(a.n_heads, k, q_bias), (a.n_kv_heads, k, k_bias)]


def qk_norm_token_points(spec) -> tuple[int, int]:
    r"""(exact, weakly identified) directions the first block's q/k norms add on the V token points.

    Proposition (q/k norms on token points). A q/k norm (Qwen3, Gemma-3, OLMo-2) sees a projection
    y_t = x_t W + b (width w) only through its direction, so W may change as long as every y_t keeps its
    direction: x_t W' + b' = lambda_t y_t. Stacking X~ = [X, 1] (V x d_in, d_in = d_c + [a bias on the map];
    beta makes a bias), each column lambda o Y_j must lie in the d_in-dim range of X~: w (V - d_in) linear
    conditions on lambda in R^V. The solutions beyond lambda = const (the norm's own scale, which the layer
    count holds) number max(0, V - 1 - w (V - d_in)) per normed projection (a query head, a key group;
    rms_all: one of width H k and one of width G k; layernorm_head: w = k - 1): exact at eps = 0, weakly
    identified for eps > 0. Measured (RMSNorm, SwiGLU, RoPE, d_model 8, 2 heads, eps 0): k = 4, V = 9: +16,
    V = 10: +4, V = 11: 0; k = 6, V = 9: +8, V >= 10: 0; one key group, q/k biases, LayerNorm with beta,
    half RoPE, layernorm_head agree. A map B after the norm keeping every |y_t| (possible while
    V < w (w + 1) / 2 + 1) found nothing more under RoPE with per-head norms, but did without RoPE and with
    rms_all: those few-token ranges are refused. A real model (V >> d) has none.
    """
    a = spec.layer_specs[0].attention
    if a.qk_norm == "none" or a.kv_lora_rank or spec.adds_positions:
        return 0, 0
    V, d, ln = spec.vocab_size, spec.d_model, spec.norm == "layernorm"
    beta = ln and spec.norm_bias
    d_c = d - 1 if ln else d
    extra = 0
    for count, width, bias in _normed_projections(a, beta):
        extra += count * max(0, V - 1 - width * (V - d_c - bias))
        few = V < width * (width + 1) // 2 + 1
        d_in = d_c + bias
        if a.qk_norm == "rms_all":  # measured one more each where V > min(w, d_in) (V - d_in)
            few = V > min(width, d_in) * (V - d_in)
        if few and (a.rope_dims == 0 or a.qk_norm == "rms_all" or spec.norm_position != "pre" or spec.embedding_norm):
            raise SpecError(
                "vocab_size",
                f"{V} tokens leave the first block's q/k norms (width {width}) free directions that are modelled"
                " only for per-head norms under RoPE in pre-LN blocks",
            )
    return (0, extra) if a.norm_eps > 0 else (extra, 0)


def latent_token_points(spec) -> tuple[int, int]:
    r"""(exact directions added, weakly identified directions removed) by the first block's latents.

    Proposition (latents on token points). On the V points y_t = x_t W_D a latent of rank r admits
    W_D -> W_D A / kappa for every A and kappa > 0 with |y_t A|^2 - |y_t|^2 = r eps (1 - kappa^2) (every
    rms(y_t A / kappa) is then rms(y_t) A, which W_U -> diag(g')^-1 A^-1 diag(g) W_U takes back): S = A A^T
    meets V generic linear conditions, so the block holds e = max(0, r (r + 1) / 2 + 1 - V) exact directions
    per latent beyond O(r) and the gains, the down-projection's scale among them (no longer weakly identified
    there). DeepSeek-V3 (r_q = 1536, r = 512, V = 129,280): 1,053,186 of them in its first block.
    """
    a, V = spec.layer_specs[0].attention, spec.vocab_size
    exact = weak = 0
    for r in (a.kv_lora_rank, a.q_lora_rank) if a.kv_lora_rank else ():
        e = r * (r + 1) // 2 + 1 - V
        if r and e > 0:
            scale_weak = a.norm_eps > 0  # else the layer count holds the scale as exact already
            exact += e - (not scale_weak)
            weak += scale_weak
    return exact, weak
