"""Fig. 4: focal-weighted advantage magnitudes g|A+| and g|A-| against the success rate mu.

g = (1 - mu)^gamma (P-12) times the binary GRPO advantages with population std at mu_hat = mu,
from :func:`fgrpo_theory.advantages.weighted_magnitudes`; gamma in {0, 0.5, 1}; y from 0 to 1.4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Fig. 4: focal-weighted advantage magnitudes"
IN_PAPER = True
COST_SECONDS = 1.0  # estimated, full settings, 2 cores


@dataclass(frozen=True)
class Params:
    gammas: tuple[float, ...] = (0.0, 0.5, 1.0)
    mu_min: float = 0.01
    mu_max: float = 0.99
    points: int = 393


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """g|A+| and g|A-| on a uniform mu grid for every gamma (closed form: fast = same table)."""
    from fgrpo_theory.advantages import focal_weight, weighted_magnitudes

    mu = np.linspace(params.mu_min, params.mu_max, params.points)
    frames = []
    for gamma in params.gammas:
        pos, neg = weighted_magnitudes(mu, gamma)
        frames.append(
            pd.DataFrame(
                {
                    "mu": mu,
                    "gamma": gamma,
                    "g": focal_weight(mu, gamma),
                    "weighted_abs_adv_pos": pos,
                    "weighted_abs_adv_neg": neg,
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    df["fast"] = fast
    return df


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Solid g|A+|, dashed g|A-|, one color per gamma."""
    from fgrpo_theory.plotting import PALETTE, new_figure

    fig = new_figure(3.4, 2.5)
    ax = fig.subplots()
    for k, (gamma, d) in enumerate(df.groupby("gamma", sort=True)):
        c = PALETTE[k]
        ax.plot(d["mu"], d["weighted_abs_adv_pos"], "-", color=c, label=rf"$\gamma$ = {gamma:g}")
        ax.plot(d["mu"], d["weighted_abs_adv_neg"], "--", color=c)
    ax.set_ylim(0, 1.4)
    ax.set_xlim(0, 1)
    ax.set_xlabel(r"success probability $\mu$ (= $\hat\mu$)")
    ax.set_ylabel("weighted advantage magnitude")
    ax.set_title(r"solid: $g\,|A^+|$ (correct), dashed: $g\,|A^-|$ (incorrect)")
    ax.legend(loc="upper right")
    footnote(
        fig,
        f"{PAPER}, P-12/P-13: g = (1-mu)^gamma times binary GRPO advantages with population std, "
        "eps = 0: |A+| = sqrt((1-mu)/mu), |A-| = sqrt(mu/(1-mu)).",
        width=80,
    )
    return fig
