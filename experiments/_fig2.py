"""Shared compute and plot of the Fig. 2 simulation figures (one config file -> one figure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote
from ._sim import CONFIG_DIR, final_values, regimes, run_configs, summarize

__all__ = ["Fig2Params", "compute_fig2", "plot_fig2", "settings_text"]


@dataclass(frozen=True)
class Fig2Params:
    config: Path = CONFIG_DIR / "fig2-logprob-adam.toml"
    #: N of the step curves of panels (a) and (b).
    curve_n: tuple[int, ...] = (2, 256, 8192, 131072)
    #: Regime rule: regime II = grid N with final M_ret (gamma = 0) below this.
    regime_threshold: float = 0.5
    #: Fast preview: fewer N, one seed, fewer steps.
    fast_n: tuple[int, ...] = (2, 32, 256, 2048, 8192, 131072)
    fast_steps: int = 100
    fast_seeds: int = 1
    overrides: dict = field(default_factory=dict)


def settings_text(df: pd.DataFrame) -> str:
    """One line of simulator settings, read from the table's config columns."""
    r = df.iloc[0]
    wd = f", weight decay {r['weight_decay']:g}" if "weight_decay" in df else ""
    return (
        f"{r['rule']} surrogate, {r['optimizer']} (lr {r['lr']:g}{wd}), advantage "
        f"{r['advantage']}, {int(r['steps'])} steps, {int(df['seeds'].max())} seed(s) per point"
    )


def compute_fig2(params: Fig2Params, fast: bool = False) -> pd.DataFrame:
    """Run the config's sweep (fast: reduced N, steps, seeds) and summarize over seeds."""
    from fgrpo_theory.sim import load_sweep

    sweep = load_sweep(params.config)
    sweep.update(params.overrides)
    if fast:
        sweep.update(
            N=list(params.fast_n),
            steps=params.fast_steps,
            seeds=params.fast_seeds,
            log_every=max(1, params.fast_steps // 20),
        )
    raw = run_configs(sweep)
    by = ("N", "gamma", "optimizer", "lr")
    df = summarize(raw, by=by)
    for col in ("rule", "advantage", "weight_decay", "steps", "K"):
        df[col] = raw[col].iloc[0]
    df["fast"] = fast
    return df


def _draw_regimes(ax, bands: list[tuple[str, float, float]]) -> None:
    shades = {"I": "0.93", "II": "#F6D9C8", "III": "0.86"}
    for label, lo, hi in bands:
        ax.axvspan(lo, hi, color=shades[label], zorder=0, lw=0)
        ax.text(
            np.sqrt(lo * hi),
            0.995,
            label,
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="top",
            fontsize=7,
            weight="bold",
        )


def plot_fig2(df: pd.DataFrame, params: Fig2Params, title: str) -> Figure:
    """(a) Q_pos and (b) M_ret against step for four N; (c) final values against N, regimes."""
    from fgrpo_theory.plotting import DOUBLE_COLUMN, OKABE_ITO, PALETTE, new_figure

    fig = new_figure(DOUBLE_COLUMN, 2.5)
    axes = fig.subplots(1, 3, width_ratios=[1, 1, 1.25])
    gammas = sorted(df["gamma"].unique())
    styles = {g: ("-" if k == 0 else "--") for k, g in enumerate(gammas)}
    available = sorted(df["N"].unique())
    curve_n = [n for n in params.curve_n if n in available] or available[
        :: max(1, len(available) // 4)
    ]
    for ax, metric, ylabel, letter in (
        (axes[0], "q_pos", r"correct mass $Q_{pos}$", "a"),
        (axes[1], "m_ret", r"retained positive mass $M_{ret}$", "b"),
    ):
        for k, n in enumerate(curve_n):
            for g in gammas:
                d = df[(df["metric"] == metric) & (df["N"] == n) & (df["gamma"] == g)]
                d = d.sort_values("step")
                ax.plot(
                    d["step"],
                    d["mean"],
                    styles[g],
                    color=PALETTE[k],
                    lw=1.1,
                    label=f"N = {n:,}" if (g == gammas[0] and metric == "q_pos") else None,
                )
        ax.set_xlabel("training step")
        ax.set_ylabel(ylabel)
        ax.set_title(f"({letter}) {ylabel.split(' ')[-1]} against step")
    axes[0].legend(loc="best", fontsize=6)
    for g in gammas:
        axes[1].plot([], [], styles[g], color="0.3", label=rf"$\gamma$ = {g:g}")
    axes[1].legend(loc="best", fontsize=6)
    ax = axes[2]
    g0 = gammas[0]
    m0 = final_values(df, "m_ret", gamma=g0)
    bands = regimes(m0["N"].to_numpy(), m0["mean"].to_numpy(), params.regime_threshold)
    _draw_regimes(ax, bands)
    colors = {"q_pos": OKABE_ITO["blue"], "m_ret": OKABE_ITO["vermillion"]}
    names = {"q_pos": r"$Q_{pos}$", "m_ret": r"$M_{ret}$"}
    for metric in ("q_pos", "m_ret"):
        for g in gammas:
            d = final_values(df, metric, gamma=g)
            ax.errorbar(
                d["N"],
                d["mean"],
                yerr=d["se"],
                fmt=styles[g] + "o",
                ms=2.5,
                color=colors[metric],
                lw=1.1,
                elinewidth=0.6,
                capsize=1,
                label=names[metric] if g == g0 else None,
            )
    ax.set_xscale("log")
    ax.set_xlabel("group size N")
    ax.set_ylabel("value at the last step")
    ax.set_ylim(-0.02, 1.12)
    ax.set_title("(c) final values against N (regimes I, II, III)")
    ax.legend(loc="lower left", fontsize=6)
    for a in axes[:2]:
        a.set_ylim(-0.02, 1.02)
    fig.suptitle(title, fontsize=8.5)
    if bands:
        rule = (
            "Regimes from the data: II = the N range from the first to the last grid N whose "
            f"final M_ret at gamma = {g0:g} is below {params.regime_threshold:g} (boundaries at "
            "geometric midpoints); I = smaller N, III = larger N."
        )
    else:
        rule = (
            f"No grid N has final M_ret (gamma = {g0:g}) below {params.regime_threshold:g}: no "
            "collapse band, so no regimes are marked."
        )
    footnote(
        fig,
        f"Categorical simulation of {PAPER} appendix J: K = {int(df['K'].iloc[0]):,} actions "
        f"(anchor correct at logit 5, 9,999 correct at 3, 118,000 incorrect at 0), rewards +1/-1. "
        f"{settings_text(df)}; solid gamma = 0, dashed gamma = 1; (c) mean +- s.e. over seeds. "
        + rule,
        width=170,
    )
    return fig
