"""Attention configurations of real models, from their published hyperparameters.

Each entry gives one layer's AttentionSpec and the number of layers L; counts are per layer
(attnid.counting.count) and per model: model_total = L P, model_unidentified = L N, attention
parameters only (embeddings, MLPs and norms are not counted here). No torch.
Position encoding: learned absolute (GPT-2) or absolute sinusoidal/learned (BERT) positions are
added to the residual stream before attention, so the layer itself has no RoPE.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .counting import count
from .spec import AttentionSpec


@dataclass(frozen=True)
class Architecture:
    name: str
    n_layers: int
    spec: AttentionSpec
    source: str  # where the hyperparameters come from


ARCHITECTURES = [
    # Radford et al. 2019, "Language Models are Unsupervised Multitask Learners", Table 2, and the released
    # config (n_embd 768, n_head 12, n_layer 12); c_attn and c_proj carry biases.
    Architecture("GPT-2 small", 12, AttentionSpec(768, 12, biases="qkvo", causal=True), "Radford et al. 2019, Table 2"),
    # Same paper: GPT-2 XL has d = 1600, 25 heads of 64, 48 layers.
    Architecture("GPT-2 XL", 48, AttentionSpec(1600, 25, biases="qkvo", causal=True), "Radford et al. 2019, Table 2"),
    # Devlin et al. 2019, "BERT", section 3: BERT-base L=12, H=768, A=12; linear layers with biases; bidirectional.
    Architecture("BERT-base", 12, AttentionSpec(768, 12, biases="qkvo"), "Devlin et al. 2019, Sec. 3"),
    # Touvron et al. 2023, "Llama 2" (Table 1: GQA only for 34B/70B) with the sizes of LLaMA-1 (Touvron et al.
    # 2023a, Table 2) and the released params.json: 7B d=4096, 32 heads, 32 layers; no biases; full-head RoPE.
    Architecture(
        "LLaMA-2-7B", 32, AttentionSpec(4096, 32, rope_dims=128, causal=True), "Touvron et al. 2023; params.json"
    ),
    # Llama 2 70B, released params.json: d=8192, 64 heads, 8 KV heads (GQA), 80 layers.
    Architecture(
        "LLaMA-2-70B", 80, AttentionSpec(8192, 64, 8, rope_dims=128, causal=True), "Touvron et al. 2023; params.json"
    ),
    # Jiang et al. 2023, "Mistral 7B", Table 1: dim 4096, n_heads 32, n_kv_heads 8, head_dim 128, 32 layers.
    Architecture(
        "Mistral-7B", 32, AttentionSpec(4096, 32, 8, rope_dims=128, causal=True), "Jiang et al. 2023, Table 1"
    ),
    # Almazrouei et al. 2023, "The Falcon Series of Open Language Models", and the released config.json:
    # d=4544, 71 heads of 64, multi-query (1 KV head), 32 layers, rotary, no biases.
    Architecture(
        "Falcon-7B", 32, AttentionSpec(4544, 71, 1, rope_dims=64, causal=True), "Almazrouei et al. 2023; config.json"
    ),
    # Yang et al. 2024, "Qwen2 Technical Report", Table 1 and the released config: hidden 3584, 28 query heads,
    # 4 KV heads, head 128, 28 layers; q/k/v projections with bias, output projection without; RoPE.
    Architecture(
        "Qwen2-7B",
        28,
        AttentionSpec(3584, 28, 4, rope_dims=128, biases="qkv", causal=True),
        "Yang et al. 2024, Table 1",
    ),
    # Wang & Komatsuzaki 2021, GPT-J-6B released config: d=4096, 16 heads of 256, rotary_dim 64 (partial RoPE),
    # 28 layers, no attention biases.
    Architecture("GPT-J-6B", 28, AttentionSpec(4096, 16, rope_dims=64, causal=True), "Wang & Komatsuzaki 2021, config"),
    # Biderman et al. 2023, "Pythia", Table 1 and GPT-NeoX configs: Pythia-1.4B d=2048, 16 heads of 128,
    # 24 layers, rotary_pct 0.25 (32 of 128 dims), q/k/v and output biases.
    Architecture(
        "Pythia-1.4B",
        24,
        AttentionSpec(2048, 16, rope_dims=32, biases="qkvo", causal=True),
        "Biderman et al. 2023, Table 1",
    ),
]


def architecture_table(architectures=ARCHITECTURES) -> pd.DataFrame:
    """One row per model: spec fields, per-layer counts and per-model attention totals."""
    rows = []
    for arch in architectures:
        c = count(arch.spec)
        rows.append(
            {
                "model": arch.name,
                "source": arch.source,
                "n_layers": arch.n_layers,
                **arch.spec.to_row(label=False),
                **c.to_dict(flat=True),
                "model_total": arch.n_layers * c.total,
                "model_unidentified": arch.n_layers * c.unidentified,
                "model_identified": arch.n_layers * c.identified,
            }
        )
    return pd.DataFrame(rows)
