"""The text corpus (attnid.training.corpus) and the text task (attnid.training.tasks.TextCorpus).

Built on the first files of pandas (a subset: each build takes well under a second): deterministic, split by
file with no file on both sides, pinned (version and text hash refuse by name), tokens that decode back to the
text they came from, a tokenizer trained twice in two processes the same; batches a pure function of (seed,
stream), a uniform predictor at log V, and own, Llama and GPT-2 trained a few steps through the batched trainer.
"""

import functools
import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from tokenizers import Tokenizer
from training_helpers import ROUNDING, one_thread  # noqa: F401 -- the fixture

from attnid.layer.spec import AttentionSpec
from attnid.training import corpus
from attnid.training.batched import train_batched
from attnid.training.runs import RunConfig
from attnid.training.tasks import STREAM_EVAL, STREAM_PROBE, STREAM_TRAIN, TextCorpus, generator
from attnid.workflow_config import semantic_errors

ROOT = Path(__file__).resolve().parents[1]
VERSION = corpus.installed_version("pandas")
SMALL = {"package": "pandas", "version": VERSION, "vocab_size": 300, "heldout_fraction": 0.2, "max_files": 40}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The small corpus, built and written (folder, Corpus)."""
    folder = tmp_path_factory.mktemp("corpus")
    result = corpus.build(SMALL)
    corpus.write(result, {k: folder / v for k, v in corpus.OUTPUTS.items()})
    return folder, result


def texts_by_split(manifest: dict) -> dict[str, list[str]]:
    root = corpus.package_root(manifest["package"])
    out = {"train": [], "heldout": []}
    for row in manifest["files"]:
        text = corpus.docstrings((root / row["path"]).read_bytes())
        if text:
            out[row["split"]].append(text)
    return out


def test_the_build_is_deterministic(built):
    folder, first = built
    again = corpus.build(SMALL)
    assert again.manifest == first.manifest and again.tokenizer == first.tokenizer
    assert np.array_equal(again.train, first.train) and np.array_equal(again.heldout, first.heldout)
    written = json.loads((folder / "manifest.json").read_text())
    assert written == first.manifest
    assert written["tokenizer_sha256"] == hashlib.sha256((folder / "tokenizer.json").read_bytes()).hexdigest()


TRAIN_TWICE = """
import hashlib, json, sys
from attnid.training import corpus
cfg = json.loads(sys.argv[1])
_, rows, texts = corpus.extract(cfg)
split = {r["path"]: r["split"] for r in rows}
tok = corpus.train_tokenizer([t for p, t in texts if split[p] == "train" and t], cfg["vocab_size"])
print(hashlib.sha256(tok.to_str().encode()).hexdigest())
"""


def test_the_tokenizer_trains_the_same_in_two_processes(built):
    """tokenizers' BPE trainer (parallel counts, hash maps seeded per process) gives the same vocab and merges."""
    cfg = SMALL | {"max_files": 60, "vocab_size": 400}
    digests = {subprocess.run([sys.executable, "-c", TRAIN_TWICE, json.dumps(cfg)], capture_output=True, text=True,
                              check=True).stdout.strip() for _ in range(2)}  # fmt: skip
    assert len(digests) == 1 and len(digests.pop()) == 64


def test_train_and_heldout_share_no_file_and_decode_to_their_texts(built):
    folder, result = built
    m = result.manifest
    splits = {s: {r["path"] for r in m["files"] if r["split"] == s} for s in ("train", "heldout")}
    assert not splits["train"] & splits["heldout"] and all(splits.values())
    assert len(m["files"]) == SMALL["max_files"] and m["n_files"] == {s: len(p) for s, p in splits.items()}
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    for split, texts in texts_by_split(m).items():
        ids = getattr(result, split)
        assert len(ids) == m["tokens"][split] and ids.dtype == np.uint16
        decoded = tokenizer.decode(ids.tolist(), skip_special_tokens=False)
        assert decoded == "".join(t + corpus.SEP for t in texts)  # every file of this split, no other


def test_tokens_decode_back_to_the_text_they_came_from(built):
    folder, result = built
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    sample = texts_by_split(result.manifest)["heldout"][0][:500] + "\n  naïve Σ → 数据\tend"  # beyond the bytes seen
    ids = tokenizer.encode(sample).ids
    assert tokenizer.decode(ids) == sample and max(ids) < result.manifest["vocab_size"] == SMALL["vocab_size"]


def test_the_split_reads_only_the_path(built):
    """More files move none of the others; the held-out share of many paths is near heldout_fraction."""
    fewer = corpus.extract(SMALL | {"max_files": 25})[1]
    assert fewer == built[1].manifest["files"][:25]
    paths = [f"module_{i}.py" for i in range(4000)]
    assert 0.18 < sum(corpus.split_of(p, 0.2) == "heldout" for p in paths) / len(paths) < 0.22


def test_another_version_or_text_refuses_naming_the_key():
    with pytest.raises(corpus.CorpusError, match=rf"^training\.corpus\.version: .*pandas 0\.0\.1.*{VERSION}$"):
        corpus.build(SMALL | {"version": "0.0.1"})
    wrong = "0" * 64
    with pytest.raises(corpus.CorpusError, match=rf"^training\.corpus\.sha256: .*{wrong}.*[0-9a-f]{{64}}$"):
        corpus.build(SMALL | {"sha256": wrong})
    with pytest.raises(corpus.CorpusError, match=r"^training\.corpus\.package: "):
        corpus.build(SMALL | {"package": "no_such_package_here"})
    with pytest.raises(corpus.CorpusError, match=r"^training\.corpus\.heldout_fraction: "):
        corpus.build(SMALL | {"max_files": 3})  # three small files, none held out


