"""Fig. 2 rerun under SGD beside Adam, vanilla (gamma = 0) and focal (gamma = 1) runs.

Does the optimizer change the focal effect? Under Adam a constant per-step scale such as the focal
weight g is largely normalized away; under SGD it scales the step. Setting: the main Fig. 2 config
(``fig2-logprob-adam.toml``: log-prob surrogate, advantage R - mean R, K = 128,000, 1,000
steps) at N in {2, 16, 128, 1024, 8192} (fewer N than Fig. 2 to fit the reproduce budget; the
Adam runs, 4 seeds, are shared with Fig. 2), and the same runs with plain SGD (2 seeds each) at the
paper's learning rate 1e-2 and at 1 and 10: with SGD the log-prob gradient of an action is
proportional to its probability (about 1e-4 here), so lr 1e-2 barely moves the policy.
Panels: final Q_pos, final M_ret (P-26), and the focal effect M_ret(gamma=1) - M_ret(gamma=0).
Fast mode: N in {2, 128, 1024}, 1 seed, 100 steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote
from ._sim import CONFIG_DIR, run_configs, summarize

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Fig. 2 under SGD beside Adam, gamma 0 and 1"
IN_PAPER = False
#: 47 s measured 29 Nov 2026 in `make reproduce` (2 workers, empty cache, 2 cores).
COST_SECONDS = 47.0
#: its runs go to the shared run cache (``_sim.run_configs``): never beside another such figure
SHARED_RUNS = True


@dataclass(frozen=True)
class Params:
    config: Path = CONFIG_DIR / "fig2-logprob-adam.toml"
    n: tuple[int, ...] = (2, 16, 128, 1024, 8192)
    sgd_lr: tuple[float, ...] = (1e-2, 1.0, 10.0)
    sgd_seeds: int = 2
    fast_n: tuple[int, ...] = (2, 128, 1024)
    fast_steps: int = 100


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Mean and s.e. over seeds per (optimizer, lr, N, gamma, step) of q_pos, m_ret, mass_rare."""
    from fgrpo_theory.sim import load_sweep

    base = load_sweep(params.config)
    base["N"] = list(params.fast_n if fast else params.n)
    if fast:
        base.update(steps=params.fast_steps, seeds=1, log_every=params.fast_steps // 10)
    sgd = dict(base, optimizer="sgd", lr=list(params.sgd_lr))
    if not fast:
        sgd["seeds"] = params.sgd_seeds
    raw = pd.concat([run_configs(base), run_configs(sgd)], ignore_index=True)
    df = summarize(raw, by=("optimizer", "lr", "N", "gamma"))
    df["rule"] = raw["rule"].iloc[0]
    df["steps"] = int(raw["steps"].iloc[0])
    df["fast"] = fast
    return df


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Three panels against N; one color per optimizer/lr, solid gamma 0, dashed gamma 1."""
    from fgrpo_theory.plotting import DOUBLE_COLUMN, PALETTE, new_figure

    last = df["step"].max()
    d = df[df["step"] == last]
    fig = new_figure(DOUBLE_COLUMN, 2.5)
    axes = fig.subplots(1, 3)
    runs = sorted(d.groupby(["optimizer", "lr"]).groups.keys())
    colors = {r: PALETTE[k] for k, r in enumerate(runs)}

    def label(r: tuple[str, float]) -> str:
        return f"{'Adam' if r[0] == 'adam' else r[0].upper()}, lr {r[1]:g}"

    for ax, metric, ylabel in (
        (axes[0], "q_pos", r"final correct mass $Q_{pos}$"),
        (axes[1], "m_ret", r"final retained mass $M_{ret}$"),
    ):
        for r in runs:
            for gamma, ls in ((0.0, "-"), (1.0, "--")):
                e = d[(d["optimizer"] == r[0]) & (d["lr"] == r[1]) & (d["gamma"] == gamma)]
                e = e[e["metric"] == metric].sort_values("N")
                ax.errorbar(
                    e["N"],
                    e["mean"],
                    yerr=e["se"],
                    fmt=ls + "o",
                    ms=2.5,
                    color=colors[r],
                    lw=1.1,
                    elinewidth=0.6,
                    capsize=1,
                    label=label(r) if (gamma == 0.0 and metric == "q_pos") else None,
                )
        ax.set_xscale("log")
        ax.set_xlabel("group size N")
        ax.set_ylabel(ylabel)
        ax.set_ylim(-0.03, 1.05)
    axes[0].set_title("(a) correct mass")
    axes[1].set_title("(b) retained positive mass")
    axes[0].legend(loc="lower right", fontsize=5.5)
    axes[1].plot([], [], "-", color="0.3", label=r"$\gamma$ = 0")
    axes[1].plot([], [], "--", color="0.3", label=r"$\gamma$ = 1 (focal)")
    axes[1].legend(loc="center right", fontsize=5.5)
    ax = axes[2]
    m = d[d["metric"] == "m_ret"]
    for r in runs:
        e = m[(m["optimizer"] == r[0]) & (m["lr"] == r[1])]
        a = e[e["gamma"] == 0.0].set_index("N")
        b = e[e["gamma"] == 1.0].set_index("N")
        diff = (b["mean"] - a["mean"]).sort_index()
        se = np.sqrt(a["se"] ** 2 + b["se"] ** 2).reindex(diff.index)
        ax.errorbar(
            diff.index,
            diff.to_numpy(),
            yerr=se.to_numpy(),
            fmt="-o",
            ms=2.5,
            color=colors[r],
            lw=1.1,
            elinewidth=0.6,
            capsize=1,
            label=label(r),
        )
    ax.axhline(0, color="0.4", lw=0.6)
    ax.set_xscale("log")
    ax.set_xlabel("group size N")
    ax.set_ylabel(r"$M_{ret}(\gamma=1) - M_{ret}(\gamma=0)$")
    ax.set_title("(c) focal effect on retained mass")
    seeds = {
        label(r): int(d[(d["optimizer"] == r[0]) & (d["lr"] == r[1])]["seeds"].max()) for r in runs
    }
    seed_txt = ", ".join(f"{k}: {v}" for k, v in seeds.items())
    footnote(
        fig,
        f"Categorical simulation of {PAPER} appendix J (K = 128,000; {d['rule'].iloc[0]} "
        f"surrogate, advantage R - mean R, no weight decay), {int(d['steps'].iloc[0])} steps; "
        f"values at the last step, mean +- s.e. over seeds ({seed_txt}). SGD at the paper's lr "
        "1e-2 barely moves the policy (log-prob gradients scale with p ~ 1e-4); its curves lie "
        "under those of SGD lr 1.",
        width=170,
    )
    return fig
