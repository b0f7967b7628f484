"""attnid: which attention parameters are identified, counted exactly and measured.

Artifact of *Multi-Head Self Attention is a Parameter Identification Mechanism* (arXiv 2609.01231).
"""

from .counting import Counts, count, unidentified_dim
from .layout import Layout
from .spec import AttentionSpec, SpecError

__all__ = ["AttentionSpec", "SpecError", "Layout", "Counts", "count", "unidentified_dim"]
__version__ = "0.1.0"
