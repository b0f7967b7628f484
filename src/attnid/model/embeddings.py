r"""The embedding side of a whole model (a norm on the embeddings before pre-LN blocks, token types)
and BERT's masked-LM head: their checks, layout blocks, forward pieces and count terms (torch-free).

Notation as in `attnid.model.counting`: d = d_model, V = vocab, [beta] = 1 if the norms have a bias,
rot = (d-1)(d-2)/2 (the rotations of the centred stream), k = d (1 + [beta]) (the embedding norm's
gain and bias).

Embedding norm before pre-LN blocks (BLOOM's word_embeddings_layernorm). The blocks see the token
row E_t only through x_t = n(E_t) diag(g_e) + beta_e, n(e) = sqrt(d) C e / |C e| (C centres): per
row its scale and its shift along 1 are invisible (eps = 0). So the blocks read V points lying on
one ellipsoid {n P + c}, P = C diag(g_e) C; ellipsoids of that form are a 2d - 1 (d without beta)
dimensional family. The stream's gauge (x -> c x R, R in O(d-1) on the centred stream) survives
only where it maps those points onto another such ellipsoid:

* untied head: the model sees the V points modulo the gauge. The points of a realisable ellipsoid
  fill V (d-2) + 2d - 1 dims, so the embedding side (E, g_e, beta_e and the gauge) leaves
  max(V + k + rot + 1, 2 V + [beta] + 2) free: few tokens (V + [beta] + 1 <= k + rot, every real
  model: V = 250,880 < rot = 1.0e8 for BLOOM) leave the whole gauge and the norm's k parameters
  free; many leave the row scales, beta_e's ones component, the scale c and one rotation (the
  isospectral flow: R^T P^2 R again of the form Q^2, Q = C diag(g') C, a one-dimensional family).
  With eps > 0 the norm maps onto the open solid ellipsoid, E absorbs g_e and beta_e exactly, and
  the excess max(0, V + [beta] + 1 - k - rot) row scales are weakly identified.
* tied head (logits = Norm_f(h) E^T): the head sees E whole, so the rotations go; what is left
  beyond the usual tied model is beta_e's ones component ([beta], exact) and a second scale (the
  stream's c on g_e, beta_e and the head's s on E / s, g_f s, beta_f s: weak with eps > 0). It
  holds while the head leaves the points enough constraints: V (d-1) >= eff + rot, eff the
  parameters of the points given the head, and V > d (else refused: measured at V = d = 8, 7 more;
  agrees from V = d + 1, at d = 6 and 8).

Token types (BERT's segments, token_type_ids all zero, the default of the forward): row 0 is a
constant added at every position, so it trades with the learned positions (d); rows 1.. are
never read (d each): token_types * d in all.

Tied head after a LayerNorm (output n diag(g) + beta, n centred) with learned positions: E_t + a/g
(the same a for every row; 1/g elementwise) moves the logits by a beta.(1/g), a constant that a
head bias absorbs (or nothing, without beta), while the positions take -a/g: 1 dim.

BERT's MLM head: the last post-LN norm is read by a dense d x d map with a bias, then GELU, then
its own norm read by the unembedding (tied, with its own bias): the last block norm's gain (d),
bias (d [beta]) and centring (rule 2, one reader of width d with a bias) move into the dense
map; the head norm takes the place the last block norm had (its bias absorbed by the
unembedding's bias, its gain seen when tied).
"""

from __future__ import annotations

from ..spec import SpecError


def check(spec) -> None:
    """The fields this module owns, on a ModelSpec: token_types, mlm_head, embedding_norm (pre-LN)."""
    tt = spec.token_types
    if isinstance(tt, bool) or not isinstance(tt, int) or tt < 0:
        raise SpecError("token_types", f"must be an integer >= 0, got {tt!r}")
    if tt and spec.positions != "learned":
        raise SpecError("token_types", "token types are modelled with learned positions only (row 0 trades with them)")
    if spec.mlm_head and spec.norm_position != "post":
        raise SpecError("mlm_head", "the masked-LM head is modelled on post-LN models only (BERT)")
    if spec.embedding_norm and spec.norm_position == "pre":
        for field, bad, why in (
            ("norm", spec.norm != "layernorm", "is modelled with LayerNorm only"),
            ("final_norm", not spec.final_norm, "is modelled with a final norm only"),
            ("positions", spec.positions == "learned", "is modelled without learned positions (BLOOM: ALiBi)"),
            ("parallel", spec.parallel, "is modelled with sequential blocks only"),
        ):
            if bad:
                raise SpecError(field, f"an embedding norm before pre-LN blocks {why}")


