"""Fig. 1a: the tail-miss probability Pr(B) of Lemma 3.1 against the group size N.

Pr(B) = (1-tau)^N - (mu-tau)^N - (1-mu)^N, tau = rho * mu: the probability that a group is active
(mixed rewards, so it produces a gradient) and yet misses a rare correct subset of mass tau.
Parameters as in the paper: mu = 0.3, rho in {0.05, 0.1, 0.2}, N = 1..128; the star on each curve is
the integer argmax N* from :func:`fgrpo_theory.tail_miss.peak_group_size`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote
from ._tables import tail_miss_table

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Fig. 1a: tail-miss probability against N (Lemma 3.1)"
IN_PAPER = True
COST_SECONDS = 1.0  # estimated, full settings, 2 cores


@dataclass(frozen=True)
class Params:
    mu: tuple[float, ...] = (0.3,)
    rho: tuple[float, ...] = (0.05, 0.1, 0.2)
    n_max: int = 128


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Pr(B) on N = 1..n_max for every (mu, rho) (closed form: fast mode is the same table)."""
    return tail_miss_table(params.mu, params.rho, np.arange(1, params.n_max + 1), fast)


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """One panel, log2 N axis, one curve per rho, stars at N*."""
    from fgrpo_theory.plotting import new_figure, plot_tail_miss

    fig = new_figure(3.4, 2.5)
    ax = fig.subplots()
    peaks = plot_tail_miss(ax, df)
    mus = ", ".join(f"{m:g}" for m in sorted(df["mu"].unique()))
    ax.set_title(rf"Tail miss of a rare correct subset, $\mu$ = {mus}")
    ax.legend(title=r"$\rho = \tau/\mu$", loc="upper right")
    stars = "; ".join(f"rho={p['rho']:g}: N*={p['n_star']:.0f}" for p in peaks)
    footnote(
        fig,
        f"Lemma 3.1 of {PAPER}: Pr(B) = (1-tau)^N - (mu-tau)^N - (1-mu)^N, N = 1..{df['N'].max()}. "
        f"Stars: integer argmax ({stars}).",
        width=80,
    )
    return fig
