"""Expected-drift threshold of the log-prob update (theory.md section 6, our result).

For the policy-gradient surrogate with GRPO (population std) advantages and focal weight g, the
expected first-order change of a correct action is E[dp_j] = eta h p_j (p_j/mu - T), with
T = sum_C p^2/mu - sum_notC p^2/(1-mu) and h = E[g(X/N) sqrt(X(N-X))]/N: a correct action whose
share p_j/mu of the correct mass is below T loses mass in expectation while mu grows. T does not
depend on N or gamma; h (the size of the step) does. All numbers from
:func:`fgrpo_theory.mass.expected_logprob_drift`.

(a) The Fig. 2 structure (1 anchor + 9,999 equal rare correct actions, 118,000 equal incorrect
    actions) over (mu, anchor share a of the correct mass): the ratio of a rare action's share to
    T (below 1: rare correct actions lose mass in expectation); the Fig. 2 start is starred.
(b) A graded correct set (200 correct actions, logits evenly spaced in [0, 5]; 1,000 incorrect
    at one logit set to give mu): normalized expected change E[dp_j]/(eta h p_j) against the share.
(c) The step size h against N for gamma = 0 (solid) and 1 (dashed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote

__all__ = [
    "TITLE",
    "IN_PAPER",
    "COST_SECONDS",
    "Params",
    "PARAMS",
    "two_level_policy",
    "graded_policy",
    "compute",
    "plot",
]

TITLE = "Expected-drift threshold of correct actions (section 6)"
IN_PAPER = False
COST_SECONDS = 5.0  # estimated, full settings, 2 cores


@dataclass(frozen=True)
class Params:
    n_rare: int = 9_999
    n_incorrect: int = 118_000
    mu_grid: tuple[float, float, int] = (0.05, 0.95, 37)
    log10_anchor_share: tuple[float, float, int] = (-4.0, -0.01, 33)
    graded_correct: int = 200
    graded_incorrect: int = 1_000
    graded_logit_max: float = 5.0
    mus: tuple[float, ...] = (0.2, 0.5, 0.8)
    n_values: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    N: int = 8


PARAMS = Params()


def two_level_policy(mu: float, a: float, n_rare: int, n_incorrect: int) -> tuple:
    """Logits and correct mask: anchor with share a of the correct mass mu, n_rare equal rare
    correct actions, n_incorrect incorrect actions at logit 0 (correct actions first)."""
    c = mu * n_incorrect / (1.0 - mu)  # total exp-logit mass of the correct set
    z = np.zeros(1 + n_rare + n_incorrect)
    z[0] = np.log(a * c)
    z[1 : 1 + n_rare] = np.log((1.0 - a) * c / n_rare)
    corr = np.zeros(z.size, dtype=bool)
    corr[: 1 + n_rare] = True
    return z, corr


def graded_policy(mu: float, n_correct: int, n_incorrect: int, logit_max: float) -> tuple:
    """Correct logits evenly spaced in [0, logit_max]; incorrect at one logit giving mass 1 - mu."""
    zc = np.linspace(0.0, logit_max, n_correct)
    c = np.exp(zc).sum()
    zw = np.log(c * (1.0 - mu) / (mu * n_incorrect))
    z = np.concatenate([zc, np.full(n_incorrect, zw)])
    return z, np.arange(z.size) < n_correct


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Long table with ``panel`` in {"map", "graded", "h"} (fast: 3x coarser map)."""
    from fgrpo_theory.mass import expected_logprob_drift
    from fgrpo_theory.policy import paper_policy

    rows = []
    step = 3 if fast else 1
    mus = np.linspace(*params.mu_grid)[::step]
    shares = np.logspace(*params.log10_anchor_share)[::step]
    for mu in mus:
        for a in shares:
            z, corr = two_level_policy(mu, a, params.n_rare, params.n_incorrect)
            d = expected_logprob_drift(z, corr, params.N)
            rare_share = (1.0 - a) / params.n_rare
            thr = d.threshold_ratio
            rows.append(
                dict(
                    panel="map",
                    mu=mu,
                    anchor_share=a,
                    share=rare_share,
                    threshold=thr,
                    # T <= 0: no correct action loses mass (ratio +inf)
                    value=rare_share / thr if thr > 0 else np.inf,
                    gamma=0.0,
                    N=params.N,
                )
            )
    z, corr = paper_policy()
    d = expected_logprob_drift(z, corr, params.N)
    p = np.exp(z - z.max())
    p /= p.sum()
    rows.append(
        dict(
            panel="fig2_start",
            mu=d.mu,
            anchor_share=p[0] / d.mu,
            share=p[1] / d.mu,
            threshold=d.threshold_ratio,
            value=(p[1] / d.mu) / d.threshold_ratio,
            gamma=0.0,
            N=params.N,
        )
    )
    for mu in params.mus:
        z, corr = graded_policy(
            mu, params.graded_correct, params.graded_incorrect, params.graded_logit_max
        )
        d = expected_logprob_drift(z, corr, params.N)
        p = np.exp(z - z.max())
        p /= p.sum()
        share = p[corr] / d.mu
        norm = d.expected_dp[corr] / (d.lr * d.h * p[corr])
        for s, v in zip(share, norm, strict=True):
            rows.append(
                dict(
                    panel="graded",
                    mu=mu,
                    anchor_share=np.nan,
                    share=s,
                    threshold=d.threshold_ratio,
                    value=v,
                    gamma=0.0,
                    N=params.N,
                )
            )
        for gamma in (0.0, 1.0):
            for n in params.n_values:
                dn = expected_logprob_drift(z, corr, n, gamma=gamma)
                rows.append(
                    dict(
                        panel="h",
                        mu=mu,
                        anchor_share=np.nan,
                        share=np.nan,
                        threshold=dn.threshold_ratio,
                        value=dn.h,
                        gamma=gamma,
                        N=n,
                    )
                )
    df = pd.DataFrame(rows)
    df["fast"] = fast
    return df


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """(a) map of share/threshold, (b) normalized drift vs share, (c) h vs N."""
    from matplotlib.colors import TwoSlopeNorm

    from fgrpo_theory.plotting import DOUBLE_COLUMN, PALETTE, new_figure

    fig = new_figure(DOUBLE_COLUMN, 2.6)
    axes = fig.subplots(1, 3, width_ratios=[1.2, 1, 1])
    ax = axes[0]
    m = df[df["panel"] == "map"]
    mus = np.sort(m["mu"].unique())
    shares = np.sort(m["anchor_share"].unique())
    v = m.pivot(index="anchor_share", columns="mu", values="value").loc[shares, mus].to_numpy()
    logv = np.log10(np.clip(v, 1e-3, 1e3))
    lim = 3.0
    mesh = ax.pcolormesh(
        mus,
        shares,
        logv,
        cmap="PuOr",
        shading="nearest",
        rasterized=True,
        norm=TwoSlopeNorm(0.0, -lim, lim),
    )
    ax.contour(mus, shares, logv, levels=[0.0], colors="black", linewidths=0.9)
    s = df[df["panel"] == "fig2_start"].iloc[0]
    ax.plot(
        [s["mu"]],
        [s["anchor_share"]],
        "*",
        ms=9,
        color="white",
        markeredgecolor="black",
        markeredgewidth=0.5,
    )
    ax.annotate(
        "Fig. 2 start",
        (s["mu"], s["anchor_share"]),
        xytext=(0, -11),
        textcoords="offset points",
        ha="center",
        fontsize=6,
    )
    ax.set_yscale("log")
    ax.set_xlabel(r"success probability $\mu$")
    ax.set_ylabel("anchor share of correct mass")
    ax.set_title("(a) rare share / threshold T (black: = 1)")
    ax.grid(False)
    cb = fig.colorbar(mesh, ax=ax)
    cb.set_label(r"$\log_{10}$(share / T); < 0: rare actions lose mass", fontsize=6.5)
    ax = axes[1]
    g = df[df["panel"] == "graded"]
    for k, (mu, d) in enumerate(g.groupby("mu", sort=True)):
        d = d.sort_values("share")
        thr = float(d["threshold"].iloc[0])
        losing = float((d["share"] < thr).mean())
        ax.plot(
            d["share"],
            d["value"],
            color=PALETTE[k],
            label=rf"$\mu$ = {mu:g}: {losing:.0%} of correct actions lose",
        )
        ax.axvline(thr, color=PALETTE[k], ls=":", lw=0.8)
    ax.axhline(0, color="0.4", lw=0.6)
    ax.set_xscale("log")
    ax.set_xlabel(r"share of the correct mass $p_j/\mu$")
    ax.set_ylabel(r"$E[\Delta p_j] / (\eta\, h\, p_j)$")
    ax.set_title("(b) graded correct set (dotted: T)")
    ax.legend(loc="upper left", fontsize=5.5)
    ax = axes[2]
    h = df[df["panel"] == "h"]
    for k, (mu, d) in enumerate(h.groupby("mu", sort=True)):
        for gamma, ls in ((0.0, "-"), (1.0, "--")):
            e = d[d["gamma"] == gamma].sort_values("N")
            ax.plot(
                e["N"],
                e["value"],
                ls,
                color=PALETTE[k],
                label=rf"$\mu$ = {mu:g}" if gamma == 0.0 else None,
            )
    ax.plot([], [], "-", color="0.3", label=r"$\gamma$ = 0")
    ax.plot([], [], "--", color="0.3", label=r"$\gamma$ = 1")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size N")
    ax.set_ylabel(r"$h = E[g\,\sqrt{X(N-X)}]/N$")
    ax.set_title("(c) size of the expected step")
    ax.set_ylim(0, 0.72)
    ax.legend(loc="upper center", fontsize=5.5, ncols=3)
    footnote(
        fig,
        "Our result (theory.md section 6), log-prob surrogate with GRPO population-std advantages "
        f"({PAPER} P-3) and focal weight (P-12): E[dp_j] = eta h p_j (p_j/mu - T), "
        "T = sum_C p^2/mu - sum_notC p^2/(1-mu), independent of N and gamma. (a): 1 anchor + "
        f"{params.n_rare:,} rare correct + {params.n_incorrect:,} incorrect actions; black line: "
        "share = T; where T <= 0 no correct action loses mass. (b): 200 correct logits evenly "
        "spaced in [0, 5], 1,000 incorrect. (c): at gamma = 0, h is symmetric in mu <-> 1 - mu, so "
        "the mu = 0.2 and 0.8 solid curves coincide.",
        width=170,
    )
    return fig
