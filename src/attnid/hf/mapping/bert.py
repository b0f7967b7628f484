"""BERT as BertForMaskedLM (the model its config's `architectures` names): learned absolute positions,
token-type embeddings (every token_type_id 0, the forward's default), a LayerNorm on the embeddings,
post-LN blocks (x -> Norm(x + f(x))) with biases everywhere, no final norm, and the masked-LM head (a dense
d x d map with a bias, GELU, its own LayerNorm, then the tied unembedding with the decoder's bias)."""

from __future__ import annotations

from ...model.blocks import LayerSpec, MLPSpec
from ...spec import AttentionSpec
from .keys import head_sizes, mlp_kind, read_flag, read_float, read_int, read_str, refuse_if
from .names import attention_linear, linear, norm, same

MODEL_TYPES = ("bert",)


def bert(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    refuse_if(
        cfg,
        "position_embedding_type",
        lambda v: v != "absolute",
        "relative position embeddings add parameters to the scores",
    )
    refuse_if(cfg, "is_decoder", bool, "decoder BERT is not modelled")
    d, H, _, _ = head_sizes(cfg)
    attention = AttentionSpec(d_model=d, n_heads=H, biases="qkvo")
    mlp = MLPSpec(
        read_int(cfg, "intermediate_size"), mlp_kind(read_str(cfg, "hidden_act", default="gelu"), False), True
    )
    tied = read_flag(cfg, "tie_word_embeddings", True)
    not_modelled = ()
    if not tied:  # measured: P and the Jacobian's count both V more than this description
        why = (
            "false: an untied BertForMaskedLM adds its decoder's own bias to the head's (two V-vectors seen only"
            " through their sum): not modelled"
        )
        not_modelled = (("tie_word_embeddings", why),)
    fields = {
        "positions": "learned", "norm": "layernorm", "norm_bias": True, "norm_eps": read_float(cfg, "layer_norm_eps", default=1e-12),
        "norm_position": "post", "tied": tied, "final_norm": False, "embedding_norm": True, "lm_head_bias": True,
        "token_types": read_int(cfg, "type_vocab_size", default=2, minimum=0), "mlm_head": True,
        "max_positions_default": 512, "not_modelled": not_modelled,
    }  # fmt: skip
    return [LayerSpec(attention, mlp)] * read_int(cfg, "num_hidden_layers"), fields


MAPPERS = dict.fromkeys(MODEL_TYPES, bert)


def bert_names(spec, cfg: dict) -> list[tuple]:
    """The class's parameters <-> the layout (`.names`): query/key/value/dense, the MLM head's transform."""
    p = "bert.embeddings"
    e = [same(f"{p}.word_embeddings.weight", "embed"), same(f"{p}.position_embeddings.weight", "pos")]
    e.append(same(f"{p}.token_type_embeddings.weight", "token_type"))
    norm(e, f"{p}.LayerNorm", "embed_norm", True)
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"bert.encoder.layer.{i}", f"layers.{i}", x.attention
        attention_linear(e, f"{hf}.attention.self", f"{fine}.attn", a, None, "query", "key", "value", "dense", f"{hf}.attention.output")
        norm(e, f"{hf}.attention.output.LayerNorm", f"{fine}.norm_1", True)
        e += [linear(f"{hf}.intermediate.dense.weight", f"{fine}.mlp.up"), same(f"{hf}.intermediate.dense.bias", f"{fine}.mlp.up_bias")]
        e += [linear(f"{hf}.output.dense.weight", f"{fine}.mlp.down"), same(f"{hf}.output.dense.bias", f"{fine}.mlp.down_bias")]
        norm(e, f"{hf}.output.LayerNorm", f"{fine}.norm_2", True)
    e += [linear("cls.predictions.transform.dense.weight", "mlm.dense"), same("cls.predictions.transform.dense.bias", "mlm.dense_bias")]
    norm(e, "cls.predictions.transform.LayerNorm", "mlm_norm", True)
    e.append(same("cls.predictions.bias", "unembed_bias"))
    return e


NAME_MAPS = {"bert": bert_names}

