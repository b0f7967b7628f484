"""Whole transformer language models: the vocabulary, exact counts, and (with torch) the function and its judge.

    from attnid.model import ModelSpec, count_model
    from attnid.hf import load_config, model_spec
    count_model(model_spec(load_config("config.json")))   # total, unidentified, weakly identified, breakdown

`attnid.model.forward` (the float64 logits function), `attnid.model.judge` (the Jacobian rank),
`attnid.model.real` (real `transformers` models) and `attnid.model.grid` import torch; this package does not.
"""

from .blocks import LayerSpec, MLPSpec, MoESpec
from .counting import count_attention_layers, count_model
from .spec import ModelSpec

__all__ = ["LayerSpec", "MLPSpec", "MoESpec", "ModelSpec", "count_attention_layers", "count_model"]
