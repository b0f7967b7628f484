"""Whole transformer language models: the spec, exact counts, and (with torch) the function and its judge.

    from attnid.model import ModelSpec, count_model, count_whole_model
    count_whole_model("config.json")   # total, unidentified, weakly_identified, ratio, breakdown

`attnid.model.forward` (the float64 logits function), `attnid.model.judge` (the Jacobian rank) and
`attnid.model.real` (real `transformers` models) import torch; this package itself does not.
"""

from .counting import count_model
from .layers import LayerSpec, MLPSpec
from .shipped import count_whole_model
from .spec import ModelSpec

__all__ = ["LayerSpec", "MLPSpec", "ModelSpec", "count_model", "count_whole_model"]
