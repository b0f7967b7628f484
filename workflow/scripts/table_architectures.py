"""results/tables/architectures.{tex,csv}: attention parameters of real models, identified and not."""

import pandas as pd

from attnid.io import log_to
from attnid.report.latex import write_table

log_to(snakemake.log[0])
df = pd.read_csv(snakemake.input[0], keep_default_na=False)


def rope(row):
    return "none" if row.rope_dims == 0 else ("full" if row.rope_dims == row.d_head_qk else f"{row.rope_dims}/{row.d_head_qk}")


table = pd.DataFrame(
    {
        "Model": df.model,
        "$d$": df.d_model,
        "$H$": df.n_heads,
        "$G$": df.n_kv_heads,
        "RoPE": df.apply(rope, axis=1),
        "Biases": df.biases,
        "Attn. params": df.model_total,
        "Unidentified": df.model_unidentified,
        "Share (\\%)": 100 * df.ratio,
    }
)
write_table(table, snakemake.output.tex, snakemake.output.csv, formats={"Attn. params": ",d", "Unidentified": ",d", "Share (\\%)": ".3f"})
print(table.to_string(index=False))
