"""Multi-panel figure of a diagnosis (Okabe-Ito colours, labelled axes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import beta as beta_dist
from scipy.stats import betabinom

__all__ = ["plot_diagnosis"]


def _value(rep: pd.DataFrame, q: str, window: str = "all") -> float:
    sel = rep[(rep["quantity"] == q) & (rep["window"] == window)]
    return float(sel["value"].iloc[0])


def plot_diagnosis(groups: pd.DataFrame, report: pd.DataFrame, path: str | Path) -> Path:
    """Four panels: observed vs fitted X at N, fitted density of mu, tail-miss shares against rho,
    focal learning-rate multiplier against gamma (or, with step windows, the fit over training).

    Saved with :func:`fgrpo_theory.plotting.save_figure` (byte-identical reruns); ``path`` ends in
    .png or .pdf. Returns the written path.
    """
    from ..plotting import OKABE_ITO, new_figure, paper_style, save_figure

    path = Path(path)
    a, b = _value(report, "beta_a"), _value(report, "beta_b")
    N = int(_value(report, "N"))
    with paper_style():
        fig = new_figure(7.0, 5.2)
        axs = fig.subplots(2, 2)
        # (a) X at the common N: observed frequencies and the beta-binomial fit.
        ax = axs[0, 0]
        sel = groups[groups["n"] == N]["n_correct"].to_numpy()
        xs = np.arange(N + 1)
        obs = np.bincount(sel, minlength=N + 1) / max(sel.size, 1)
        ax.bar(xs, obs, color=OKABE_ITO["sky_blue"], label="observed")
        ax.plot(
            xs,
            betabinom.pmf(xs, N, a, b),
            "o-",
            color=OKABE_ITO["vermillion"],
            label="beta-binomial fit",
        )
        ax.plot(xs, 1 / (N + 1) + 0 * xs, alpha=0)  # keep the axis from collapsing on one bar
        ax.set_xlabel(f"correct rollouts X of N = {N}")
        ax.set_ylabel("share of groups")
        ax.set_title("(a) groups at the common N")
        ax.legend(frameon=False)
        # (b) fitted density of mu vs the plug-in X/N histogram.
        ax = axs[0, 1]
        mu = np.linspace(0.001, 0.999, 400)
        ax.hist(
            groups["n_correct"] / groups["n"],
            bins=20,
            range=(0, 1),
            density=True,
            color=OKABE_ITO["sky_blue"],
            label="plug-in X/n",
        )
        ax.plot(
            mu,
            beta_dist.pdf(mu, a, b),
            color=OKABE_ITO["vermillion"],
            label=f"Beta({a:.2f}, {b:.2f}) fit",
        )
        ax.set_xlabel("success probability mu")
        ax.set_ylabel("density")
        ax.set_title("(b) difficulty distribution")
        ax.legend(frameon=False)
        # (c) tail-miss shares against rho.
        ax = axs[1, 0]
        for q, lab, col in (
            ("p_tail_miss", "all updates, E[Pr(B)]", OKABE_ITO["blue"]),
            (
                "p_tail_miss_given_active",
                "dynamic sampling, E[Pr(B)]/E[Pr(A)]",
                OKABE_ITO["orange"],
            ),
        ):
            sub = report[(report["quantity"] == q) & (report["window"] == "all")]
            rho = sub["parameter"].str.removeprefix("rho=").astype(float)
            ax.errorbar(
                rho,
                sub["value"],
                yerr=[sub["value"] - sub["ci_low"], sub["ci_high"] - sub["value"]],
                marker="o",
                color=col,
                label=lab,
                capsize=2,
            )
        ax.set_xscale("log")
        ax.set_xlabel("relative mass rho of the rare subset")
        ax.set_ylabel(f"share missing it at N = {N}")
        ax.set_title("(c) updates that miss a rare subset")
        ax.legend(frameon=False)
        # (d) over training (windows) or the learning-rate multiplier.
        ax = axs[1, 1]
        wins = [w for w in report["window"].unique() if w != "all"]
        if wins:
            obs_w, pred_w = [], []
            mid = []
            for w in wins:
                try:
                    obs_w.append(_value(report, "active_fraction_observed", w))
                    pred_w.append(_value(report, "active_fraction_predicted", w))
                    lo, hi = (int(v) for v in w.split("-"))
                    mid.append((lo + hi) / 2)
                except (IndexError, ValueError):
                    continue
            ax.plot(mid, obs_w, "o", color=OKABE_ITO["blue"], label="observed")
            ax.plot(mid, pred_w, "-", color=OKABE_ITO["vermillion"], label="fit")
            ax.set_xlabel("training step (window centre)")
            ax.set_ylabel("active fraction")
            ax.set_title("(d) active groups over training")
        else:
            sub = report[
                (report["quantity"] == "lr_multiplier_focal") & (report["window"] == "all")
            ]
            g = sub["parameter"].str.removeprefix("gamma=").astype(float)
            ax.errorbar(
                g,
                sub["value"],
                yerr=[sub["value"] - sub["ci_low"], sub["ci_high"] - sub["value"]],
                marker="o",
                color=OKABE_ITO["blue"],
                capsize=2,
                label="fitted population",
            )
            ax.set_xlabel("focal exponent gamma")
            ax.set_ylabel("learning-rate multiplier")
            ax.set_title(f"(d) focal weighting at N = {N}")
        ax.legend(frameon=False)
        fmt = path.suffix.lower().lstrip(".")
        save_figure(fig, path.with_suffix(""), formats=[fmt])
    return path.with_suffix("." + fmt)  # the file written (save_figure names it in lower case)
