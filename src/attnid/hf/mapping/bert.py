"""BERT as BertForMaskedLM (the model its config's `architectures` names): learned absolute positions,
token-type embeddings (every token_type_id 0, the forward's default), a LayerNorm on the embeddings,
post-LN blocks (x -> Norm(x + f(x))) with biases everywhere, no final norm, and the masked-LM head (a dense
d x d map with a bias, GELU, its own LayerNorm, then the tied unembedding with the decoder's bias).

Its relatives, each by how it differs from BERT (`transformers` 5.24, models/<type>/modeling_<type>.py; the
class checked is the type's registered causal LM, which with is_decoder false, every default config's, is the
bidirectional encoder under the same head):

    ernie                 BERT's classes; a task-type table added to the embeddings when use_task_id (off)
    bert-generation       no token types, no MLM transform: the tied unembedding and its bias
                          (BertGenerationOnlyLMHead)
    megatron-bert         pre-LN blocks (attention.ln, ln), a final norm (encoder.ln), no embedding norm
    roberta, xlm-roberta, camembert, data2vec-text
                          RoBERTa's positions: a real token's position id counts from padding_idx + 1 (the
                          tokens before it that are not the pad) and the pad token's is padding_idx, a row of
                          its own (ModelSpec.pad_token, pad_row), so a table of max_position_embeddings rows
                          takes max_position_embeddings - padding_idx - 1 tokens (`unread_position_rows`); the
                          layout's row t is the class's row t + padding_idx + 1, the pad's row last
    xmod                  RoBERTa with a bottleneck adapter per language after every MLP
    roberta-prelayernorm  RoBERTa with pre-LN blocks and a final norm
    xlm-roberta-xl        RoBERTa with pre-LN blocks, a final norm and no embedding norm
    electra               embeddings of width embedding_size projected to d (embeddings_project), a generator
                          head back in that width
    rembert               embeddings of input_embedding_size projected in, a head of output_embedding_size
    roc_bert              pronunciation and shape embeddings concatenated to the tokens' and mapped to d
    roformer              rotary q/k on whole heads (RoFormer's sinusoidal table, a parameter of the class), no
                          position table
    git                   GitForCausalLM (models/git/modeling_git.py): BERT's post-LN blocks as a causal decoder
                          (GitModel masks future text tokens), no token types, an output Linear with a bias; beside
                          it a CLIP vision encoder (git.image_encoder) and its projection (git.visual_projection)
                          whose image tokens the text attends to when pixel values are given: layers only
    xlm                   XLMWithLMHeadModel (models/xlm/modeling_xlm.py; XLMConfig's emb_dim, n_heads, n_layers):
                          BERT's post-LN blocks (MultiHeadAttention, q/k/v/out_lin biased; an MLP of 4 d, GELU or
                          ReLU by gelu_activation), causal by `causal`, no token types, the tied unembedding and its
                          bias (XLMPredLayer); a language table added only with langs given (n_langs > 1), fixed
                          sinusoidal positions and an adaptive softmax (asm) are not modelled; each sequence's length
                          counts its tokens that are not pad_index (pad_token_id), so a real token equal to it masks
                          the last position (the check's tiny model has no pad id); its forward takes that length
                          by .item(), which the whole-model Jacobian (vmapped over sequences) cannot run: layers only

Every relative's attention layer is BERT's (biased MHA), rotary in RoFormer's.
"""

from __future__ import annotations

from ...model.blocks import LayerSpec, MLPSpec
from ...layer.spec import AttentionSpec
from .keys import aliased, head_sizes, mlp_kind, read_flag, read_float, read_int, read_str, refuse_if
from .names import attention_linear, linear, norm, rows, same
from .real_attention import RealAttention

ROBERTA = ("roberta", "xlm-roberta", "camembert", "data2vec-text", "xmod", "roberta-prelayernorm", "xlm-roberta-xl")
MODEL_TYPES = ("bert", "ernie", "bert-generation", "megatron-bert", *ROBERTA, "electra", "rembert", "roc_bert",
               "roformer", "git", "xlm")
NO_TOKEN_TYPES = ("bert-generation", "git", "xlm")  # no token-type table and no MLM transform: the unembedding and a bias
PRE_LN = ("megatron-bert", "roberta-prelayernorm", "xlm-roberta-xl")  # a norm before each sublayer, one after the stack
NO_EMBEDDING_NORM = ("megatron-bert", "xlm-roberta-xl")
# model type -> (config key, why the whole model is not counted) for what is always there
LAYERS_ONLY = {
    "xmod": ("adapter_reduction_factor", "a bottleneck adapter per language in every layer: not modelled"),
    "electra": ("embedding_size", "factorised embeddings (embeddings_project) and a generator head: not modelled"),
    "rembert": ("input_embedding_size", "decoupled input and output embedding widths: not modelled"),
    "roc_bert": ("concat_input", "pronunciation and shape embeddings mapped in with the tokens': not modelled"),
    "roformer": ("embed_positions", "RoFormer's sinusoidal table is a parameter of the class: not modelled"),
    "git": ("vision_config", "a CLIP vision encoder (git.image_encoder) and its projection (git.visual_projection)"
            " beside the text decoder: not modelled"),
}  # fmt: skip


