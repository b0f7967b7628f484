r"""The training study's numbers in the paper's Section 5, as macros and tables (attnid.training.analysis
answers its five questions; this module only writes the answers as LaTeX).

Every estimate is printed as 'mean [low, high]', its 95% t-interval (:func:`interval_text`), and every
macro exists in every preset: a number a preset does not measure reads 'n/a'. A task learned by a model is a
setting (attnid.report.labels.SETTING_NAMES); macros name it by its key (`recall/llama` -> `RecallLlama`; this
project's own teacher-student layer: no suffix, its own transformer on recall: `Recall`, as before).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..training.analysis import chance_ratio, estimate, heads_slopes, lr_slopes, ok
from .latex import escape, macro_name, number
from .labels import OPTIMIZER_NAMES, SETTING_NAMES, SOURCE_NAMES, TASK_NAMES, ordered, setting, with_settings
from .significance import holm, t_test_pvalue


def interval_text(e: dict) -> str:
    """'mean [low, high]' of an estimate (attnid.training.analysis.estimate) for running text; 'n/a' if not measured."""
    if not math.isfinite(e["mean"]):
        return "n/a"
    return rf"\ensuremath{{{number(e['mean'])}\ [{number(e['low'])}, {number(e['high'])}]}}"


SLOPE_OPTIMIZERS = ("sgd_wd", "sgd_momentum", "adam", "adam_shared", "adamw")  # every macro in every preset ('n/a')
TASK_PREFIX = {"teacher_student": "", "recall": "Recall"}  # the settings' macro suffixes where they were shorter
# The whole-model overlap under Adam and the parts Section 5 cites, per real-architecture setting ('' = the whole
# model); every setting and source is in tables/training_sources.
CITED_SOURCES = {"markov/gpt2": ("", "attention")}  # Llama's and Mixtral's: attnid.report.text_study
SOURCES = ("attention", "mlp_hidden", "norm_gain", "norm_bias", "residual_rotations", "centring_readers",
           "centring_writers")  # fmt: skip


def prefix(key: str) -> str:
    """The macro suffix of a setting key ('' for teacher-student, 'Recall', 'RecallLlama', 'MarkovGptTwo', ...)."""
    return TASK_PREFIX.get(key, macro_name(key) if key else "")


def converged_runs(summary: pd.DataFrame) -> pd.DataFrame:
    """The runs that converged (attnid.training.sweep.converged), or every run that did not diverge."""
    good = ok(summary)
    return good[good["converged"].astype(bool)] if "converged" in good else good


def study_macros(
    summary: pd.DataFrame, checks: pd.DataFrame, lr_summary: pd.DataFrame, decay: pd.DataFrame, effects: pd.DataFrame
) -> dict[str, str]:
    r"""The training study's numbers that Section 5 cites, {name: LaTeX}; the same names in every preset (a
    number a preset does not measure reads 'n/a'). The sweep's size and lists come from
    attnid.report.macros.training_macros."""
    good = with_settings(ok(summary))
    values = {
        "TrainingDiverged": number(int(summary["diverged"].sum())),
        "TrainingChecksPassed": f"{int(checks['passed'].sum())}/{len(checks)}",
    }
    if "converged" in summary:
        values["TrainingConverged"] = number(int(summary["converged"].sum()))
    values |= _slope_macros(good)
    return values | _weight_decay_macros(good, lr_summary, decay) | _optimizer_macros(good) | _effect_macros(effects)


def _slope_macros(good: pd.DataFrame) -> dict[str, str]:
    """1. Overlap against H: the slope of log overlap on log H per seed (chance: -1/2 for MHA), teacher-student, per
    optimizer; every setting's slope and chance ratio is in tables/training_results."""
    values = {}
    slopes = heads_slopes(good)
    for key in ("teacher_student",):  # the only task whose head counts the preset sweeps widely
        sel = slopes[slopes["task"] == key]
        for opt in SLOPE_OPTIMIZERS:
            one = sel[sel["optimizer"] == opt]
            values[macro_name("OverlapSlope", prefix(key), opt)] = interval_text(estimate(one["slope"]))
    return values


def _weight_decay_macros(good: pd.DataFrame, lr_summary: pd.DataFrame, decay: pd.DataFrame) -> dict[str, str]:
    """2. Weight decay: predicted against measured imbalance after the last step, the overlap with and
    without balancing, and the slope of log drift on log learning rate (2 under plain SGD)."""
    decay = decay[decay["task"] == "teacher_student"]
    qk = decay[decay["part"] == "query_key"]
    last = qk[qk["step"] == qk["step"].max()]
    values = {
        "WeightDecayPredicted": number(last["predicted"].mean(), digits=4),
        "WeightDecayMeasured": number(last["measured"].mean(), digits=4),
    }
    wd = good[(good["task"] == "teacher_student") & (good["algorithm"] == "sgd") & (good["weight_decay"] > 0)]
    for mode in ("none", "balance"):
        overlap = wd.loc[wd["rebalance"] == mode, "mean_overlap_all"].mean()
        values[macro_name("OverlapWeightDecay", mode)] = number(overlap)
    slopes = lr_slopes(lr_summary)
    for part in ("query_key", "value_output"):
        slope = estimate(slopes.loc[slopes["part"] == part, "slope"])
        values[macro_name("ConservationSlope", part)] = interval_text(slope)
    return values


