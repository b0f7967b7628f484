r"""results/tables/hf_modules.tex/.csv: real `transformers` attention modules, count vs measured.

Reads results/hf/modules.csv (one row per case). The CSV keeps every column as measured (the case,
the model class, the shrunk spec label, P, the count, the measured unidentified dimension
P - rank J, the gap in decades between the smallest kept and the largest dropped singular value,
the weakly identified directions counted / measured and their singular values relative to the
largest, whether all agree). The LaTeX table names each case and its shrunk attention in words:
the published model's display name (its stored config's `_name`) and the config override of the
case in typewriter, H/G, d_k/d_v, the rotated dims, the biases and the variants of the shrunk spec
(attnid.report.labels.label_fields; all are d_model 16, causal unless marked, with their published
RoPE base), then P, count, measured, gap and the weak directions (their singular values are in the CSV and
the text's \HfWeakSigma... macros).
The module class (the model's own attention class) stays in the CSV. Every row agrees (the
measurement rule fails otherwise), so no agree column. The model and variant columns wrap
(WRAPPED) so that the table fits the text width.
"""

import pandas as pd

from attnid.report.latex import booktabs, escape, number
from attnid.report.labels import label_fields

WRAPPED = r">{\raggedright\arraybackslash}p{%s}"  # package array
ALIGN = WRAPPED % "3.2cm" + "llll" + WRAPPED % "3.9cm" + "rrrrrr"  # model, H/G, d_k/d_v, p, biases, variants, ...
COLUMNS = ["case", "model_class", "shrunk", "P", "count", "measured", "gap", "weakly_count", "weakly_measured",
           "weak_sigma_min", "weak_sigma_max", "agree"]  # fmt: skip


def model_text(case: str) -> str:
    """'llama3_8b attention_bias=True' -> 'LLaMA-3-8B, \\texttt{attention\\_bias=True}' (the stored config's
    display name, then the override the case makes)."""
    from attnid.hf import stored_config

    key, _, override = case.partition(" ")
    try:
        name = escape(stored_config(key).get("_name", key))
    except (FileNotFoundError, KeyError, ValueError):
        name = escape(key)
    if not override:
        return name
    if override.startswith("layer"):
        return f"{name}, {escape(override)}"
    return rf"{name}, \texttt{{{escape(override)}}}".replace(r"\_", r"\_\allowbreak{}")  # a long key may break


def spec_columns(label: str) -> dict:
    """The shrunk spec in the table's columns (H/G, d_k/d_v, rotated dims, biases, other variants)."""
    f = label_fields(label)
    extras = [e for e in f["extras"] if e != "causal" and not e.startswith("RoPE base")]
    if "causal" not in f["extras"]:
        extras.insert(0, "no mask")
    return {
        "$H/G$": f"{f['H']}/{f['G']}",
        "$d_k/d_v$": f"{f['d_k']}/{f['d_v']}",
        "$p$": str(f["p"]) if f["p"] else "--",
        "biases": f["biases"] or "--",
        "variants": ", ".join(extras) or "--",
    }


def table(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in df.itertuples(index=False):
        weak = f"{r.weakly_count}/{r.weakly_measured}" if r.weakly_count or r.weakly_measured else "--"
        rows.append({"model": model_text(r.case), **spec_columns(r.shrunk),
                     "$P$": number(int(r.P)), "count": number(int(r.count)), "meas.": number(int(r.measured)),
                     "gap": number(r.gap, ".1f"), "weak": weak})  # fmt: skip
    return pd.DataFrame(rows)


if __name__ == "__main__" and "snakemake" in globals():
    from attnid.io import atomic_write_csv, atomic_write_text, log_to, read_result

    log_to(snakemake.log[0])
    df = read_result(snakemake.input[0], columns=COLUMNS)
    atomic_write_csv(snakemake.output.csv, df[COLUMNS])
    shown = table(df)
    atomic_write_text(snakemake.output.tex, booktabs(shown, align=ALIGN, escape_cells=False))
    print(shown.to_string(index=False))
