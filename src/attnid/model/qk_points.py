r"""Per-head q/k norms of the first block reading finitely many token points (torch-free count term).

Without learned positions the first block's queries and keys read V points: x_t = Norm(E_t) (pre-LN),
t = 1..V. A q/k norm (Qwen3, Gemma-3, OLMo-2) sees a projection y_t = x_t W + b (width w) only through
its direction, so W may change as long as every y_t keeps its direction: x_t W' + b' = lambda_t y_t.
Stack the inputs as X~ = [X, 1] (V x d_in, d_in = d_c + [a bias on the map], d_c = d - 1 after a
LayerNorm, d after an RMSNorm; beta makes a bias): each column lambda o Y_j must lie in the d_in-dim
range of X~, w (V - d_in) linear conditions on lambda in R^V. The solutions beyond lambda = const (the
norm's own scale, which the layer count holds) are

    e = max(0, V - 1 - w (V - d_in))   per normed projection (a query head, a key group; rms_all: one
                                        of width H k and one of width G k; layernorm_head: w = k - 1)

exact at eps = 0, weakly identified for eps > 0 (lambda_t != 1 then moves the output by ~eps).
Measured (RMSNorm, SwiGLU, RoPE, d_model 8, 2 heads, 2 key groups, eps 0): k = 4, V = 9: +16 (4 x 4),
V = 10: +4, V = 11: 0; k = 6, V = 9: +8, V = 10 .. 22: 0; one key group, q/k biases, LayerNorm with beta,
half RoPE, layernorm_head (w = k - 1) agree; with the q/k norms' eps 1e-6 the same directions are weak
(V = 10: 4 more weak, exact unchanged). A map B after the norm keeping every |y_t| (possible while
V < w (w + 1) / 2 + 1) found nothing more under RoPE with per-head norms, but did without RoPE (LayerNorm
without beta, V = 9: 8 more) and with rms_all (V = 9, w = d = 8: 2 more, one each where
V > min(w, d_in) (V - d_in); V = 10, 12 agree): those few-token ranges are refused, as post-LN blocks
and an embedding norm. A real model (V >> d) has e = 0. Learned positions make V T
distinct inputs: nothing added.
"""

from __future__ import annotations

from ..spec import SpecError


def _projections(a, beta: bool) -> list[tuple[int, int, bool]]:
    """(how many, width w, has a bias) of the normed query and key projections of attention spec a."""
    k = a.d_head_qk - (a.qk_norm == "layernorm_head")
    q_bias, k_bias = a.has_bias("q") or beta, a.has_bias("k") or beta
    if a.qk_norm == "rms_all":
        return [(1, a.n_heads * k, q_bias), (1, a.n_kv_heads * k, k_bias)]
    return [(a.n_heads, k, q_bias), (a.n_kv_heads, k, k_bias)]


def qk_norm_point_terms(spec) -> tuple[int, int]:
    """(exact, weakly identified) directions the first block's q/k norms add on V token points."""
    a = spec.layer_specs[0].attention
    if a.qk_norm == "none" or a.kv_lora_rank or spec.positions == "learned":
        return 0, 0
    V, d, ln = spec.vocab_size, spec.d_model, spec.norm == "layernorm"
    beta = ln and spec.norm_bias
    d_c = d - 1 if ln else d
    extra = 0
    for count, width, bias in _projections(a, beta):
        extra += count * max(0, V - 1 - width * (V - d_c - bias))
        # a map B after the norm that keeps every |y_t| (V < w (w + 1) / 2 + 1): RoPE over the head and
        # per-head norms leave it nothing to act on (measured), otherwise it is not modelled
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