def paired(g: pd.DataFrame, a: str, b: str, column: str, transform=None) -> dict:
    """Estimate of (b - a) of `column` paired by (H, seed) between optimizers a and b of one setting."""
    x = g[g["optimizer"] == a].set_index(["heads", "seed"])[column]
    y = g[g["optimizer"] == b].set_index(["heads", "seed"])[column]
    diff = transform(y, x) if transform else y - x
    return estimate(diff.dropna())


def _optimizer_macros(good: pd.DataFrame) -> dict[str, str]:
    """3. Adam against one second moment per symmetry block (overlap, and the held-out loss of converged runs,
    paired by H and seed); 4. the gauge-invariant overlap, Adam on the teacher-student task, with and without
    balancing."""
    values, free = {}, good[good["rebalance"] == "none"]
    done = converged_runs(free)
    for key in TASK_PREFIX:
        g, c = free[free["task"] == key], done[done["task"] == key]
        p = prefix(key)
        for opt in ("adam", "adam_shared", "sgd_momentum"):
            values[macro_name("Overlap", p, opt)] = number(g.loc[g["optimizer"] == opt, "mean_overlap_all"].mean())
        ratio = paired(c, "adam", "adam_shared", "final_eval_loss", lambda y, x: np.log10(y / x))
        values[macro_name("AdamSharedLossRatio", p)] = interval_text(ratio)
    adam = free[free["optimizer"] == "adam"]
    for key, sources in CITED_SOURCES.items():  # the real architectures' whole-model overlap and its parts
        g = adam[adam["task"] == key]
        for source in sources:
            column = "mean_overlap_model" + (f"_{source}" if source else "")
            series = g[column] if column in g else pd.Series(dtype=float)
            values[macro_name("ModelOverlapAdam", prefix(key), source)] = interval_text(estimate(series))
    ts = good[(good["task"] == "teacher_student") & (good["optimizer"] == "adam")]
    values["OverlapAdamBalance"] = number(ts.loc[ts["rebalance"] == "balance", "mean_overlap_all"].mean())
    for mode in ("none", "balance"):
        gauge = ts.loc[ts["rebalance"] == mode, "mean_overlap_gauge"].mean()
        values[macro_name("GaugeOverlapAdam", mode)] = number(gauge)
    return values


def _effect_macros(effects: pd.DataFrame) -> dict[str, str]:
    """5. Rebalancing and optimisation: the cells whose paired interval excludes zero, how many and which."""
    values = {}
    effects = with_settings(effects) if len(effects) else effects
    for measure, name in (("log_eval_loss", "Loss"), ("steps_to_target", "Time")):
        sel = effects[effects["measure"] == measure] if len(effects) else effects
        values[macro_name("EffectCells", name)] = number(len(sel))
        values[macro_name("EffectSignificant", name)] = number(int(sel["excludes_zero"].sum()) if len(sel) else 0)
        listed = [
            f"{SETTING_NAMES.get(r.task, r.task)}, {OPTIMIZER_NAMES.get(r.optimizer, r.optimizer)}, {r.rebalance}: "
            + interval_text({"mean": r.mean, "low": r.low, "high": r.high})
            for r in (sel[sel["excludes_zero"]].itertuples() if len(sel) else [])
        ]
        values[macro_name("EffectSignificantList", name)] = "; ".join(listed) or "none"
    return values


ALPHA = 0.05  # family-wise level of the Holm correction
MEASURES = {"log_eval_loss": "Loss", "steps_to_target": "Time"}  # paired effects: column -> macro word


def effect_tests(effects: pd.DataFrame) -> pd.DataFrame:
    """Per measure and (task and model, optimizer, mode) cell: n, mean, interval, p and the Holm decision within
    the measure."""
    effects = with_settings(effects)
    rows = []
    for measure in MEASURES:
        for (task, opt, mode), g in effects.groupby(["task", "optimizer", "rebalance"], sort=False):
            rows.append({"measure": measure, "task": task, "optimizer": opt, "rebalance": mode,
                         **estimate(g[measure]), "p": t_test_pvalue(g[measure])})  # fmt: skip
    tests = pd.DataFrame(rows)
    tests["holm"] = False
    for measure, g in tests.groupby("measure"):
        tests.loc[g.index, "holm"] = holm(g["p"].to_numpy(), ALPHA)
    return tests



