r"""results/tables/training_results.{tex,csv} and training_sources.{tex,csv}: the study's estimates by setting.

Reads results/training/summary.parquet (attnid.report.study): per task, model and optimizer the slope of log
overlap on log H with its 95% interval over seeds next to the chance level's slope, the overlap over the
chance level, and the converged runs; for the real architectures the whole-model overlap and each source's
part of it (attnid.gauge), next to the attention layers' own overlap.
"""

import pandas as pd

from attnid.report.study import results_latex, results_table, sources_latex, sources_table


def flat(table: pd.DataFrame) -> pd.DataFrame:
    """Estimates {mean, low, high, n} spread into columns <name>_mean, <name>_low, ... (for the CSV)."""
    out = {}
    for column in table.columns:
        if len(table) and isinstance(table[column].iloc[0], dict):
            for key in ("mean", "low", "high", "n"):
                out[f"{column}_{key}"] = [e[key] if isinstance(e, dict) else float("nan") for e in table[column]]
        else:
            out[column] = table[column]
    return pd.DataFrame(out)


if __name__ == "__main__" and "snakemake" in globals():
    from attnid.io import atomic_write_csv, atomic_write_text, log_to, read_result

    log = log_to(snakemake.log[0])
    summary = read_result(snakemake.input.summary)
    results, sources = results_table(summary), sources_table(summary)
    atomic_write_csv(snakemake.output.results_csv, flat(results))
    atomic_write_text(snakemake.output.results_tex, results_latex(results))
    atomic_write_csv(snakemake.output.sources_csv, flat(sources))
    atomic_write_text(snakemake.output.sources_tex, sources_latex(sources))
    log.info("\n%s", flat(results).to_string(index=False))