def shapes_after_positions(spec) -> list[tuple[str, tuple[int, ...]]]:
    """Layout blocks right after the position table: the token-type table (token_types, d)."""
    return [("token_type", (spec.token_types, spec.d_model))] if spec.token_types else []


def shapes_before_unembed(spec) -> list[tuple[str, tuple[int, ...]]]:
    """Layout blocks of the MLM head: mlm.dense (d, d), mlm.dense_bias (d,), mlm_norm.{gain, bias} (d,)."""
    if not spec.mlm_head:
        return []
    d = spec.d_model
    out = [("mlm.dense", (d, d)), ("mlm.dense_bias", (d,)), ("mlm_norm.gain", (d,))]
    return out + ([("mlm_norm.bias", (d,))] if spec.norm_bias else [])


def add_token_type(h, w: dict):
    """h (B, T, d) + the token-type row 0 (every token_type_id is 0)."""
    return h + w["token_type"][0] if "token_type" in w else h


def mlm_transform(h, w: dict, spec, norm):
    """BERT's prediction-head transform: Norm(GELU(h W + b)) (B, T, d); `norm` is the model's norm function."""
    if not spec.mlm_head:
        return h
    import torch.nn.functional as F

    return norm(F.gelu(h @ w["mlm.dense"] + w["mlm.dense_bias"]), w, "mlm_norm", spec)


def _tied_point_parameters(spec) -> int:
    """Parameters of the embedding norm's points once a tied head has fixed C diag(g_f) E^T: 1/g_f up to
    scale, g_e, beta_e's centred part, and either beta_f (it pins E's component along 1/g_f through the
    constant beta_f E^T) or that component per row (V) when nothing pins it (no beta_f, or a head bias)."""
    d, V, beta, hb = spec.d_model, spec.vocab_size, spec.norm_bias, spec.lm_head_bias
    pinned = beta and not hb
    return (d - 1) + d + beta * (d - 1) + (d if pinned else V)


def pre_ln_embedding_norm(spec, b: dict) -> tuple[int, int]:
    """Adds the embedding norm's terms (pre-LN) to the breakdown b in place; returns (extra scale
    symmetries, extra weakly identified dims) (maths in the module docstring)."""
    if not (spec.embedding_norm and spec.norm_position == "pre"):
        return 0, 0
    d, V, beta = spec.d_model, spec.vocab_size, int(spec.norm_bias)
    rot = (d - 1) * (d - 2) // 2
    if spec.tied:
        if V <= d or V * (d - 1) < _tied_point_parameters(spec) + rot:  # measured: V = d = 8 leaves 7 more
            raise SpecError(
                "vocab_size",
                f"V={V} tokens leave an embedding norm's points under-determined by the tied head: not modelled",
            )
        b["embedding_norm"] = beta  # beta_e's ones component
        return 1, 0  # the head's scale, apart from the stream's
    k = d * (1 + beta)
    excess = V + beta + 1 - k - rot  # row scales beyond what the gauge and the norm's parameters take
    if spec.norm_eps > 0 or excess <= 0:
        b["embedding_norm"] = k
        return 0, max(0, excess)
    b["residual_rotations"] = 1  # the isospectral flow
    b["embedding_norm"] = V + beta  # the row scales and beta_e's ones component
    return 0, 0


def head_and_type_terms(spec) -> dict:
    """Breakdown terms of token types, of the MLM head and of a tied head's shift (module docstring)."""
    d, beta, ln = spec.d_model, spec.norm_bias, spec.norm == "layernorm"
    out = {"token_types": spec.token_types * d}
    # A tied head reading a LayerNorm (the final norm, or a post-LN model's last norm) sees E_t + a/g only
    # through the constant a beta.(1/g); the learned positions take -a/g back on the reading side.
    reads_norm = spec.final_norm or spec.norm_position == "post"
    if spec.tied and ln and reads_norm and spec.positions == "learned" and (spec.lm_head_bias or not beta):
        out["tied_shift"] = 1
    if spec.mlm_head:  # the last block norm, now read by the dense map (a bias of its own)
        out["mlm_head"] = d + d * beta + (d if ln else 0)
    return out