# tables --------------------------------------------------------------------------------------------
def interval_cell(e: dict, fmt: str = ".2f") -> str:
    """'m [l, h]' with fixed decimals for a table cell ('n/a' when not measured)."""
    if not math.isfinite(e["mean"]):
        return "n/a"
    return f"{e['mean']:{fmt}} [{e['low']:{fmt}}, {e['high']:{fmt}}]".replace("-", "$-$")


def results_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per setting and optimizer (no rebalancing): the slope of log overlap on log H (chance: its own slope),
    the overlap over the chance level (means over H), and the converged runs of every mode. Raw ids kept."""
    good = with_settings(ok(summary))
    slopes, ratios = heads_slopes(good), chance_ratio(good)
    conv = with_settings(summary)
    rows = []
    for key in ordered(good["task"], list(SETTING_NAMES)):
        for opt in ordered(good.loc[good["task"] == key, "optimizer"], list(OPTIMIZER_NAMES)):
            s = slopes[(slopes["task"] == key) & (slopes["optimizer"] == opt)]
            r = ratios[(ratios["task"] == key) & (ratios["optimizer"] == opt)].groupby("seed")["ratio"].mean()
            c = conv[(conv["task"] == key) & (conv["optimizer"] == opt)]
            rows.append({"setting": key, "optimizer": opt, "slope": estimate(s["slope"]),
                         "chance_slope": s["chance_slope"].mean() if len(s) else math.nan, "ratio": estimate(r),
                         "converged": c["converged"].mean() if "converged" in c else math.nan})  # fmt: skip
    return pd.DataFrame(rows)


def results_latex(table: pd.DataFrame) -> str:
    """booktabs LaTeX of :func:`results_table`."""
    lines = [
        r"\begin{tabular}{llllr}",
        r"\toprule",
        r"setting & optimizer & slope on $\log H$ (chance) & overlap / chance & converged \\",
    ]
    for key, rows in table.groupby("setting", sort=False):
        lines.append(r"\midrule")
        for i, row in enumerate(rows.itertuples(index=False)):
            name = escape(SETTING_NAMES.get(key, key)) if i == 0 else ""
            slope = interval_cell(row.slope) if row.optimizer != "sgd" else "at rounding"
            chance = "" if not math.isfinite(row.chance_slope) else f" ({row.chance_slope:.2f})".replace("-", "$-$")
            ratio = interval_cell(row.ratio, ".2g" if row.optimizer == "sgd" else ".2f") if row.optimizer != "sgd" else "at rounding"
            conv = number(100 * row.converged, ".0f") + r"\%" if math.isfinite(row.converged) else "n/a"
            lines.append(" & ".join([name, escape(OPTIMIZER_NAMES.get(row.optimizer, row.optimizer)), slope + chance,
                                     ratio, conv]) + r" \\")  # fmt: skip
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)


def sources_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Real architectures, no rebalancing: per setting and optimizer the mean over runs (95% interval over seeds
    and H) of the whole-model overlap and of each source's part, next to the attention layers' own overlap."""
    good = with_settings(ok(summary))
    real = good[(good["model"] != "own") & (good["rebalance"] == "none")]
    rows = []
    for key in ordered(real["task"], list(SETTING_NAMES)):
        for opt in ordered(real.loc[real["task"] == key, "optimizer"], list(OPTIMIZER_NAMES)):
            g = real[(real["task"] == key) & (real["optimizer"] == opt)]
            row = {"setting": key, "optimizer": opt, "layers": estimate(g["mean_overlap_all"])}
            for column in [c for c in g.columns if c.startswith("mean_overlap_model")]:
                source = column.removeprefix("mean_overlap_model").removeprefix("_") or "all"
                row[source] = estimate(g[column])
            rows.append(row)
    return pd.DataFrame(rows)


def sources_latex(table: pd.DataFrame) -> str:
    """booktabs LaTeX of :func:`sources_table` (means only; the intervals are in the figure and the CSV)."""
    sources = [s for s in ("layers", "all", *SOURCES) if s in table.columns]
    head = " & ".join(escape(SOURCE_NAMES.get(s, s)) for s in sources)
    lines = [rf"\begin{{tabular}}{{ll{'r' * len(sources)}}}", r"\toprule", f"setting & optimizer & {head} \\\\"]
    for key, rows in table.groupby("setting", sort=False) if len(table) else []:
        lines.append(r"\midrule")
        for i, row in enumerate(rows.itertuples(index=False)):
            name = escape(SETTING_NAMES.get(key, key)) if i == 0 else ""
            cells = []
            for s in sources:
                e = getattr(row, s)
                cells.append("" if not isinstance(e, dict) or not math.isfinite(e["mean"]) else number(e["mean"], digits=2))
            lines.append(" & ".join([name, escape(OPTIMIZER_NAMES.get(row.optimizer, row.optimizer)), *cells]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)


__all__ = ["TASK_NAMES", "interval_text", "results_latex", "results_table", "setting", "sources_latex",
           "sources_table", "study_macros"]  # fmt: skip
