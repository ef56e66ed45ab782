"""Fig. 3: tail-miss panels, mu in {0.8, 0.5, 0.2}, rho in {0.01, 0.05, 0.1, 0.2}, N = 1..512.

Each curve is Lemma 3.1; its star is the integer argmax N* of
:func:`fgrpo_theory.tail_miss.peak_group_size`. Smaller rho moves the peak to larger N and higher
probability.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote
from ._tables import tail_miss_table

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Fig. 3: tail-miss panels with starred peaks"
IN_PAPER = True
COST_SECONDS = 1.5  # estimated, full settings, 2 cores


@dataclass(frozen=True)
class Params:
    mu: tuple[float, ...] = (0.8, 0.5, 0.2)
    rho: tuple[float, ...] = (0.01, 0.05, 0.1, 0.2)
    n_max: int = 512


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Pr(B) on N = 1..n_max for every (mu, rho) (closed form: fast mode is the same table)."""
    return tail_miss_table(params.mu, params.rho, np.arange(1, params.n_max + 1), fast)


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Three panels side by side (one per mu), curves per rho, shared y axis."""
    from fgrpo_theory.plotting import DOUBLE_COLUMN, new_figure, plot_tail_miss

    mus = list(dict.fromkeys(df["mu"]))  # keep the declared order (0.8, 0.5, 0.2)
    fig = new_figure(DOUBLE_COLUMN, 2.4)
    axes = fig.subplots(1, len(mus), sharey=True)
    for i, (ax, mu) in enumerate(zip(np.atleast_1d(axes), mus, strict=True)):
        plot_tail_miss(ax, df[df["mu"] == mu], label="rho", legend=(i == 0))
        ax.set_title(rf"$\mu$ = {mu:g}")
        if i > 0:
            ax.set_ylabel("")
        if i == 0:
            ax.legend(title=r"$\rho = \tau/\mu$", loc="upper right")
    np.atleast_1d(axes)[0].set_ylim(0, 1.05 * float(df["p_tail_miss"].max()))
    footnote(
        fig,
        f"Lemma 3.1 of {PAPER}, N = 1..{df['N'].max()}; stars mark the integer argmax N* of "
        "each curve (peak_group_size).",
        width=160,
    )
    return fig
