r"""results/macros/jacobian.tex: the Jacobian verification numbers the paper cites (\PaperVerified...)."""

from attnid.io import atomic_write_text, log_to, read_result
from attnid.report.macros import fragment, verification_macros

log = log_to(snakemake.log[0])
grid = read_result(snakemake.input.verification, columns=["passed", "gap", "sigma_kept", "sigma_dropped"])
values = verification_macros(grid)
atomic_write_text(snakemake.output[0], fragment(values, "workflow/scripts/jacobian_macros.py"))
log.info("%s", values)
