"""The symmetry toolkit: group action, orbit tangent space, projection, rebalancing, conserved quantities.

Modules, each one idea: :mod:`.stacks` (the per-group stacked matrices the group acts on),
:mod:`.group` (the group, its action and its tangent), :mod:`.projector` (the orthogonal projection
onto the unidentified subspace T), :mod:`.balance` (the smallest-norm point of an orbit),
:mod:`.conserved` (the conserved quantities of gradient flow), :mod:`.checks` (every property
measured on a grid of specs), :mod:`.linalg` (small serial linear algebra). Every public name is
importable from here: ``from attnid.symmetry import Projector, balance, imbalance_drift``.
"""

from .balance import balance, balance_product
from .conserved import imbalance, imbalance_drift, imbalance_reference
from .group import act, act_heads, commutant, commutant_basis, group_element, orbit_tangent, permute_heads
from .linalg import GRAM_RTOL, GRAM_RTOL_FLOAT32, SIGMA_RTOL, nonzero_singular
from .projector import (
    OVERLAP_KEYS,
    ProductKernel,
    Projector,
    basis,
    chance_overlap,
    overlap,
    project,
    project_out,
    subspace_dim,
)
from .stacks import (
    COMPUTE_DTYPE,
    PART_BLOCKS,
    PARTS,
    o_stack,
    o_stack_t,
    o_unstack_t,
    part_mask,
    qk_stack,
    qk_unstack,
    vo_stack,
    vo_unstack,
)

__all__ = [
    "COMPUTE_DTYPE", "GRAM_RTOL", "GRAM_RTOL_FLOAT32", "OVERLAP_KEYS", "PARTS", "PART_BLOCKS", "SIGMA_RTOL",
    "ProductKernel", "Projector", "act", "act_heads", "balance", "balance_product", "basis", "chance_overlap",
    "commutant", "commutant_basis", "group_element", "imbalance", "imbalance_drift", "imbalance_reference",
    "nonzero_singular", "o_stack", "o_stack_t", "o_unstack_t", "orbit_tangent", "overlap", "part_mask",
    "permute_heads", "project", "project_out", "qk_stack", "qk_unstack", "subspace_dim", "vo_stack", "vo_unstack",
]  # fmt: skip
