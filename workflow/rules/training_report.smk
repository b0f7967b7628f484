# The training study as the paper reads it, from the aggregated results only (nothing trains here):
# the table of the study by task and optimizer in display names, and the macros of the training
# section that the study's own fragment lacks (Holm-corrected paired tests, plain SGD's
# gauge-invariant overlap, the weight-decay law's departure). Include after training.smk.


rule table_training:
    input:
        script_inputs("table_training.py"),
        summary=rules.training_aggregate.output.summary,
    output:
        tex=f"{RESULTS}/tables/training_summary.tex",
        csv=report(f"{RESULTS}/tables/training_summary.csv", category="Tables"),
    log:
        logfile("table_training"),
    conda:
        CONDA_ENV
    script:
        "../scripts/table_training.py"


rule table_training_results:
    input:
        script_inputs("table_training_results.py"),
        summary=rules.training_aggregate.output.summary,
    output:
        results_tex=f"{RESULTS}/tables/training_results.tex",
        results_csv=report(f"{RESULTS}/tables/training_results.csv", category="Tables"),
        sources_tex=f"{RESULTS}/tables/training_sources.tex",
        sources_csv=report(f"{RESULTS}/tables/training_sources.csv", category="Tables"),
    log:
        logfile("table_training_results"),
    conda:
        CONDA_ENV
    script:
        "../scripts/table_training_results.py"


rule training_report_macros:
    input:
        script_inputs("training_report_macros.py"),
        summary=rules.training_aggregate.output.summary,
        effects=rules.training_aggregate.output.effects,
        decay=rules.training_aggregate.output.decay,
    output:
        f"{RESULTS}/macros/training_report.tex",
    log:
        logfile("training_report_macros"),
    conda:
        CONDA_ENV
    script:
        "../scripts/training_report_macros.py"


TARGETS["tables"] += [*rules.table_training.output, *rules.table_training_results.output]
MACRO_FRAGMENTS.append(rules.training_report_macros.output[0])


rule training_text_macros:
    input:
        script_inputs("training_text_macros.py"),
        summary=rules.training_aggregate.output.summary,
        effects=rules.training_aggregate.output.effects,
        decay=rules.training_aggregate.output.decay,
        **({"manifest": rules.corpus.output.manifest} if CORPUS_USED else {}),
    output:
        f"{RESULTS}/macros/training_text.tex",
    log:
        logfile("training_text_macros"),
    conda:
        CONDA_ENV
    script:
        "../scripts/training_text_macros.py"


MACRO_FRAGMENTS.append(rules.training_text_macros.output[0])
