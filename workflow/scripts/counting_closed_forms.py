"""results/counting/closed_forms.{tex,csv}: sympy closed forms, each checked against the exact counts."""

from attnid.io import atomic_write_csv, atomic_write_text, log_to
from attnid.layer.symbolic import check_against_counts, closed_forms_frame, latex_table

log = log_to(snakemake.log[0])
problems = check_against_counts()
if problems:
    raise SystemExit("closed forms disagree with the exact counts:\n" + "\n".join(problems))
atomic_write_text(snakemake.output.tex, latex_table())
atomic_write_csv(snakemake.output.csv, closed_forms_frame())
log.info("%d closed forms, all equal to the exact counts at their example sizes", len(closed_forms_frame()))
