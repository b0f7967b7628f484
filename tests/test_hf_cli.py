"""`attnid count --hf-config PATH` and `--model NAME`: per-layer and per-model counts of a real config, refusals by name."""

import json

from attnid.cli import main
from attnid.hf import model_spec, stored_config
from attnid.model import count_attention_layers


def run(capsys, *argv):
    code = main(["count", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_hf_config_json_has_layer_attention_layers_and_other_layers(capsys, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in stored_config("gemma3_27b").items() if not k.startswith("_")}))
    code, out, _ = run(capsys, "--hf-config", str(path), "--json")
    result = json.loads(out)
    assert code == 0
    keys = {"total", "unidentified", "identified", "ratio", "breakdown", "weakly_identified"}
    assert keys <= set(result["layer"]) and keys <= set(result["attention_layers"])
    assert "whole_model" not in result and result["model_type"] == "gemma3_text"
    # every layer has the same parameters; sliding and global layers differ in spec only
    assert result["attention_layers"]["total"] == 62 * result["layer"]["total"]
    assert result["attention_layers"]["n_layers"] == 62
    assert len(result["other_layers"]) == 62 - 52  # global layers 5, 11, ..., 59 differ from the sliding layer 0
    assert result["attention_layers"]["weakly_identified"] == 62 * (32 + 16)  # per-head q/k norm scales


def test_model_name_matches_count_attention_layers(capsys):
    code, out, _ = run(capsys, "--model", "llama3_8b", "--json")
    result = json.loads(out)
    assert code == 0 and result["name"] == "LLaMA-3-8B" and "huggingface.co" in result["source"]
    summed = count_attention_layers(model_spec(stored_config("llama3_8b")))
    assert result["attention_layers"]["unidentified"] == summed.unidentified


def test_refusals_name_the_flag_or_the_config_key(capsys, tmp_path):
    code, _, err = run(capsys, "--model", "t5")
    assert code == 2 and "--model:" in err and "llama3_8b" in err
    code, _, err = run(capsys, "--hf-config", str(tmp_path / "missing.json"))
    assert code == 2 and "--hf-config:" in err
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**stored_config("bert_base"), "position_embedding_type": "relative_key"}))
    code, _, err = run(capsys, "--hf-config", str(path))
    assert code == 2 and "position_embedding_type:" in err and len(err.strip().splitlines()) == 1
    assert str(path) in err  # the file, the key and the value
    code, _, err = run(capsys)
    assert code == 2 and "--d-model" in err


def test_variant_flags_count_and_verify(capsys):
    base = ["--d-model", "16", "--heads", "4", "--kv-heads", "2", "--rope", "full", "--causal"]
    code, out, _ = run(capsys, *base, "--qk-norm", "rms_head", "--json")
    result = json.loads(out)
    assert code == 0 and (result["unidentified"], result["weakly_identified"]) == (34, 6)
    code, _, err = run(capsys, *base, "--window", "1")
    assert code == 2 and "--window:" in err
    code, _, err = run(capsys, "--d-model", "16", "--heads", "4", "--rope", "full", "--alibi")
    assert code == 2 and "--alibi:" in err
    code = main(["verify", *base, "--bias", "qkvo", "--sinks", "--no-invariance", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["measured"] == result["predicted"] == 40
