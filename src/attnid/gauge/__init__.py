"""The whole-model orbit: explicit generators of every counting rule, projection onto their span, balance.

    from attnid.gauge import Gauge
    g = Gauge.for_hf_model(model)      # or Gauge(model_spec, theta)
    g.dim, g.project(update), g.overlap(update), g.balance_(model)

Modules: :mod:`.point` (the point, its readers and writers), :mod:`.group` (one group of generators),
:mod:`.sources` (every counting rule's generators), :mod:`.operator` (apply, adjoint, Gram, projection),
:mod:`.name_map` (real classes' parameters <-> the layout, each family's map read from `attnid.hf.mapping`),
:mod:`.certificate` (the two-sided whole-model certificate), :mod:`.balance` (the balanced point),
:mod:`.toolkit` (Gauge), :mod:`.projected` (optimizer wrappers, the Trainer callback).
"""

from .toolkit import Gauge

__all__ = ["Gauge"]