XLM_KEYS = {"emb_dim": "hidden_size", "n_heads": "num_attention_heads", "n_layers": "num_hidden_layers"}


def bert(cfg: dict, mt: str) -> tuple[list[LayerSpec], dict]:
    if mt == "xlm":
        cfg = aliased(cfg, XLM_KEYS)
        cfg = {**cfg, "intermediate_size": 4 * read_int(cfg, "hidden_size"),  # TransformerFFN(dim, 4 dim, dim)
               "hidden_act": "gelu" if read_flag(cfg, "gelu_activation", True) else "relu"}  # fmt: skip
    refuse_if(
        cfg,
        "position_embedding_type",
        lambda v: v != "absolute",
        "relative position embeddings add parameters to the scores",
    )
    refuse_if(cfg, "is_decoder", bool, "decoder BERT is not modelled")
    refuse_if(cfg, "rotary_value", bool, "RoFormer's rotary values: attention not counted")
    d, H, _, _ = head_sizes(cfg)
    rotary = {"rope_dims": d // H, "rope_base": 10000.0} if mt == "roformer" else {}
    causal = mt == "git" or (mt == "xlm" and read_flag(cfg, "causal", False))
    attention = AttentionSpec(d_model=d, n_heads=H, biases="qkvo", causal=causal, **rotary)
    mlp = MLPSpec(
        read_int(cfg, "intermediate_size"), mlp_kind(read_str(cfg, "hidden_act", default="gelu"), False), True
    )
    tied = read_flag(cfg, "tie_word_embeddings", mt != "rembert")
    fields = {
        "positions": "rope" if rotary else "learned", "norm": "layernorm", "norm_bias": True,
        "norm_eps": read_float(cfg, "layer_norm_eps", default=1e-12), "tied": tied,
        "token_types": 0 if mt in NO_TOKEN_TYPES else read_int(cfg, "type_vocab_size", default=2, minimum=0),
        "mlm_head": mt not in NO_TOKEN_TYPES, "lm_head_bias": True, "max_positions_default": 512,
        "not_modelled": _not_modelled(cfg, mt, tied), **_blocks(mt),
    }  # fmt: skip
    if mt in ROBERTA:  # RobertaEmbeddings.create_position_ids_from_input_ids: the pad reads row padding_idx
        fields["pad_token"] = read_int(cfg, "pad_token_id", default=1, minimum=0)
        fields["unread_position_rows"] = fields["pad_token"] + 1  # the pad's row last in the layout (`roberta_names`)
    return [LayerSpec(attention, mlp)] * read_int(cfg, "num_hidden_layers"), fields


def _blocks(mt: str) -> dict:
    pre = mt in PRE_LN
    return {"norm_position": "pre" if pre else "post", "final_norm": pre, "embedding_norm": mt not in NO_EMBEDDING_NORM}


XLM_LENGTHS_WHY = (
    "XLMModel.forward reads each sequence's length from its tokens (lengths.max().item()), which the whole-model"
    " Jacobian, vmapped over sequences, cannot run: the whole model is not measured (its attention layers are)"
)
# XLM's options the description does not hold: (key, is it on, why)
XLM_EXTRAS = (
    ("n_langs", lambda c: c.get("n_langs", 1) > 1 and c.get("use_lang_emb", True),
     "a language table added to the embeddings when langs are given (lang_embeddings): not modelled"),
    ("sinusoidal_embeddings", lambda c: bool(c.get("sinusoidal_embeddings")),
     "a fixed sinusoidal table held as a parameter: not modelled"),
    ("asm", lambda c: bool(c.get("asm")), "an adaptive softmax (AdaptiveLogSoftmaxWithLoss) as the head: not modelled"),
)  # fmt: skip


def _not_modelled(cfg: dict, mt: str, tied: bool) -> tuple:
    found = [LAYERS_ONLY[mt]] if mt in LAYERS_ONLY else []
    if mt == "xlm":
        found += [(key, why) for key, on, why in XLM_EXTRAS if on(cfg)] + [("pad_token_id", XLM_LENGTHS_WHY)]
    if mt == "ernie" and read_flag(cfg, "use_task_id", False):
        found.append(("use_task_id", "true: a task-type table added to the embeddings (row 0 read): not modelled"))
    if not tied and mt in ("bert", "ernie", "bert-generation", "megatron-bert", *ROBERTA):
        # measured (bert): P and the Jacobian's count both V more than this description; an untied RobertaLMHead
        # likewise lists lm_head.decoder.bias beside lm_head.bias (the tiny class's named_parameters)
        why = "false: the untied decoder's own bias beside the head's (two V-vectors, seen only through their sum)"
        if mt == "bert-generation":
            why = "false: the untied decoder has its own bias and lm_head.bias is left unused"
        found.append(("tie_word_embeddings", why + ": not modelled"))
    return tuple(found)


MAPPERS = dict.fromkeys(MODEL_TYPES, bert)
# XLM's tiny self-check model: pad id -1, which no token equals, kept by the real config (PAD_READS_POSITIONS), so
# every sequence is all real tokens (XLMModel.forward: lengths = (input_ids != pad_index).sum(1); a None pad fails)
TINY_KEYS = {"xlm": {"pad_token_id": -1, "_pad_reads_positions": True}}
# the base model's attribute, where the whole is counted (the RoBERTas: post-LN, tied; modeling_<type>.py)
PREFIX = {"bert": "bert", "ernie": "ernie", "bert-generation": "bert", "roberta": "roberta", "xlm-roberta": "roberta",
          "camembert": "roberta", "data2vec-text": "data2vec_text"}  # fmt: skip
# the tied table goes by the name of the module built first: XLM-RoBERTa's and CamemBERT's LM build their head first
TIED_AS_DECODER = ("xlm-roberta", "camembert")


def bert_names(spec, cfg: dict) -> list[tuple]:
    """The class's parameters <-> the layout (`.names`): query/key/value/dense, the MLM head's transform (BERT,
    ERNIE, the RoBERTas' lm_head) or BERT-Generation's tied decoder with its bias."""
    mt = cfg["model_type"]
    p = f"{PREFIX[mt]}.embeddings"
    e = [same("lm_head.decoder.weight" if mt in TIED_AS_DECODER else f"{p}.word_embeddings.weight", "embed")]
    e.append(_positions(f"{p}.position_embeddings.weight", spec))
    if spec.token_types:
        e.append(same(f"{p}.token_type_embeddings.weight", "token_type"))
    if spec.embedding_norm:
        norm(e, f"{p}.LayerNorm", "embed_norm", True)
    for i, x in enumerate(spec.layer_specs):
        hf, fine, a = f"{PREFIX[mt]}.encoder.layer.{i}", f"layers.{i}", x.attention
        attention_linear(e, f"{hf}.attention.self", f"{fine}.attn", a, None, "query", "key", "value", "dense", f"{hf}.attention.output")
        norm(e, f"{hf}.attention.output.LayerNorm", f"{fine}.norm_1", True)
        e += [linear(f"{hf}.intermediate.dense.weight", f"{fine}.mlp.up"), same(f"{hf}.intermediate.dense.bias", f"{fine}.mlp.up_bias")]
        e += [linear(f"{hf}.output.dense.weight", f"{fine}.mlp.down"), same(f"{hf}.output.dense.bias", f"{fine}.mlp.down_bias")]
        norm(e, f"{hf}.output.LayerNorm", f"{fine}.norm_2", True)
    if not spec.mlm_head:
        return e + [same("lm_head.bias", "unembed_bias")]
    head = ("lm_head.dense", "lm_head.layer_norm", "lm_head.bias") if mt in ROBERTA else (
        "cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.bias")
    e += [linear(f"{head[0]}.weight", "mlm.dense"), same(f"{head[0]}.bias", "mlm.dense_bias")]
    norm(e, head[1], "mlm_norm", True)
    e.append(same(head[2], "unembed_bias"))
    return e


def _positions(hf: str, spec) -> tuple:
    """The position table: the same rows, or with a pad's own row (RoBERTa) layout row t the class's row
    t + padding_idx + 1 (mod its rows), so that the pad's row padding_idx is the layout's last (`pad_row`)."""
    if spec.pad_row is None:
        return same(hf, "pos")
    n, shift = spec.max_positions, spec.max_positions - spec.pad_row + spec.pad_token
    return rows(hf, "pos", tuple((t + shift) % n for t in range(n)))


NAME_MAPS = dict.fromkeys(PREFIX, bert_names)


# Keys the config class leaves None though its model class needs them (transformers 5.24), filled so that the class
# builds (`attnid.hf.coverage.default_config`): XmodModel raises without a language (lang_ids or default_language;
# modeling_xmod.py), which XmodConfig leaves None: its one language, en_XX.
DEFAULT_GAPS = {"xmod": {"default_language": "en_XX"}}

# the attention module the module-level check builds (`.real_attention`): BertAttention also holds the block's
# residual LayerNorm, which the check replaces by the identity (the attention block alone)
REAL_ATTENTION = {"bert": RealAttention("bert", "BertAttention", fused=True, causal=False, attention_block_only=True)}

# an encoder the coverage lists beside the causal LMs, with the class its self-check builds (`attnid.hf.check`)
ENCODERS = {"bert": "BertForMaskedLM"}
