"""Map of the worst group size N* and of the peak tail-miss probability over (mu, rho).

For every success rate mu and rarity rho = tau/mu, :func:`fgrpo_theory.tail_miss.peak_group_size`
gives the integer N* maximizing Lemma 3.1's Pr(B) and the value Pr(B) there. The left panel shows
log2 N* (contours at powers of two), the right one the peak probability. Not in the paper, which
only states that smaller rho moves the peak to larger N and higher probability.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Map of N* and peak tail-miss over (mu, rho)"
IN_PAPER = False
COST_SECONDS = 4.0  # estimated, full settings, 2 cores


@dataclass(frozen=True)
class Params:
    mu_min: float = 0.02
    mu_max: float = 0.98
    mu_points: int = 97
    log10_rho_min: float = -4.0
    log10_rho_max: float = -0.3
    rho_points: int = 75


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """N*, continuous N* and peak Pr(B) on a (mu, log rho) grid (fast: a 4x coarser grid)."""
    from fgrpo_theory.tail_miss import peak_group_size

    step = 4 if fast else 1
    mu = np.linspace(params.mu_min, params.mu_max, params.mu_points)[::step]
    rho = np.logspace(params.log10_rho_min, params.log10_rho_max, params.rho_points)[::step]
    M, R = np.meshgrid(mu, rho, indexing="ij")
    res = peak_group_size(M, R * M)
    return pd.DataFrame(
        {
            "mu": M.ravel(),
            "rho": R.ravel(),
            "tau": (R * M).ravel(),
            "n_star": np.asarray(res.n_star).ravel(),
            "n_star_continuous": np.asarray(res.n_star_continuous).ravel(),
            "p_peak": np.asarray(res.p_peak).ravel(),
            "fast": fast,
        }
    )


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Two heat maps (log2 N*, peak Pr(B)) over mu (x) and rho (log y), with labelled contours."""
    from fgrpo_theory.plotting import DOUBLE_COLUMN, new_figure

    mu = np.sort(df["mu"].unique())
    rho = np.sort(df["rho"].unique())
    piv = df.pivot(index="rho", columns="mu")
    log_n = np.log2(piv["n_star_continuous"].loc[rho, mu].to_numpy(dtype=float))
    peak = piv["p_peak"].loc[rho, mu].to_numpy(dtype=float)
    fig = new_figure(DOUBLE_COLUMN, 2.6)
    axes = fig.subplots(1, 2)
    specs = [
        (axes[0], log_n, "viridis", r"$\log_2 N^*$ (worst group size)", np.arange(1, 16)),
        (
            axes[1],
            peak,
            "magma",
            r"peak tail-miss Pr(B) at $N^*$",
            [0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.99],
        ),
    ]
    for ax, z, cmap, label, levels in specs:
        mesh = ax.pcolormesh(mu, rho, z, cmap=cmap, shading="nearest", rasterized=True)
        cs = ax.contour(mu, rho, z, levels=levels, colors="white", linewidths=0.5)
        fmt = (lambda v: f"{2**v:.0f}") if z is log_n else (lambda v: f"{v:g}")
        ax.clabel(cs, fmt=fmt, fontsize=5.5)
        ax.set_yscale("log")
        ax.set_xlabel(r"success probability $\mu$")
        ax.set_ylabel(r"rarity $\rho = \tau/\mu$")
        ax.grid(False)
        fig.colorbar(mesh, ax=ax, label=label)
    axes[0].set_title(r"Worst group size $N^*$ (contours: $N^*$)")
    axes[1].set_title("Peak tail-miss probability")
    footnote(
        fig,
        f"Lemma 3.1 of {PAPER}; N* = argmax over real N >= 1 of Pr(B) (peak_group_size; the "
        "integer argmax is its floor or ceiling). For tiny rho, Pr(B) stays near its peak for N "
        "up to about 1/tau: the worst N is small but the plateau is long (Fig. 5). Grid "
        f"{len(mu)} mu x {len(rho)} rho values.",
        width=160,
    )
    return fig
