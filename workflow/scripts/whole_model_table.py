"""results/tables/whole_model.tex/.csv: whole-model counts of every shipped real config.

One row per stored published config (attnid.hf.config_tables): P, the unidentified and weakly
identified parameters of the whole model, the identified share, and the attention layers alone
(the lower bound that ignores every symmetry between layers); the CSV also holds the breakdown
by source (src_* columns) and, for a model the count does not cover, the refusal.
"""

from attnid.hf import STORED
from attnid.hf.config_tables import shipped_table
from attnid.io import atomic_write_csv, log_to
from attnid.report.latex import write_table

log_to(snakemake.log[0])
df = shipped_table(STORED)
atomic_write_csv(snakemake.output.csv, df)
ok = df[df["status"] == "ok"].sort_values("P").astype({"P": int, "unidentified": int, "weakly_identified": int})
table = ok.assign(share=100 * ok["identified_share"], attn_share=100 * ok["attention_share_of_unidentified"])[
    ["name", "P", "unidentified", "weakly_identified", "share", "attention_unidentified", "attn_share"]
].rename(
    columns={
        "name": "model",
        "P": "$P$",
        "unidentified": "unidentified",
        "weakly_identified": "weak",
        "share": r"identified (\%)",
        "attention_unidentified": "attention alone",
        "attn_share": r"attention / whole (\%)",
    }
)
write_table(
    table,
    snakemake.output.tex,
    None,
    formats={
        "$P$": ",",
        "unidentified": ",",
        "attention alone": ",",
        r"identified (\%)": ".3f",
        r"attention / whole (\%)": ".0f",
    },
)
print(df[["model", "P", "unidentified", "status"]].to_string(index=False))
