"""The whole-model orbit: explicit generators of every counting rule, projection onto their span, balance.

    from attnid.gauge.point import Point
    from attnid.gauge.sources import generators
    from attnid.gauge.operator import Generators, Projection
"""
