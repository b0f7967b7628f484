"""The training study's figures, from small synthetic aggregated tables (no training, no Snakemake).

Each figure script exposes plot(**tables) -> Figure. Checked: every panel has data (no empty
panel), intervals are the 95% t-intervals over seeds, the chance line is sqrt(dim T / P), and a
diverged run is named under the figure.
"""

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))

import fig_conserved
import fig_gauge
import fig_loss
import fig_overlap
import fig_preconditioner
import fig_rebalance_effect
import fig_sources
import fig_weight_decay
from figtraining import band
from figure_checks import assert_printable

from attnid.training import analysis

SETTINGS, OPTIMIZERS, MODES, HEADS, SEEDS = (
    [("teacher_student", "own"), ("recall", "own"), ("recall", "llama"), ("markov", "gpt2")],
    ["sgd", "adam", "adam_shared", "sgd_momentum"],
    ["none", "project", "balance"],
    [1, 2, 4],
    [0, 1, 2],
)
SOURCES = {"llama": ["attention", "mlp_hidden", "norm_gain", "residual_rotations"],
           "gpt2": ["attention", "norm_gain", "norm_bias", "centring_readers", "centring_writers"]}  # fmt: skip


@pytest.fixture(scope="module")
def summary():
    rows = []
    for (task, model), opt, mode, heads, seed in itertools.product(SETTINGS, OPTIMIZERS, MODES, HEADS, SEEDS):
        overlap = 1e-16 if opt == "sgd" or mode == "project" else 0.3 / math.sqrt(heads) * (1 + 0.1 * seed)
        row = {"task": task, "model": model, "optimizer": opt, "rebalance": mode, "heads": heads, "seed": seed, "algorithm": opt, "lr": 0.1, "weight_decay": 0.0,
               "mean_overlap_all": overlap, "mean_overlap_gauge": 2 * overlap, "chance_all": math.sqrt(1 / (2 * heads)),
               "final_eval_loss": 0.1 * (1 + seed), "converged": seed < 2, "diverged": (task, model, opt, mode, heads, seed) == ("recall", "own", "adam", "none", 4, 2)}  # fmt: skip
        if model != "own":
            row["mean_overlap_model"] = 1.5 * overlap
            row |= {f"mean_overlap_model_{s}": overlap / (1 + i) for i, s in enumerate(SOURCES[model])}
        rows.append(row)
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def metrics():
    frames = []
    for (task, model), opt, mode, seed in itertools.product(SETTINGS, OPTIMIZERS, MODES, SEEDS):
        steps = np.arange(0, 30)
        for layer in [0] if task == "teacher_student" else [0, 1]:
            frames.append(pd.DataFrame({"task": task, "model": model, "optimizer": opt, "rebalance": mode, "heads": 4, "seed": seed, "layer": layer, "step": steps,
                                            "loss": np.exp(-steps / 10) * (1 + seed), "eval_loss": np.where(steps % 10 == 0, 1.0 + seed, np.nan),
                                            "drift_query_key": 1e-3 * (steps + 1) * (1 + seed), "drift_value_output": 2e-3 * (steps + 1)}))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def assert_no_empty_panel(fig):
    for ax in (ax for ax in fig.axes if ax.get_visible()):
        assert ax.lines or ax.collections, f"empty panel {ax.get_title()!r}"
        assert not any(t.get_text() == "not run" for t in ax.texts)


def test_overlap_figure_draws_every_task_with_the_chance_level(summary):
    fig = fig_overlap.plot(summary)
    assert len([ax for ax in fig.axes if ax.get_visible()]) == len(SETTINGS)
    assert_no_empty_panel(fig)
    chance = next(ln for ln in fig.axes[0].lines if "chance" in ln.get_label())
    assert np.allclose(chance.get_ydata(), np.sqrt(1 / (2 * np.array(HEADS))))
    assert "1 diverged run(s)" in " ".join(t.get_text() for t in fig.texts)


def test_band_is_the_t_interval_over_seeds(metrics):
    b = band(metrics[metrics["task"] == "teacher_student"], ["optimizer", "rebalance"], "loss")  # one model
    row = b[(b["optimizer"] == "adam") & (b["rebalance"] == "none") & (b["step"] == 0)].iloc[0]
    assert (row["low"], row["high"]) == pytest.approx(analysis.t_interval([1.0, 2.0, 3.0]))


@pytest.mark.parametrize("module", [fig_preconditioner, fig_gauge, fig_sources])
def test_summary_figures_have_no_empty_panel(module, summary):
    assert_no_empty_panel(module.plot(summary))


def test_curve_figures_have_no_empty_panel(metrics, summary):
    uneven = metrics[
        ~((metrics["task"] == "recall") & (metrics["model"] == "own") & (metrics["optimizer"] == "sgd_momentum"))
    ]  # a task without one optimizer: its panel hidden, not drawn empty
    assert_no_empty_panel(fig_loss.plot(uneven, summary))
    assert_no_empty_panel(fig_conserved.plot(metrics, summary))


