"""Fig. 5: tail miss of one non-anchor correct action of the Fig. 2 simulation, N up to 2^17.

mu = 0.64 (initial correct mass of the simulation), tau = 6.3e-5 (one correct action at logit 3.0):
Pr(B) sits on a plateau near 1 and falls only for N beyond about 2^15. The grid is geometric
(64 points per octave, rounded to integers) from 1 to 2^17.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote
from ._tables import tail_miss_table

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Fig. 5: tail miss up to N = 2^17 (Fig. 2 setting)"
IN_PAPER = True
COST_SECONDS = 2.0  # estimated, full settings, 2 cores


@dataclass(frozen=True)
class Params:
    mu: float = 0.64
    tau: float = 6.3e-5
    log2_n_max: int = 17
    points_per_octave: int = 64


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Pr(B) on a geometric integer grid 1..2^log2_n_max (closed form: fast = same table)."""
    k = np.arange(params.log2_n_max * params.points_per_octave + 1)
    n = np.unique(np.round(2.0 ** (k / params.points_per_octave)).astype(np.int64))
    return tail_miss_table((params.mu,), (params.tau / params.mu,), n, fast)


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Single panel with Pr(B), Pr(active) and Pr(miss the action) against log2 N."""
    from fgrpo_theory.plotting import OKABE_ITO, PALETTE, new_figure, plot_tail_miss

    fig = new_figure(3.4, 2.5)
    ax = fig.subplots()
    g = df.sort_values("N")
    ax.plot(
        g["N"],
        g["p_active"],
        color=OKABE_ITO["sky_blue"],
        ls="--",
        lw=1.0,
        label="Pr(active group)",
    )
    ax.plot(
        g["N"],
        1.0 - g["p_hit"],
        color=OKABE_ITO["orange"],
        ls=":",
        lw=1.2,
        label=r"Pr(action never sampled)",
    )
    peaks = plot_tail_miss(ax, df, label="none", legend=False, colors=[PALETTE[0]])
    ax.plot([], [], color=PALETTE[0], label="Pr(B): active and missed")
    ax.set_xticks(2.0 ** np.arange(0, 18, 2))
    ax.set_ylim(0, 1.05)
    ax.legend(loc="lower left")
    ax.set_title(rf"One rare correct action: $\mu$ = {params.mu:g}, $\tau$ = {params.tau:g}")
    footnote(
        fig,
        f"Lemma 3.1 of {PAPER} at the initial policy of the Fig. 2 simulation (one correct action "
        f"at logit 3.0 among 128,000). Star: N* = {peaks[0]['n_star']:.0f}, "
        f"Pr(B) = {peaks[0]['p_peak']:.3f}.",
        width=80,
    )
    return fig
