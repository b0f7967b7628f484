"""The spec flags of the `attnid` command line (`attnid.cli`): one row of SPEC_FLAGS per AttentionSpec field, which
names its option, reads its value and generates its argparse option (count and verify alike)."""

from __future__ import annotations

from dataclasses import dataclass

from .spec_variants import QK_NORMS


@dataclass(frozen=True)
class Flag:
    """One command-line flag: the spec field (or verify option) it sets, how argparse reads it, its help."""

    dest: str  # the AttentionSpec field or the verify option
    flag: str
    type: type | None  # None: a switch (store_true)
    default: object
    help: str
    group: str = ""  # an argparse group title ('' = the parser itself)


VARIANTS = "modern variants (attnid.counting_variants)"
SPEC_FLAGS = (
    Flag("d_model", "--d-model", int, None, "model width d"),
    Flag("n_heads", "--heads", int, None, "query heads H"),
    Flag("n_kv_heads", "--kv-heads", int, None, "key/value groups G (default: heads; 1 = MQA)"),
    Flag("d_head_qk", "--d-head", int, None, "query/key head size (default: d_model / heads)"),
    Flag("d_head_v", "--d-head-v", int, None, "value head size (default: --d-head)"),
    Flag("rope_dims", "--rope", str, "none", "RoPE: none, half, full, or N rotated dims per head (even)"),
    Flag("rope_base", "--rope-base", float, 10000.0, "RoPE frequency base (default 10000)"),
    Flag("biases", "--bias", str, "none", "biases present: 'none' or a subset of the letters qkvo"),
    Flag("causal", "--causal", None, False, "causal mask"),
    Flag("seq_len", "--seq-len", int, None, "positions per sequence T (default: long enough for the count)"),
    Flag("qk_norm", "--qk-norm", str, "none", "q/k norm: " + " | ".join(QK_NORMS), VARIANTS),
    Flag("norm_eps", "--norm-eps", float, 1e-6, "eps of the q/k or latent norms (0: exact)", VARIANTS),
    Flag("sinks", "--sinks", None, False, "one learnable sink logit per head", VARIANTS),
    Flag("softcap", "--softcap", float, 0.0, "logit softcap c: c tanh(s / c) (0: off)", VARIANTS),
    Flag("sliding_window", "--window", int, 0, "sliding window in keys, causal (0: off)", VARIANTS),
    Flag("alibi", "--alibi", None, False, "ALiBi position bias (no RoPE)", VARIANTS),
    Flag("kv_lora_rank", "--kv-lora-rank", int, 0, "multi-head latent attention rank (0: off)", VARIANTS),
    Flag("q_lora_rank", "--q-lora-rank", int, 0, "MLA query latent rank (0: full query)", VARIANTS),
    Flag("sub_norm", "--sub-norm", None, False, "an RMSNorm with a gain across the heads' outputs (BitNet)", VARIANTS),
    Flag("output_gate", "--output-gate", str, "none", "gate on the heads' output: none | element | head", VARIANTS),
    Flag("gate_fn", "--gate-fn", str, "sigmoid", "the output gate's function: sigmoid | softplus", VARIANTS),
    Flag("gate_bias", "--gate-bias", None, False, "one bias per head inside the output gate (Beam)", VARIANTS),
    Flag("diff_lambda_init", "--diff-lambda-init", float, 0.0, "differential attention's lambda_init (0: off)", VARIANTS),
)
