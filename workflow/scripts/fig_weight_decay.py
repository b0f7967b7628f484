"""Figure `weight_decay`: the conserved quantities under weight decay (prediction against measurement)
and their drift under plain SGD against the learning rate.

Top: results/training/weight_decay.parquet: under SGD with weight decay lambda and learning rate eta
(no rebalancing), the size of the conserved imbalance ||I_t|| / ||I_0|| (query-key: Q^T Q - K^T K;
value-output: V^T V - O^T O) against the step, with the prediction (1 - eta lambda)^{2t} (dashed):
the weight-decay part of an update pairs with the orbit exactly through I. Bottom:
results/training/lr_study/summary.parquet: plain SGD, the drift ||I_S - I_0|| / scale after the
study's S steps against eta, log-log, with a slope-2 guide (each step changes I by O(eta^2)).
95% t-intervals over seeds (and head counts, top).
"""

import numpy as np
import pandas as pd
from figtraining import CI

from attnid.report.style import COLUMN_WIDTH, PALETTE, use_style

PARTS = {"query_key": "query-key", "value_output": "value-output"}


def plot(decay: pd.DataFrame, lr_summary: pd.DataFrame):
    import matplotlib.pyplot as plt
    import seaborn as sns

    use_style()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(COLUMN_WIDTH, 4.4))  # one column: the law above, the drift below
    decay = decay[decay["task"] == "teacher_student"]  # the law on the task whose loss sees one layer alone
    shown = decay.assign(part=decay["part"].map(PARTS))
    sns.lineplot(shown, x="step", y="measured", hue="part", palette=PALETTE[:2], errorbar=CI, ax=top)
    predicted = decay.groupby("step")["predicted"].mean()
    top.plot(predicted.index, predicted.to_numpy(), "k--", lw=0.9, label=r"$(1 - \eta\lambda)^{2t}$")
    top.set(yscale="log", xlabel="step $t$", ylabel=r"$\|I_t\| / \|I_0\|$", title="SGD + weight decay")
    top.legend()
    drift = lr_summary[~lr_summary["diverged"]].melt(
        id_vars=["seed", "lr"], value_vars=[f"final_drift_{p}" for p in PARTS], var_name="part", value_name="drift"
    )
    drift["part"] = drift["part"].str.removeprefix("final_drift_").map(PARTS)
    sns.lineplot(drift, x="lr", y="drift", hue="part", palette=PALETTE[:2], errorbar=CI, marker="o", ax=bottom)
    lr = np.sort(drift["lr"].unique())
    anchor = drift[drift["lr"] == lr[-1]]["drift"].mean()
    bottom.plot(lr, anchor * (lr / lr[-1]) ** 2, "k:", lw=0.9, label=r"slope 2 ($\propto \eta^2$)")
    bottom.set(
        xscale="log",
        yscale="log",
        xlabel=r"learning rate $\eta$",
        ylabel=r"drift $\|I_S - I_0\|$ / scale",
        title="plain SGD",
    )
    bottom.legend()
    return fig


if __name__ == "__main__" and "snakemake" in globals():
    from figlib import main

    main(snakemake, plot)
