"""results/tables/hf_modules.tex/.csv: real `transformers` attention modules, count vs measured.

One row per case: the model class, the shrunk config (spec label), P, the count, the measured
unidentified dimension P - rank J, the gap (decades between the smallest kept and the largest
dropped singular value), the weakly identified directions (count / measured, with their singular
values relative to the largest), and whether all agree.
"""

from attnid.io import log_to, read_result
from attnid.report.latex import write_table

log_to(snakemake.log[0])
df = read_result(snakemake.input[0], columns=["case", "model_class", "shrunk", "P", "count", "measured", "gap"])
weak = df["weakly_count"].astype(str) + " / " + df["weakly_measured"].astype(str)
table = df.assign(weak=weak)[
    [
        "case",
        "model_class",
        "shrunk",
        "P",
        "count",
        "measured",
        "gap",
        "weak",
        "weak_sigma_min",
        "weak_sigma_max",
        "agree",
    ]
].rename(
    columns={
        "model_class": "module",
        "shrunk": "shrunk spec",
        "P": "$P$",
        "gap": "gap (dec.)",
        "weak": "weak (count / meas.)",
        "weak_sigma_min": r"weak $\sigma_{\min}$",
        "weak_sigma_max": r"weak $\sigma_{\max}$",
    }
)
formats = {"gap (dec.)": ".1f", r"weak $\sigma_{\min}$": ".1e", r"weak $\sigma_{\max}$": ".1e"}
write_table(table, snakemake.output.tex, snakemake.output.csv, formats=formats)
print(table.to_string(index=False))
