"""results/counting/closed_forms.{tex,csv}: sympy closed forms, each checked against the exact counts."""

import pandas as pd
import sympy as sp

from attnid.io import atomic_write_csv, atomic_write_text, log_to
from attnid.symbolic import CLOSED_FORMS, check_against_counts, latex_table

log_to(snakemake.log[0])
problems = check_against_counts()
if problems:
    raise SystemExit("closed forms disagree with the exact counts:\n" + "\n".join(problems))
atomic_write_text(snakemake.output.tex, latex_table())
rows = [{"key": f.key, "family": f.family, "total": str(f.total), "unidentified": str(sp.simplify(f.unidentified)), "ratio": str(f.ratio)} for f in CLOSED_FORMS]
atomic_write_csv(snakemake.output.csv, pd.DataFrame(rows))
print(f"{len(rows)} closed forms, all equal to the exact counts at their example sizes")
