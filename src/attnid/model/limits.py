"""Ranges of a whole model that the counting rules do not cover, refused by name (torch-free).

The rules of `attnid.model.counting` are generic-position arguments: the token rows E_t reach the
first block as V points, and the residual gauge, the readers' centring and the first layer's
blind spots assume those points span the stream (their affine hull is the whole d-dimensional
stream only when V >= d + 1). With V <= d they span at most a V-dimensional subspace, every map
reading it is free on the complement, and the Jacobian finds more free directions than the rules
(measured, 2 layers, d_model 8, pre-LN, GELU, eps 0: V = 8 without learned positions, LayerNorm
+7, RMSNorm +16, RoPE +7, tied +1; tied with learned positions +1; V = 6 without positions
+55 (LayerNorm) and +64 (RMSNorm); d_model 6, V = 6: +5; V = d + 1 and d + 2 agree in every one of
these). A real model has V >> d, so `count_model` refuses V <= d rather than report a wrong number.
"""

from __future__ import annotations

from ..spec import SpecError


def check_countable(spec) -> None:
    """Raise SpecError (naming the field) for a ModelSpec whose count the rules do not cover."""
    if spec.vocab_size <= spec.d_model:
        raise SpecError(
            "vocab_size",
            f"{spec.vocab_size} <= d_model={spec.d_model}: the token rows span at most a {spec.vocab_size}-dim"
            " subspace of the stream, beyond the counting rules (they need vocab_size > d_model)",
        )
