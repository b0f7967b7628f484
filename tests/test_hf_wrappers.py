"""Multimodal wrappers (attnid.hf.mapping.wrappers): each maps its text model through that model's family and names
every tower the registered class builds in not_modelled (layers only); Emu3's registered class is its text model
alone (whole model). The self-check builds the registered class with its towers at the tiny size and measures the
attention modules of its text model only; one wrapper of each kind (a text_config section, the text model's keys
at the top) agrees by default, every wrapper under `pytest -m selfcheck` (tests/test_hf_selfcheck.py)."""

import pytest
import torch
from gauge_checks import gauge_spans_the_count

from attnid.errors import SpecError
from attnid.hf.check import attention_modules, check_config, real_class, tiny_config
from attnid.hf.coverage import counted, default_config
from attnid.hf.mapping import MAPPERS, model_spec, model_type, text_config
from attnid.hf.mapping.wrappers import FLAT, TEXT_MODELS, TOWERS
from attnid.model.counting import count_model
from attnid.model.real import SEQ_LEN, build_real_model

LAYERS_ONLY = sorted(mt for mt in TEXT_MODELS if TOWERS[mt])
DEFAULT_RUN = ("fuyu", "phi4_multimodal")  # a text_config section (Persimmon); the text keys at the top (Phi-3)


@pytest.mark.parametrize("mt", sorted(TEXT_MODELS))
def test_every_wrapper_counts_its_text_model_through_that_family(mt):
    cfg = default_config(mt)
    assert model_type(cfg) == mt
    text = cfg if mt in FLAT else text_config(cfg)
    text_type = TEXT_MODELS[mt] if mt in FLAT else text["model_type"]
    spec, own = model_spec(cfg), model_spec({**text, "model_type": text_type})
    assert spec.layer_specs == own.layer_specs
    towers = [key for key, _ in spec.not_modelled if key not in dict(own.not_modelled)]
    built = [key for key, _, _ in TOWERS[mt] if cfg.get(key) is not None]
    assert towers == built
    if spec.not_modelled:
        with pytest.raises(SpecError, match=f"^{spec.not_modelled[0][0]}:"):
            count_model(spec)
    assert counted(mt)[0] == ("layers only" if spec.not_modelled else "whole model")


def test_emu3_is_its_text_model_and_a_text_model_it_cannot_map_is_refused():
    assert counted("emu3") == ("whole model", "")
    tiny = tiny_config(default_config("emu3"))
    assert real_class(tiny) == "Emu3ForCausalLM"
    # the upper side of its certificate: Emu3ForCausalLM's config is the text model's (emu3_text_model, Llama's names)
    gauge_spans_the_count(tiny, count_model(model_spec(tiny, seq_len=SEQ_LEN)).unidentified)
    cfg = default_config("got_ocr2")
    with pytest.raises(SpecError, match="^text_config.model_type:"):
        model_spec({**cfg, "text_config": {**cfg["text_config"], "model_type": "gemma3"}})
    assert "gemma3n" not in MAPPERS


def test_the_check_measures_the_text_models_attention_not_the_towers():
    tiny = tiny_config(default_config("gemma3"))
    model = build_real_model(real_class(tiny), tiny).module
    assert type(model).__name__ == "Gemma3ForConditionalGeneration"
    assert any(type(m).__name__ == "SiglipAttention" for m in model.modules())
    found = attention_modules(model)
    assert [type(m).__name__ for _, m in found] == ["Gemma3Attention"] * model_spec(tiny, seq_len=SEQ_LEN).n_layers
    assert all(name.startswith("model.language_model.") for name, _ in found)


@pytest.mark.slow
@pytest.mark.parametrize("mt", DEFAULT_RUN)
def test_the_real_attention_modules_of_the_registered_class_agree(mt):
    torch.set_num_threads(1)
    rows = check_config(default_config(mt))
    assert rows[-1]["part"] == "whole model" and rows[-1]["verdict"] == "refused"
    for row in rows[:-1]:
        assert row["verdict"] == "agree" and row["measured"] == row["count"] and row["P"] == row["P_spec"], row