def test_loss_figure_compares_the_settings_trained_under_several_modes_and_fits_a_page(metrics, summary):
    """A setting trained under one rebalancing mode has no row; eight rows of settings still fit one page."""
    one_mode = metrics[(metrics["task"] == "markov") & (metrics["rebalance"] == "none")].assign(model="mixtral")
    fig = fig_loss.plot(pd.concat([metrics, one_mode], ignore_index=True), summary)
    rows = {ax.get_ylabel().split("($H")[0] for ax in fig.axes if ax.get_visible() and ax.get_ylabel()}
    assert len(rows) == len(SETTINGS) and not any("Mixtral" in r for r in rows)
    renamed = {("teacher_student", "own"): ("teacher_student_fixed_head", "own"), ("recall", "own"): ("recall_fixed_head", "own"),
               ("recall", "llama"): ("markov", "llama"), ("markov", "gpt2"): ("text", "gpt2")}  # fmt: skip
    other = metrics.copy()
    other[["task", "model"]] = [renamed[k] for k in zip(metrics["task"], metrics["model"])]
    many = pd.concat([metrics, other], ignore_index=True)  # 8 settings, each under 3 modes
    assert_printable(fig_loss.plot(many, summary), "loss")


def test_weight_decay_and_effect_figures(summary):
    steps = np.arange(20)
    decay = pd.concat([pd.DataFrame({"task": "teacher_student", "model": "own", "optimizer": "sgd_wd", "rebalance": "none", "heads": 2, "seed": s, "part": part, "step": steps,
                                         "measured": 0.99 ** (2 * (steps + 1)) * (1 + 0.01 * s), "predicted": 0.99 ** (2 * (steps + 1))})
                       for s in SEEDS for part in ("query_key", "value_output")])  # fmt: skip
    lr = pd.DataFrame([{"seed": s, "lr": lr, "final_drift_query_key": lr**2 * (1 + s), "final_drift_value_output": 2 * lr**2, "diverged": False}
                       for s in SEEDS for lr in (0.1, 0.2, 0.4)])  # fmt: skip
    assert_no_empty_panel(fig_weight_decay.plot(decay, lr))
    effects = analysis.paired_differences(summary.assign(steps_to_target=summary["seed"] * 1.0))
    assert_no_empty_panel(fig_rebalance_effect.plot(effects))


def test_overlap_figure_keeps_every_optimizer_visible(summary):
    """Each optimizer has its own marker and its points at one H sit apart from the others' (no marker hidden)."""
    fig = fig_overlap.plot(summary)
    lines = [ln for ln in fig.axes[0].lines if "chance" not in ln.get_label() and len(ln.get_xdata())]  # teacher-student
    markers = [ln.get_marker() for ln in lines]
    assert len(set(markers)) == len(markers) == 3  # adam, adam_shared, sgd_momentum (plain SGD left out)
    xs = np.array([ln.get_xdata() for ln in lines])
    assert (np.diff(np.sort(xs, axis=0), axis=0) > 0).all()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    chance = fig.legends[0].legend_handles[legend.index(next(t for t in legend if "chance" in t))]
    assert chance.get_linestyle() == "--" and chance.get_marker() == "_"


def test_gauge_figure_shows_plain_sgd(summary):
    fig = fig_gauge.plot(summary)
    assert "SGD" in [t.get_text() for t in fig.axes[0].get_xticklabels()]


def test_training_figures_print_at_their_width_with_readable_text(summary, metrics):
    assert_printable(fig_overlap.plot(summary), "overlap")
    assert_printable(fig_preconditioner.plot(summary), "preconditioner")
    assert_printable(fig_gauge.plot(summary), "gauge")
    assert_printable(fig_loss.plot(metrics, summary), "loss")
    assert_printable(fig_conserved.plot(metrics, summary), "conserved")
    assert_printable(fig_sources.plot(summary), "sources")
    effects = analysis.paired_differences(summary.assign(steps_to_target=summary["seed"] * 1.0))
    assert_printable(fig_rebalance_effect.plot(effects), "rebalance_effect")
    steps = np.arange(20)
    decay = pd.concat([pd.DataFrame({"task": "teacher_student", "model": "own", "optimizer": "sgd_wd", "rebalance": "none", "heads": 2, "seed": s,
                                     "part": part, "step": steps, "measured": 0.99 ** (2 * steps), "predicted": 0.99 ** (2 * steps)})
                       for s in SEEDS for part in ("query_key", "value_output")])  # fmt: skip
    lr = pd.DataFrame([{"seed": s, "lr": lr, "final_drift_query_key": lr**2, "final_drift_value_output": 2 * lr**2, "diverged": False}
                       for s in SEEDS for lr in (0.1, 0.2, 0.4)])  # fmt: skip
    assert_printable(fig_weight_decay.plot(decay, lr), "weight_decay")
