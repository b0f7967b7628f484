"""The norms of a whole model against the maps around them: gains, and a LayerNorm's centring (torch-free)."""

from __future__ import annotations

from .attention import attention_readers


def centring_readers(spec, readers) -> int:
    """Free directions of the maps reading a LayerNorm: sum over readers X of n_X (1 + [b_X] - [beta or b_X]).

    Proposition (LayerNorm centring, reading side). A LayerNorm's output minus its bias is orthogonal to
    1/g, so W -> W + (1/g) u^T adds only the constant (beta . 1/g) u, which a bias of W (or beta itself)
    absorbs. `readers` are (output width n_X, has bias b_X) pairs. RMSNorm: none.
    """
    if spec.norm != "layernorm":
        return 0
    return sum(n * (1 + b - (spec.norm_bias or b)) for n, b in readers)


def block_readers(x) -> list[tuple[int, bool]]:
    """(output width, has bias) of every linear map reading a block's norms: q, k, v and the MLP's."""
    return attention_readers(x.attention) + x.mlp.readers


def norm_gains(spec) -> dict[str, int]:
    """Gains and biases of the norms whose readers are linear maps only (pre-LN blocks and a final norm).

    Proposition (norm gain). diag(g) W = diag(g s) diag(s)^-1 W: d per norm whose readers are linear maps
    (a block norm, or a final norm read by an untied unembedding); its beta is absorbed by those maps'
    biases or by the centring directions: d more per norm with a bias. A final norm read by a tied head
    (U = E^T) is seen, except its beta when a head bias absorbs beta E^T. Sublayer output norms write into the
    stream: their gains are seen; blocks without input norms (OLMo-2) have no block norm read by linear maps.
    Norms without a gain (OLMo, NanoChat) have nothing to count here.
    """
    d, beta = spec.d_model, spec.norm_bias
    if not spec.norm_gain:
        return {"norm_gain": 0, "norm_bias": 0}
    block_norms = spec.n_layers * (1 if spec.shared_norm else 2) * spec.input_norms
    head_norm = spec.final_norm and not spec.tied  # the final norm's only reader is a free linear map
    tied_head_bias = spec.final_norm and spec.tied and spec.lm_head_bias
    return {
        "norm_gain": d * (block_norms + head_norm),
        "norm_bias": d * beta * (block_norms + head_norm + tied_head_bias),
    }


def final_norm_readers(spec) -> int:
    """Centring directions of the unembedding reading an untied final LayerNorm (its V columns)."""
    if not (spec.final_norm and not spec.tied):
        return 0
    return centring_readers(spec, [(spec.vocab_size, spec.lm_head_bias)])


def centring_writers(spec) -> int:
    """Free entries of the maps writing into a stream whose every reader is a LayerNorm (pre-LN, final norm).

    Proposition (residual centring, writing side). Then the stream's component along 1 is invisible, so
    each row of every map writing into it has one free entry: E (untied), the position rows read, and per
    block W_O's rows, b_O, the MLP's down rows and bias.
    """
    if not (spec.norm == "layernorm" and spec.final_norm):
        return 0
    writes = sum(
        x.attention.n_heads * x.attention.d_head_v + x.attention.has_bias("o") + x.mlp.writes for x in spec.layer_specs
    )
    return (0 if spec.tied else spec.vocab_size) + len(spec.position_rows) + writes
