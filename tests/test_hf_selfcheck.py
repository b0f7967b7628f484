"""The self-check (`attnid check`, attnid.hf.check) of every mapped model type, and what it must never do.

* The cheap audit, for every mapped type (its default config and every stored published config of it): the
  tiny config's real class, built on the meta device, has exactly the parameters of its ModelSpec, so no
  parameter is left out of a count.
* The full self-check of every mapped type (the real class's Jacobian against the count) is opt-in
  (`pytest -m selfcheck`, minutes each); the default run checks one representative type.
* It runs with the network blocked and never runs a config's remote code; a config it cannot shrink is
  refused, naming the key that keeps it large.
"""

import json
import socket
from pathlib import Path

import pytest
import torch
from transformers import CONFIG_MAPPING

from attnid.cli import main
from attnid.errors import SpecError
from attnid.hf import STORED, stored_config
from attnid.hf.check import MIN_EPS, check_config, meta_params, real_class, smallest_eps, tiny_config
from attnid.hf.coverage import checked_config, default_config
from attnid.hf.mapping import SUPPORTED_MODEL_TYPES, model_spec, model_type
from attnid.model.counting import count_model
from attnid.model.real import SEQ_LEN

MAPPED = [t for t in SUPPORTED_MODEL_TYPES if t in CONFIG_MAPPING]  # Falcon's legacy aliases are no transformers type
# The representative type whose full self-check runs by default: Qwen3 (q/k norms: weakly identified directions).
# GPT-2 (learned positions, LayerNorm, every bias; 76 s) and BERT (post-LN, a masked-LM head, eps 1e-12 measured
# at MIN_EPS; 141 s) run with the others under `-m selfcheck` (CI's budget); GPT-2's real whole model is still
# measured by default (tests/test_whole_model_real.py), BERT's in the pipeline's whole_model cases (bert_mlm).
DEFAULT_RUN = ("qwen3",)
SRC = Path(__file__).resolve().parents[1] / "src" / "attnid"


def configs_of(mt: str) -> list[tuple[str, dict]]:
    """(name, config) of a mapped type: its default config where it maps, and every stored config of the type."""
    found = []
    try:
        model_spec(default_config(mt))
        found.append(("default", default_config(mt)))
    except SpecError:
        pass
    for name in STORED:
        cfg = stored_config(name)
        if model_type(cfg) == mt or (mt == "falcon" and cfg["model_type"].startswith("RefinedWeb")):
            found.append((name, cfg))
    return found


@pytest.mark.parametrize("mt", MAPPED)
def test_the_tiny_class_has_exactly_the_parameters_of_its_spec(mt):
    configs = configs_of(mt)
    assert configs, f"{mt}: neither its default config nor a stored one maps"
    for name, cfg in configs:
        tiny = tiny_config(cfg)
        spec = model_spec(tiny, seq_len=SEQ_LEN)
        P = meta_params(real_class(tiny), tiny)
        if P != spec.n_params and spec.not_modelled:  # parameters the spec cannot hold (Apertus' xIELU alphas):
            with pytest.raises(SpecError, match=f"^{spec.not_modelled[0][0]}:"):  # the whole model is refused
                count_model(spec)
            continue
        assert P == spec.n_params, f"{mt} ({name}): {spec.label}"


def _assert_agrees(rows, where):
    assert rows and rows[-1]["part"] == "whole model", where
    for row in rows:
        assert row["verdict"] in ("agree", "refused"), (where, row)
        if row["verdict"] == "agree":
            assert row["P"] == row["P_spec"] and row["measured"] == row["count"], (where, row)


def _check(mt):
    torch.set_num_threads(1)
    where, cfg = checked_config(mt)
    _assert_agrees(check_config(cfg), f"{mt} ({where})")


@pytest.mark.slow
@pytest.mark.parametrize("mt", DEFAULT_RUN)
def test_self_check_of_representative_types(mt):
    _check(mt)


@pytest.mark.selfcheck
@pytest.mark.parametrize("mt", [t for t in MAPPED if t not in DEFAULT_RUN])
def test_self_check_of_every_mapped_type(mt):
    _check(mt)


def test_an_eps_too_small_to_resolve_changes_no_count():
    for name in ("bert_base", "qwen3_8b", "gemma3_27b", "olmo2_7b"):
        spec = model_spec(tiny_config(stored_config(name)), seq_len=SEQ_LEN)
        assert smallest_eps(spec) > 0
        scaled = spec.with_eps(MIN_EPS / smallest_eps(spec))
        assert smallest_eps(scaled) == pytest.approx(MIN_EPS)
        assert count_model(scaled) == count_model(spec), name


def _llama_config(tmp_path, **extra) -> Path:
    cfg = {k: v for k, v in stored_config("llama3_8b").items() if not k.startswith("_")}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, **extra}))
    return path


def test_the_check_runs_offline_and_never_runs_remote_code(tmp_path, monkeypatch, capsys):
    def no_network(*args, **kwargs):
        raise AssertionError("the self-check opened a network connection")

    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)

    import transformers.dynamic_module_utils as dynamic

    def no_remote_code(*args, **kwargs):
        raise AssertionError("the self-check loaded a config's remote code")

    monkeypatch.setattr(dynamic, "get_class_from_dynamic_module", no_remote_code)
    # remote code that would leave a mark if anything imported it (its folder is importable)
    marker = tmp_path / "remote_code_ran"
    for module in ("configuration_evil", "modeling_evil"):
        (tmp_path / f"{module}.py").write_text(f"open({str(marker)!r}, 'w').write('{module}')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    auto_map = {"AutoConfig": "configuration_evil.EvilConfig", "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    path = _llama_config(tmp_path, auto_map=auto_map, trust_remote_code=True)
    torch.set_num_threads(1)
    assert main(["check", "--hf-config", str(path), "--layers-only"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "verdict: agree"
    assert not marker.exists()


def test_no_source_passes_trust_remote_code():
    for path in SRC.rglob("*.py"):
        assert "trust_remote_code=" not in path.read_text(), path


def test_a_config_it_cannot_shrink_is_refused_naming_the_key(tmp_path, capsys):
    cases = [  # a size key the shrinker does not know, with a large value (next to a large token id)
        ("deepseek_v3", {"n_shared_experts": 4096}, "n_shared_experts"),
        ("bert_base", {"type_vocab_size": 20_000, "eos_token_id": 30_000}, "type_vocab_size"),
    ]
    for name, extra, key in cases:
        cfg = {k: v for k, v in stored_config(name).items() if not k.startswith("_")}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({**cfg, **extra}))
        assert main(["check", "--hf-config", str(path)]) == 2
        err = capsys.readouterr().err
        assert f"{key}: cannot shrink this config: {key} = {extra[key]:,}" in err, err
        assert len(err.strip().splitlines()) == 1, err
