"""Fig. 2 as the paper's text reads: linear surrogate (1/N) sum A_j p(a_j), AdamW, no weight decay.

Config ``fgrpo_theory/sim/presets/fig2-linear-adamw.toml``; everything else as
:mod:`experiments.fig2_simulation` (same panels and regime rule). theory.md section 10 explains why
this reading differs from the paper's picture (raw gradients of order p^2; Adam rescales them).
Fast mode: 6 N values, 1 seed, 100 steps, marked FAST PREVIEW.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from ._fig2 import Fig2Params, compute_fig2, plot_fig2
from ._sim import CONFIG_DIR

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Fig. 2 as the text reads (linear surrogate, AdamW)"
IN_PAPER = True
#: 66-67 s measured 29 Nov 2026 in `make reproduce` (2 workers, empty cache, 2 cores).
COST_SECONDS = 66.0
#: its runs go to the shared run cache (``_sim.run_configs``): never beside another such figure
SHARED_RUNS = True

Params = Fig2Params
PARAMS = Fig2Params(config=CONFIG_DIR / "fig2-linear-adamw.toml")


def compute(params: Fig2Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Mean and s.e. over seeds of q_pos, m_ret, mass_rare per (N, gamma, step)."""
    return compute_fig2(params, fast)


def plot(df: pd.DataFrame, params: Fig2Params = PARAMS) -> Figure:
    """The three panels of Fig. 2 for the linear surrogate."""
    return plot_fig2(
        df, params, "Fig. 2 as the text reads: linear surrogate on probabilities, AdamW"
    )
