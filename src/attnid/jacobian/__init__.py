"""The judge of the counts: the unidentified dimension measured as P - rank of the Jacobian.

For a spec with P parameters the layer is a map theta -> Y(X; theta). At a generic point theta
and enough generic inputs X, the null space of J = dY/dtheta (all outputs of all tokens, one row
each) is the tangent space of the fibre, so its dimension P - rank J is the unidentified
dimension that :func:`attnid.layer.counting.count` predicts. Everything runs in float64.

Modules, each one idea: :mod:`.sizing` (how many tokens, where RoPE positions go, what it will
cost), :mod:`.products` (rows of J, J u, J^T J u, sigma_max), :mod:`.directions` (the predicted
null space from :mod:`attnid.symmetry`, and directions that must stay outside), :mod:`.dense`
(SVD rank with its margins), :mod:`.certificate` (shifted-Cholesky proof for large P),
:mod:`.verification` (``verify``: options, cost guard, verdict), :mod:`.grids` (config families,
bulk verification, bias effects). Every public name is importable from here.
"""

from .rank_certificate import CERT_RTOL, accumulate_gram, certify, peak_memory_bytes, pivot_coordinates, reset_peak_memory
from .dense import RANK_RTOL, measure, numerical_rank, singular_values, tall_svdvals, triangular_factor
from .directions import direction_checks, orthonormal_basis, outside_directions, symmetry_directions
from .grids import (
    BIAS_SUBSETS,
    bias_effects,
    expand_family,
    expand_grid,
    failures_message,
    ratio_figure_rows,
    ratio_grid_at_width,
    ratio_points,
    real_heads_table,
    spec_from_fields,
    spectra,
    verify_grid,
)
from .products import gauss_newton, jacobian_rows, jvps, sigma_max
from .sizing import (
    DTYPE,
    POSITION_RULES,
    Cost,
    Sizing,
    context_length,
    estimate_cost,
    input_sizing,
    position_ids,
    random_point,
)
from .verification import (
    DEFAULT_MAX_MEMORY_GB,
    DENSE_MAX_PARAMS,
    METHODS,
    MIN_GAP,
    MIN_MARGIN,
    STATUSES,
    TooLargeError,
    resolve_device_option,
    spec_row,
    verify,
)

__all__ = [
    "BIAS_SUBSETS",
    "CERT_RTOL",
    "DEFAULT_MAX_MEMORY_GB",
    "DENSE_MAX_PARAMS",
    "DTYPE",
    "METHODS",
    "MIN_GAP",
    "MIN_MARGIN",
    "POSITION_RULES",
    "RANK_RTOL",
    "STATUSES",
    "Cost",
    "Sizing",
    "TooLargeError",
    "accumulate_gram",
    "bias_effects",
    "certify",
    "context_length",
    "direction_checks",
    "estimate_cost",
    "expand_family",
    "expand_grid",
    "failures_message",
    "gauss_newton",
    "input_sizing",
    "jacobian_rows",
    "jvps",
    "measure",
    "numerical_rank",
    "orthonormal_basis",
    "outside_directions",
    "peak_memory_bytes",
    "pivot_coordinates",
    "position_ids",
    "random_point",
    "ratio_figure_rows",
    "ratio_grid_at_width",
    "ratio_points",
    "real_heads_table",
    "reset_peak_memory",
    "resolve_device_option",
    "sigma_max",
    "singular_values",
    "spec_from_fields",
    "spec_row",
    "spectra",
    "symmetry_directions",
    "tall_svdvals",
    "triangular_factor",
    "verify",
    "verify_grid",
]  # fmt: skip
