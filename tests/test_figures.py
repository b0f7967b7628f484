"""Figures and notebooks: plotting from synthetic aggregated results.

The figure scripts live in workflow/scripts/ (Snakemake `script:` glue); each exposes
`plot(**tables) -> Figure`, tested here without Snakemake on small synthetic tables.
"""

import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attnid import AttentionSpec, count
from attnid.report.seeds import seed_band

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "workflow" / "scripts"
sys.path.insert(0, str(SCRIPTS))

import fig_architectures
import fig_ratio
import fig_spectrum
import fig_whole_model
from figure_checks import assert_printable

FIGURES = ["ratio", "architectures", "overlap", "loss", "conserved", "spectrum", "whole_model", "weight_decay",
           "preconditioner", "gauge", "rebalance_effect"]  # fmt: skip


@pytest.fixture(scope="module")
def ratios():
    """A small ratio grid in the columns of results/counting/ratios.csv, counted exactly."""
    rows, d = [], 16
    for heads, groups, rope, biases in itertools.product([1, 2, 4, 8], [1, 2, None], ["none", "half", "full"], ["none", "qkvo"]):
        groups = heads if groups is None else groups
        if heads % groups:
            continue
        k = d // heads
        p = {"none": 0, "half": k // 4 * 2, "full": k}[rope]
        spec = AttentionSpec(d, heads, groups, rope_dims=p, biases=biases)
        c = count(spec)
        rows.append(dict(label=spec.label, variant="MHA" if groups == heads else "GQA", d_model=d, n_heads=heads, n_kv_heads=groups,
                         d_head_qk=k, d_head_v=k, rope=rope, rope_dims=p, biases=biases, causal=False, total=c.total,
                         unidentified=c.unidentified, identified=c.identified, ratio=c.ratio, **c.breakdown))  # fmt: skip
    return pd.DataFrame(rows).drop_duplicates("label")


@pytest.fixture(scope="module")
def metrics():
    """Synthetic results/training/metrics.parquet: 2 tasks x 2 optimizers x 2 modes x 2 heads x 2 seeds."""
    frames = []
    for task, opt, mode, heads, seed in itertools.product(["teacher_student", "recall"], ["sgd", "adam"], ["none", "balance"], [2, 4], [0, 1]):
        steps = np.arange(0, 40, 4)
        for layer in [0] if task == "teacher_student" else [0, 1]:
            overlap = np.full(len(steps), 1e-16 if opt == "sgd" else 0.1 * (1 + seed + layer))
            frames.append(pd.DataFrame({
                "task": task, "optimizer": opt, "rebalance": mode, "heads": heads, "seed": seed, "layer": layer, "step": steps,
                "loss": np.exp(-steps / 20) + seed, "eval_loss": np.where(steps % 20 == 0, 1.0, np.nan), "overlap_all": overlap,
                "chance_all": 1 / heads, "drift_query_key": 1e-3 * steps, "drift_value_output": 2e-3 * steps,
            }))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def test_seed_band_averages_layers_then_takes_mean_and_range_over_seeds(metrics):
    band = seed_band(metrics, ["task", "optimizer", "rebalance", "heads"], "overlap_all")
    row = band[(band.task == "recall") & (band.optimizer == "adam") & (band.rebalance == "none") & (band.heads == 2) & (band.step == 0)]
    # layers 0 and 1 of seed s: 0.1 (1 + s) and 0.1 (2 + s) -> per-run mean 0.1 (1.5 + s); seeds 0, 1
    assert row["mean"].item() == pytest.approx(0.2)
    assert (row["low"].item(), row["high"].item()) == pytest.approx((0.15, 0.25))
    assert row["n_seeds"].item() == 2


def test_ratio_figure_draws_the_exact_counts_and_the_measured_points(ratios):
    points = ratios[["label", "ratio"]].rename(columns={"ratio": "ratio_measured"}).iloc[::3]
    fig = fig_ratio.plot(ratios, points)
    axes = fig.axes
    assert len(axes) == 3
    mha = ratios[(ratios.n_kv_heads == ratios.n_heads) & (ratios.rope == "none") & (ratios.biases == "none")].sort_values("n_heads")
    line = next(ln for ln in axes[0].lines if ln.get_label().startswith("MHA"))
    assert np.allclose(line.get_xdata(), mha.n_heads) and np.allclose(line.get_ydata(), mha.ratio)
    assert np.allclose(line.get_ydata(), 1 / (2 * mha.n_heads))  # the closed form of Proposition 1
    measured = np.concatenate([ln.get_ydata() for ax in axes for ln in ax.lines if ln.get_marker() == "o"])
    assert len(measured) > 0 and set(np.round(measured, 12)) <= set(np.round(points.ratio_measured, 12))
    gqa_labels = [ln.get_label() for ln in axes[0].lines]
    assert "GQA, $G = 1$" in gqa_labels and "GQA, $G = 2$" in gqa_labels


def test_architectures_figure_shows_the_identified_share():
    arch = pd.DataFrame({"model": ["A", "B"], "n_heads": [4, 8], "total": [100, 200], "identified": [75, 190], "model_unidentified": [25e6, 1e4]})
    fig = fig_architectures.plot(arch)
    dots = fig.axes[0].lines[0]
    assert np.allclose(sorted(dots.get_xdata()), [75.0, 95.0])


@pytest.fixture(scope="module")
def spectra():
    """Synthetic results/jacobian/spectra.csv: two specs, singular values falling to zero past the rank."""
    rows = []
    for label, P, N in (("d8_h2_g2_k4_v4_r0_bnone", 256, 64), ("d4_h2_g1_k6_v6_r2_bqkv", 140, 50)):
        sigma = np.r_[np.geomspace(1, 1e-3, P - N), np.full(N, 1e-17)]
        rows += [{"label": label, "index": i + 1, "sigma": s, "predicted_rank": P - N, "rank_rtol": 1e-10}
                 for i, s in enumerate(sigma)]  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def whole_model():
    """Synthetic results/tables/whole_model.csv: three models, one source (embeddings) far below a visible bar."""
    return pd.DataFrame({"name": ["A-1B", "B-7B", "C-70B"], "model": ["a", "b", "c"], "status": "ok", "ratio": [0.01, 0.002, 0.0007],
                             "unidentified": [1000, 2000, 4000], "src_attention": [800, 600, 1000], "src_residual_rotations": [100, 1300, 2900],
                             "src_norm_gain": [99, 100, 100], "src_embeddings": [1, 0, 0]})  # fmt: skip


def test_spectrum_legend_names_each_spec_in_words(spectra):
    fig = fig_spectrum.plot(spectra)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[0].startswith("$d=8$, $H=2$, no RoPE, no biases") and "$P = 256$, $N = 64$" in labels[0]
    assert "$G=1$" in labels[1] and "RoPE 2/6" in labels[1] and "biases qkv" in labels[1]
    assert_printable(fig, "jacobian_spectrum")


def test_whole_model_figure_names_the_sources_it_cannot_draw(whole_model):
    fig = fig_whole_model.plot(whole_model)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["attention", "stream rotations", "norm gain / bias"]
    assert "not drawn: embeddings, rest: at most 0.1%" in ax.get_xlabel()
    assert any("share of $P$" in t.get_text() for t in ax.texts)  # the right-hand column has a heading
    assert_printable(fig, "whole_model")


def test_ratio_and_architectures_figures_print_at_their_width(ratios):
    points = ratios[["label", "ratio"]].rename(columns={"ratio": "ratio_measured"})
    assert_printable(fig_ratio.plot(ratios, points), "ratio")
    arch = pd.DataFrame({"model": ["A", "B"], "n_heads": [4, 8], "total": [100, 200], "identified": [75, 190],
                             "model_unidentified": [25e6, 1e4]})  # fmt: skip
    fig = fig_architectures.plot(arch)
    assert any(t.get_text() == "identified\n(unidentified)" for t in fig.axes[0].texts)
    assert_printable(fig, "architectures")


def test_every_figure_has_a_script_and_a_report_caption():
    for name in FIGURES:
        assert (SCRIPTS / f"fig_{name}.py").is_file()
        assert len((ROOT / "workflow" / "report" / f"{name}.rst").read_text().split()) > 20


@pytest.mark.parametrize("name", ["01_counting", "02_jacobian", "03_training"])
def test_notebooks_are_stored_clean_with_language_info(name):
    nb = json.loads((ROOT / "notebooks" / f"{name}.py.ipynb").read_text())
    assert nb["metadata"]["language_info"]["name"] == "python"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert "snakemake.input" in "".join("".join(c["source"]) for c in code)


NOTEBOOKS = sorted(p.name.removesuffix(".py.ipynb") for p in (ROOT / "notebooks").glob("*.py.ipynb"))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebooks_are_paired_with_a_readable_script_and_have_a_parameter_cell(name):
    """jupytext pairing: notebooks/<name>.py (percent format) holds the same cells, so diffs are
    readable; the first code cell is tagged `parameters` and chooses the preset whose results it reads."""
    import jupytext

    notebook = jupytext.read(ROOT / "notebooks" / f"{name}.py.ipynb")
    script = ROOT / "notebooks" / f"{name}.py"
    assert script.is_file(), f"no paired script: jupytext --set-formats .py.ipynb,py:percent notebooks/{name}.py.ipynb"
    paired = jupytext.read(script)
    assert [c.source for c in notebook.cells] == [c.source for c in paired.cells], f"out of sync: jupytext --sync {script}"
    assert "py:percent" in notebook.metadata["jupytext"]["formats"]
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", []), "the first code cell is the parameter cell"
    assert "preset" in code[0].source
