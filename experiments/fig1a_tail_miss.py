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

__all__ = ["Params", "PARAMS", "tail_miss_table", "compute", "plot"]


@dataclass(frozen=True)
class Params:
    mu: tuple[float, ...] = (0.3,)
    rho: tuple[float, ...] = (0.05, 0.1, 0.2)
    n_max: int = 128


PARAMS = Params()


def tail_miss_table(
    mu: tuple[float, ...], rho: tuple[float, ...], n: np.ndarray, fast: bool = False
) -> pd.DataFrame:
    """Tidy table with the columns of the ``miss-prob`` command over a (mu, rho, N) grid."""
    from fgrpo_theory.tail_miss import active_probability, hit_probability, tail_miss_probability

    frames = []
    for m in mu:
        for r in rho:
            tau = r * m
            frames.append(
                pd.DataFrame(
                    {
                        "N": n.astype(np.int64),
                        "mu": m,
                        "tau": tau,
                        "rho": r,
                        "p_active": active_probability(n, m),
                        "p_tail_miss": tail_miss_probability(n, m, tau),
                        "p_hit": hit_probability(n, tau),
                    }
                )
            )
    df = pd.concat(frames, ignore_index=True)
    df["fast"] = fast
    return df


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
