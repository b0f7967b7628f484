"""The flags of the `attnid` command line (`attnid.cli`): one row per flag, mapping it onto one AttentionSpec field
(SPEC_FLAGS) or one `verify` option (VERIFY_FLAGS); the parser's options are generated from these rows."""

from __future__ import annotations

from dataclasses import dataclass

from .layer.spec_variants import QK_NORMS


@dataclass(frozen=True)
class Flag:
    """One command-line flag: the spec field (or verify option) it sets, how argparse reads it, its help."""

    dest: str  # the AttentionSpec field or the verify option
    flag: str
    type: type | None  # None: a switch (store_true)
    default: object
    help: str
    group: str = ""  # an argparse group title ('' = the parser itself)


VARIANTS = "modern variants (attnid.layer.counting_variants)"
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
    Flag("shared_key_dims", "--shared-key-dims", int, 0, "MLA: unrotated shared key dims (Kimi)", VARIANTS),
    Flag("shared_key_norm", "--shared-key-norm", None, False, "MLA: an RMSNorm with a gain on the shared key (Dots)",
         VARIANTS),
    Flag("raw_latent_query", "--raw-latent-query", None, False,
         "MLA: the query and output gate read the normed and the raw query latent (A.X-K2)", VARIANTS),
    Flag("index_topk", "--index-topk", int, 0, "a sparse-attention indexer keeps N keys a query (0: off)", VARIANTS),
    Flag("index_heads", "--index-heads", int, 0, "the indexer's heads (0: it reuses another layer's)", VARIANTS),
    Flag("index_head_dim", "--index-head-dim", int, 0, "the indexer's head size", VARIANTS),
    Flag("v_norm", "--v-norm", None, False, "an RMSNorm without a gain on every value head (Gemma-4)", VARIANTS),
    Flag("attention_chunk", "--chunk", int, 0, "causal attention in chunks of N positions (Llama-4; 0: off)", VARIANTS),
    Flag("temperature_floor", "--temperature-floor", int, 0,
         "queries at index i times 1 + s log(1 + floor((i + 1) / N)) (Llama-4's NoPE layers; 0: off)", VARIANTS),
    Flag("temperature_scale", "--temperature-scale", float, 0.1, "s of --temperature-floor (default 0.1)", VARIANTS),
    Flag("d_cross", "--cross", int, 0, "cross-attention: keys and values read encoder states this wide (0: off)",
         VARIANTS),
)  # fmt: skip
VERIFY_FLAGS = (
    Flag("seed", "--seed", int, 0, "seed of the random point and inputs (default 0)"),
    Flag("oversample", "--oversample", float, None, "Jacobian rows over the need, >= 1 (default 3 dense, 1.25 certificate)"),
    Flag("device", "--device", str, "cpu", "cpu or cuda (default cpu)"),
    Flag("threads", "--threads", int, None, "torch CPU threads (default: torch's choice)"),
    Flag("max_memory_gb", "--max-memory-gb", float, None, "refuse specs estimated above this (GiB)"),
    Flag("method", "--method", str, "auto", "auto | dense | certificate"),
    Flag("dense_max_params", "--dense-max-params", int, None, "largest P measured densely by --method auto"),
    Flag("positions", "--positions", str, "spread", "RoPE positions: spread (default) or contiguous"),
    Flag("progress", "--progress", None, False, "print the estimate and each stage to stderr"),
    Flag("no_invariance", "--no-invariance", None, False, "skip the half-batch and second-seed re-measurements"),
    Flag("outside_hypotheses", "--outside-hypotheses", None, False,
         "measure a spec that breaks a hypothesis of the count (e.g. --seq-len below T_min) against the naive count"),
)  # fmt: skip
FLAG_OF_FIELD = {f.dest: f.flag for f in SPEC_FLAGS}
FLAG_OF_OPTION = {f.dest: f.flag for f in VERIFY_FLAGS}
