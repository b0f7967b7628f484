"""attnid: which attention parameters are identified, counted exactly and measured.

Artifact of *Multi-Head Self Attention is a Parameter Identification Mechanism* (arXiv 2609.01231).

    from attnid import AttentionSpec, count, verify
    spec = AttentionSpec(d_model=16, n_heads=4, rope_dims="full")
    count(spec)    # exact counts, no torch
    verify(spec)   # Jacobian measurement (imports torch on first use)
"""

from importlib import metadata as _metadata

from .layer.counting import Counts, count
from .layer.spec import AttentionSpec, SpecError

try:
    __version__ = _metadata.version("attnid")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

__all__ = ["AttentionSpec", "Counts", "SpecError", "__version__", "count", "verify"]


def __getattr__(name):
    """`attnid.Layout` on first use only, so that `import attnid` stays torch-free."""
    if name == "Layout":
        from .layer.layout import Layout

        return Layout
    raise AttributeError(f"module 'attnid' has no attribute {name!r}")


def verify(spec: AttentionSpec, **options) -> dict:
    """Measure the unidentified dimension of `spec` by Jacobian rank (see :func:`attnid.jacobian.verify`)."""
    from .jacobian import verify as jacobian_verify

    return jacobian_verify(spec, **options)