@functools.cache
def extracted_sha256(package: str, max_files: int | None) -> str:
    cfg = {"package": package, "version": VERSION, "heldout_fraction": 0.2, "max_files": max_files}
    return corpus.text_sha256(corpus.extract(cfg)[2])


@pytest.mark.parametrize("preset", ["config.yaml", "paper.yaml", "smoke.yaml"])
def test_each_preset_pins_the_installed_text(preset):
    """The presets' version and text hash are the installed pandas's (extraction only: about 4 s for all files)."""
    cfg = yaml.safe_load((ROOT / "config" / preset).read_text())["training"]["corpus"]
    assert cfg["version"] == VERSION
    assert cfg["sha256"] == extracted_sha256(cfg["package"], cfg.get("max_files"))


def test_batches_are_a_pure_function_of_seed_and_stream(built):
    folder, result = built
    a, b = TextCorpus(str(folder), 6, seed=3), TextCorpus(str(folder), 6, seed=3)
    for _ in range(3):
        assert torch.equal(a.train_batch(5).inputs, b.train_batch(5).inputs)
    fresh = TextCorpus(str(folder), 6, seed=3)
    first = fresh.train_batch(5).inputs
    offsets = torch.randint(0, len(result.train) - 6 + 1, (5,), generator=generator(3, STREAM_TRAIN))
    assert torch.equal(first, torch.from_numpy(result.train.astype(np.int64))[offsets[:, None] + torch.arange(6)])
    assert not torch.equal(first, fresh.train_batch(5).inputs)  # the stream moves on
    assert torch.equal(a.fixed_batch(7).inputs, TextCorpus(str(folder), 6, seed=3).fixed_batch(7).inputs)
    assert not torch.equal(a.fixed_batch(7).inputs, TextCorpus(str(folder), 6, seed=4).fixed_batch(7).inputs)
    heldout, probe = a.fixed_batch(7, STREAM_EVAL).inputs, a.fixed_batch(7, STREAM_PROBE).inputs
    text = result.heldout.astype(np.int64).tolist()
    windows = {tuple(text[i : i + 6]) for i in range(len(text) - 5)}
    assert all(tuple(w) in windows for w in heldout.tolist())  # held-out windows: the held-out files'
    assert not torch.equal(heldout, probe)


def test_a_uniform_predictor_scores_log_vocab_and_the_loss_reads_the_next_token(built):
    folder, result = built
    task = TextCorpus(str(folder), 8, seed=0)
    batch = task.fixed_batch(4)
    V = task.n_tokens
    assert V == result.manifest["vocab_size"] and math.isnan(task.loss_floor)
    assert task.per_sample_loss(torch.zeros(4, 8, V, dtype=torch.float64), batch.targets) == pytest.approx(
        torch.full((4,), math.log(V), dtype=torch.float64), rel=1e-14
    )
    perfect = torch.full((4, 8, V), -1e3, dtype=torch.float64)
    perfect[:, :-1].scatter_(2, batch.targets[:, 1:, None], 1e3)  # the logits at t put everything on token t + 1
    assert task.loss(perfect, batch).item() < 1e-12
    echo = torch.full((4, 8, V), -1e3, dtype=torch.float64).scatter_(2, batch.targets[:, :, None], 1e3)
    assert task.loss(echo, batch).item() > 100  # predicting the token itself is wrong


def test_a_text_run_needs_its_corpus_and_causal_attention(built):
    folder, _ = built
    with pytest.raises(ValueError, match="RunConfig.corpus"):
        RunConfig(task="text", attention=AttentionSpec(8, 2, causal=True))
    with pytest.raises(ValueError, match="RunConfig.attention.causal"):
        RunConfig(task="text", attention=AttentionSpec(8, 2), corpus=str(folder))
    with pytest.raises(corpus.CorpusError, match="RunConfig.corpus: no built corpus"):
        corpus.load(folder / "missing")
    entry = {"task": "text", "attention": {"d_model": 8}, "heads": [2]}
    errors = semantic_errors({"training": {"tasks": [entry]}})
    assert any("training.corpus" in e for e in errors) and any("tasks[0].attention.causal" in e for e in errors)


SETTINGS = [("own", AttentionSpec(8, 2, causal=True)),
            ("llama", AttentionSpec(8, 2, rope_dims="full", causal=True)),
            ("gpt2", AttentionSpec(8, 2, biases="qkvo", causal=True))]  # fmt: skip


@pytest.mark.parametrize("model, spec", SETTINGS, ids=[m for m, _ in SETTINGS])
def test_text_trains_batched_and_plain_sgd_stays_orthogonal(built, model, spec):
    """A few steps of plain SGD and Adam on the text: SGD's update is orthogonal to the orbit (at rounding, in
    every attention layer and, for real architectures, in the whole model), Adam's is not."""
    folder, _ = built
    base = RunConfig(task="text", model=model, attention=spec, corpus=str(folder), seq_len=6, batch=8, steps=6,
                     n_layers=1, mlp_ratio=2, eval_every=5, eval_batch=16, probe_batch=4, gauge_every=2)  # fmt: skip
    cfgs = [base.with_(algorithm="sgd", lr=0.3, name="sgd"), base.with_(algorithm="adam", lr=0.01, name="adam")]
    (sgd, sgd_summary), (adam, adam_summary) = train_batched(cfgs, progress=False)
    for summary in (sgd_summary, adam_summary):
        assert summary["diverged_step"] == -1 and math.isfinite(summary["final_eval_loss"])
        assert math.isnan(summary["loss_floor"])
    assert sgd["overlap_all"].max() < ROUNDING and adam["overlap_all"].mean() > 1e-2
    if model != "own":
        assert sgd["overlap_model"].max() < ROUNDING and adam["overlap_model"].max() > 1e-2
