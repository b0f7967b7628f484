"""Figure `whole_model`: where the unidentified parameters of a real language model live.

Reads results/tables/whole_model.csv (one row per shipped config; attnid.hf.config_tables). One bar per
model the whole-model count covers: the unidentified parameters split by source (share of all
unidentified ones, %), grouped into attention (the layers' own symmetries), residual-stream rotations,
norm gains and biases, LayerNorm centring (reading and writing sides), MLP hidden units (dense and
routed experts' units, with a mixture of experts' router shift, and a parallel first block's MLP
table), and the rest
(embeddings, constants, unread rows). A group below VISIBLE (% of every model's unidentified parameters)
would be an invisible bar: it is left out of the bars and the legend and named in a note under the
axes with its largest share. Text on the right, under its heading: unidentified / P of the whole model.
"""

import numpy as np
import pandas as pd

from attnid.report.style import COLUMN_WIDTH, MIN_FONT_PT, PALETTE, use_style

VISIBLE = 0.5  # % of the bar: a group whose largest share is below this is named, not drawn

GROUPS = {
    "attention": [
        "src_attention",
        "src_parallel_constants",
        "src_constant_offsets",
        "src_latent_token_points",
        "src_qk_norm_token_points",
    ],
    "stream rotations": ["src_residual_rotations", "src_residual_scale", "src_skip_rotation"],
    "norm gain / bias": ["src_norm_gain", "src_norm_bias", "src_norm_bias_offsets", "src_mlm_head"],
    "LayerNorm centring": ["src_centring_readers", "src_centring_writers"],
    "MLP units, MoE router": ["src_mlp_hidden", "src_moe_hidden_units", "src_moe_router", "src_first_mlp_table"],
    "embeddings, rest": [
        "src_embeddings",
        "src_unread_positions",
        "src_pad_row",
        "src_embedding_norm",
        "src_token_types",
        "src_tied_shift",
        "src_head_bias_constants",
    ],
}


def plot(whole_model: pd.DataFrame):
    """Stacked horizontal bars of the unidentified parameters by source, one per model (a matplotlib Figure)."""
    import matplotlib.pyplot as plt

    use_style()
    df = whole_model[whole_model["status"] == "ok"].sort_values("ratio").reset_index(drop=True)
    shares = pd.DataFrame({g: df[[c for c in cols if c in df]].sum(axis=1) for g, cols in GROUPS.items()}).div(
        df["unidentified"], axis=0
    )
    y = np.arange(len(df))
    shown = [g for g in GROUPS if 100 * shares[g].max() >= VISIBLE]
    hidden = [g for g in GROUPS if g not in shown and shares[g].max() > 0]
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 1.5 + 0.2 * len(df)))
    left = np.zeros(len(df))
    for i, group in enumerate(GROUPS):
        if group in shown:
            ax.barh(y, 100 * shares[group], left=100 * left, color=PALETTE[i % len(PALETTE)], label=group, height=0.75)
            left += shares[group].to_numpy()
    side = ax.get_yaxis_transform()
    for yi, ratio in zip(y, df["ratio"]):
        ax.text(1.03, yi, f"{100 * ratio:.2f}%", transform=side, va="center", fontsize=MIN_FONT_PT)
    ax.text(1.03, len(df) - 0.45, "unidentified\nshare of $P$", transform=side, va="bottom", fontsize=MIN_FONT_PT)
    ax.set_yticks(y, df["name"] if "name" in df else df["model"])
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.6, len(df) - 0.4)
    note = "; ".join(f"{g}: at most {100 * shares[g].max():.2g}%" for g in hidden)
    ax.set_xlabel("share of the unidentified parameters (%)" + (f"\nnot drawn: {note}" if note else ""))
    ax.grid(axis="y", visible=False)
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.0), ncol=2)
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
