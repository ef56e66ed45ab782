"""Fig. 2: the categorical simulation, main setting (log-prob surrogate, Adam, no weight decay).

Config ``fgrpo_theory/sim/presets/fig2-logprob-adam.toml`` (the combination that matches the
paper's description best, theory.md section 10): K = 128,000 actions, one anchor correct action at
logit 5, 9,999 correct at 3, 118,000 incorrect at 0; rewards +1/-1, advantage R - mean R, lr 1e-2,
1,000 steps, 4 seeds, N = 2..131072, gamma in {0, 1}. Panels: (a) Q_pos and (b) M_ret (P-26)
against step for N in {2, 256, 8192, 131072}, solid gamma = 0, dashed gamma = 1; (c) the final
values against N with the three regimes marked by the rule of
:func:`experiments._sim.regimes` (regime II = grid N whose final M_ret at gamma = 0 is below 0.5).
Fast mode: 6 N values, 1 seed, 100 steps, marked FAST PREVIEW.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from ._fig2 import Fig2Params, compute_fig2, plot_fig2

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Fig. 2: categorical simulation (log-prob surrogate, Adam)"
IN_PAPER = True
#: 44-45 s measured 29 Nov 2026 in `make reproduce` (2 workers, empty cache, 2 cores).
COST_SECONDS = 45.0
#: its runs go to the shared run cache (``_sim.run_configs``): never beside another such figure
SHARED_RUNS = True

Params = Fig2Params
PARAMS = Fig2Params()


def compute(params: Fig2Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Mean and s.e. over seeds of q_pos, m_ret, mass_rare per (N, gamma, step)."""
    return compute_fig2(params, fast)


def plot(df: pd.DataFrame, params: Fig2Params = PARAMS) -> Figure:
    """The three panels of Fig. 2."""
    return plot_fig2(df, params, "Fig. 2 setting: log-prob surrogate (policy gradient), Adam")
