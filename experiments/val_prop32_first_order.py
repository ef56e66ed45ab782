"""Validation of P-17 and Prop. 3.2 (P-10): first order vs exact update vs Monte Carlo.

A small softmax policy (K = 6: correct logits 2, 0.5, -0.5; incorrect 1, 0, -1; mu ~ 0.70), the
linear surrogate of section 2.3 ("theory" rule of :mod:`fgrpo_theory.mass`), rewards +1/-1.

(a) One fixed group: the gap between the first-order change (P-17 for Q_pos, P-10 for the
    unsampled correct mass Q_u) and the exact softmax update, against the step size eta; it
    shrinks as eta^2 (first-order formulas are exact derivatives).
(b) Expectation over the group draw, N * E[dQ] / eta against N: exact enumeration of all group
    outcomes (lines, N <= 32; first order solid, exact update dashed) and Monte Carlo (points,
    95 % CI, every N). Q_pos grows while the unsampled correct mass shrinks (Prop. 3.2).
(c) The expected terms of P-17 and P-10 (enumeration up to N = 32, Monte Carlo beyond).
Fast mode: fewer eta values, N up to 64, 10x fewer Monte Carlo groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Prop. 3.2 / P-17: first order vs exact update vs Monte Carlo"
IN_PAPER = False
#: 10-11 s measured 29 Nov 2026 in `make reproduce` (2 workers, empty cache, 2 cores).
COST_SECONDS = 10.0

TERMS = (
    "dq_pos_first_order",
    "dq_pos_exact",
    "dq_unsampled_correct_first_order",
    "dq_unsampled_correct_exact",
    "dq_pos_sampled_correct",
    "dq_pos_sampled_incorrect",
    "dq_pos_unsampled",
    "direct_drift",
    "coupling",
)


@dataclass(frozen=True)
class Params:
    logits: tuple[float, ...] = (2.0, 0.5, -0.5, 1.0, 0.0, -1.0)
    n_correct: int = 3
    group: tuple[int, ...] = (0, 1, 4, 4)
    etas: tuple[float, ...] = tuple(float(x) for x in np.logspace(-3, 0.5, 15))
    eta: float = 0.5
    n: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256)
    enumerate_max_n: int = 32
    samples: int = 40_000
    seed: int = 32


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Long table with ``panel`` in {"eta", "expectation"}: quantity, value, se, method."""
    from fgrpo_theory.mass import expected_change, make_group, one_step

    z = np.asarray(params.logits)
    corr = np.arange(z.size) < params.n_correct
    grp = make_group(list(params.group), n_actions=z.size)
    etas = params.etas[::3] if fast else params.etas
    rows = []
    for eta in etas:
        r = one_step(z, corr, grp, eta, "theory")
        for q, fo, ex in (
            ("Q_pos", r.dq_pos_first_order, r.dq_pos_exact),
            ("Q_u", r.dq_unsampled_correct_first_order, r.dq_unsampled_correct_exact),
        ):
            rows.append(
                dict(
                    panel="eta",
                    quantity=q,
                    N=grp.N,
                    eta=eta,
                    method="first_order",
                    value=fo,
                    se=0.0,
                )
            )
            rows.append(
                dict(panel="eta", quantity=q, N=grp.N, eta=eta, method="exact", value=ex, se=0.0)
            )
    ns = [n for n in params.n if n <= 64] if fast else list(params.n)
    samples = params.samples // 10 if fast else params.samples
    for i, n in enumerate(ns):
        methods = [("monte-carlo", samples)]
        if n <= params.enumerate_max_n:
            methods.insert(0, ("enumerate", 0))
        for method, s in methods:
            res = expected_change(
                z,
                corr,
                n,
                params.eta,
                TERMS,
                rule="theory",
                method=method,
                samples=max(s, 2),
                seed=(params.seed, i),
                max_outcomes=10**6,
            )
            for q in TERMS:
                rows.append(
                    dict(
                        panel="expectation",
                        quantity=q,
                        N=n,
                        eta=params.eta,
                        method="enumeration" if method == "enumerate" else "monte_carlo",
                        value=res.mean[q],
                        se=res.stderr[q],
                    )
                )
    df = pd.DataFrame(rows)
    df["fast"] = fast
    return df


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Three panels: truncation error vs eta, expectations vs N, expected terms vs N."""
    from fgrpo_theory.plotting import DOUBLE_COLUMN, OKABE_ITO, PALETTE, new_figure

    fig = new_figure(DOUBLE_COLUMN, 2.5)
    axes = fig.subplots(1, 3)
    colors = {"Q_pos": OKABE_ITO["blue"], "Q_u": OKABE_ITO["vermillion"]}
    # (a)
    ax = axes[0]
    d = df[df["panel"] == "eta"]
    for q in ("Q_pos", "Q_u"):
        fo = d[(d["quantity"] == q) & (d["method"] == "first_order")].sort_values("eta")
        ex = d[(d["quantity"] == q) & (d["method"] == "exact")].sort_values("eta")
        gap = np.abs(fo["value"].to_numpy() - ex["value"].to_numpy())
        ax.loglog(
            fo["eta"],
            gap,
            "o-",
            ms=2.5,
            color=colors[q],
            label=r"$Q_{pos}$ (P-17)" if q == "Q_pos" else r"$Q_u$ (P-10)",
        )
    eta = np.sort(d["eta"].unique())
    ref = eta**2 * float(gap[0] / eta[0] ** 2) * 3
    ax.loglog(eta, ref, ":", color="0.4", lw=0.9, label=r"slope 2 ($\propto \eta^2$)")
    ax.set_xlabel(r"step size $\eta$")
    ax.set_ylabel("|first order - exact update|")
    ax.set_title(f"(a) one group {list(params.group)}")
    ax.legend(loc="upper left", fontsize=6)
    # (b)
    ax = axes[1]
    e = df[df["panel"] == "expectation"].copy()
    e["scaled"] = e["value"] * e["N"] / e["eta"]
    e["scaled_se"] = e["se"] * e["N"] / e["eta"]
    for q, fo_name, ex_name in (
        ("Q_pos", "dq_pos_first_order", "dq_pos_exact"),
        ("Q_u", "dq_unsampled_correct_first_order", "dq_unsampled_correct_exact"),
    ):
        for name, ls in ((fo_name, "-"), (ex_name, "--")):
            en = e[(e["quantity"] == name) & (e["method"] == "enumeration")].sort_values("N")
            ax.plot(en["N"], en["scaled"], ls, color=colors[q], lw=1.0)
        mc = e[(e["quantity"] == ex_name) & (e["method"] == "monte_carlo")].sort_values("N")
        ax.errorbar(
            mc["N"],
            mc["scaled"],
            yerr=1.96 * mc["scaled_se"],
            fmt="o",
            ms=2.5,
            color=colors[q],
            elinewidth=0.7,
            capsize=1,
            label=r"$Q_{pos}$" if q == "Q_pos" else r"$Q_u$ (unsampled correct)",
        )
    ax.plot([], [], "-", color="0.3", label="first order, enumeration")
    ax.plot([], [], "--", color="0.3", label="exact update, enumeration")
    ax.plot([], [], "o", ms=2.5, color="0.3", label="exact update, Monte Carlo")
    ax.axhline(0, color="0.5", lw=0.6)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size N")
    ax.set_ylabel(r"$N\,E[\Delta Q]/\eta$")
    ax.set_title(rf"(b) expected change, $\eta$ = {params.eta:g}")
    ax.legend(loc="center right", fontsize=5.5)
    # (c)
    ax = axes[2]
    labels = {
        "dq_pos_sampled_correct": "P-17 sampled correct",
        "dq_pos_sampled_incorrect": "P-17 sampled incorrect",
        "dq_pos_unsampled": "P-17 unsampled coupling",
        "direct_drift": "P-10 direct drift",
        "coupling": "P-10 normalization coupling",
    }
    for k, (name, lab) in enumerate(labels.items()):
        t = e[e["quantity"] == name]
        t = pd.concat(
            [
                t[(t["method"] == "enumeration")],
                t[
                    (t["method"] == "monte_carlo")
                    & (t["N"] > e[e["method"] == "enumeration"]["N"].max())
                ],
            ]
        )
        t = t.sort_values("N")
        ax.plot(
            t["N"], t["scaled"], "-o" if k < 3 else "--s", ms=2, color=PALETTE[k], lw=1.0, label=lab
        )
    ax.axhline(0, color="0.5", lw=0.6)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("group size N")
    ax.set_ylabel(r"$N\,E[\mathrm{term}]/\eta$")
    ax.set_title("(c) expected terms of P-17 and P-10")
    ax.legend(loc="best", fontsize=5.5)
    n_mc = int(e[e["method"] == "monte_carlo"]["N"].count() / len(e["quantity"].unique()))
    footnote(
        fig,
        f"Linear surrogate of {PAPER} section 2.3 (P-5) on a K = 6 policy (correct logits "
        f"{list(params.logits[: params.n_correct])}, incorrect "
        f"{list(params.logits[params.n_correct :])}), rewards +1/-1. Enumeration sums over all "
        "multinomial group outcomes; Monte Carlo averages sampled groups "
        f"({n_mc} N values, fixed seeds), error bars 95 % CI.",
        width=170,
    )
    return fig
