"""A head bias on the raw stream: logits = h U + c with no final norm (torch-free)."""

from __future__ import annotations

from ...layer.spec import SpecError


def absorbs_constants(spec) -> bool:
    """Whether a head bias reads the raw stream (no final norm, pre-LN)."""
    return spec.lm_head_bias and not spec.final_norm and spec.norm_position == "pre"


def raw_head_bias(spec, ones_counted: bool, shift: bool) -> int:
    """Free dims a head bias on the raw stream adds; ones_counted: whether the other rules counted b_down's
    1-component; shift: whether a uniform shift of E or of the learned positions along 1 trades with the
    constant writers.

    Proposition (head bias on the raw stream). Without a final norm a constant kappa the stream carries
    reaches the logits only as kappa U, a V-vector the head bias c absorbs (V > d). So the last block's MLP
    down bias, written after the last norm reads the stream, is free in all d entries (the other rules had
    counted only its 1-component when every other reader is a LayerNorm); and with LayerNorm readers the
    1-components of the constant writers reach the logits only as one sum, which c absorbs: the shift of E
    or of the positions becomes free (+1 where one exists), and a tied head without learned positions no
    longer pins the sum. Measured (d_model 8, vocab 12, eps 0, biases qkvo and MLP biases, no final norm):
    untied LayerNorm 330 -> 338, tied RMSNorm 220 -> 228, tied LayerNorm with learned positions 313 -> 321,
    tied LayerNorm without positions 312 -> 320, one block 167 -> 175: +d, as here. Parallel blocks (b_O,
    b_down and the value bias all written after the last reader) are refused.
    """
    if not absorbs_constants(spec):
        return 0
    if spec.parallel:
        raise SpecError(
            "lm_head_bias", "a head bias on the raw stream (no final norm) after parallel blocks is not modelled"
        )
    last = spec.layer_specs[-1]
    return int(shift) + (spec.d_model - int(ones_counted) if last.mlp.bias else 0)
