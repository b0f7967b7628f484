"""results/macros/symmetry.tex: the numbers of the symmetry checks that the paper text uses."""

from attnid.io import atomic_write_text, log_to, read_result
from attnid.report.macros import fragment
from attnid.report.tables import check_number

log_to(snakemake.log[0])
checks = read_result(snakemake.input.checks)
worst = read_result(snakemake.input.summary).set_index("check").worst
values = {
    "SymmetrySpecs": str(checks.label.nunique()),
    "SymmetryDimAgree": str(int(checks.dim_match.sum())),
    "SymmetryWorstAllowedChange": check_number(worst["function change, allowed action"]),
    "SymmetryWorstPermutationChange": check_number(worst["function change, head permutation"]),
    "SymmetryMinNoncommutingChange": check_number(worst["function change, generic M under RoPE"]),
    "SymmetryMinPerHeadChange": check_number(worst["function change, per-head M in a GQA group"]),
    "SymmetryWorstIdempotence": check_number(worst["projection idempotence error"]),
    "SymmetryWorstAdjointness": check_number(worst["projection self-adjointness error"]),
    "SymmetryWorstNullResidual": check_number(worst["Jacobian null-space residual"]),
    "SymmetryWorstGradientOverlap": check_number(worst["gradient overlap"]),
    "SymmetryMinChanceOverlap": check_number(checks.chance_overlap.min()),
    "SymmetryWorstBalanceChange": check_number(worst["balance: function change"]),
    "SymmetryWorstBalanceResidual": check_number(worst["balance: imbalance left"]),
    "SymmetryMedianNormReduction": f"{100 * (1 - checks.norm_after / checks.norm_before).median():.1f}",
}
atomic_write_text(snakemake.output[0], fragment(values, "workflow/scripts/symmetry_macros.py"))
print(f"{len(values)} macros")
