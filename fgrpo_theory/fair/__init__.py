"""Fair comparisons of focal weighting (theory.md section 11, issue 11).

- :mod:`.controls`: matched vanilla controls (lr x m_gamma, lr x h_gamma/h_0, progress matched);
- :mod:`.progress`: equal-progress metrics from per-step logs (M_ret, rare mass, rare NLL at the
  first step where Q_pos reaches a threshold; the M_ret-against-Q_pos curve);
- :mod:`.stats`: median, IQR, every seed, paired bootstrap intervals;
- :mod:`.twolevel`: two-level (population draws, then seeds) intervals and a bimodality flag;
- :mod:`.compare`: :func:`run_comparison`, the one call behind ``simulate --controls``.

Built on the simulator's public API (:func:`fgrpo_theory.sim.simulate`).
"""

from __future__ import annotations

from .compare import (
    paired_differences,
    run_arms,
    run_comparison,
    subset_sizes,
    summarize_comparison,
)
from .controls import (
    ARM_NAMES,
    CONTROLS,
    ProgressMatch,
    arm_configs,
    h_multiplier,
    h_value,
    m_multiplier,
    match_factor,
    match_progress,
)
from .progress import (
    DEFAULT_THRESHOLDS,
    progress_curve,
    rare_nll_rise,
    summarize_thresholds,
    threshold_metrics,
)
from .stats import DEFAULT_SEEDS, paired_bootstrap_interval, summarize_seeds
from .twolevel import bimodality_coefficient, per_draw_differences, two_level_interval

__all__ = [
    "bimodality_coefficient",
    "per_draw_differences",
    "two_level_interval",
    "ARM_NAMES",
    "CONTROLS",
    "DEFAULT_SEEDS",
    "DEFAULT_THRESHOLDS",
    "ProgressMatch",
    "arm_configs",
    "h_multiplier",
    "h_value",
    "m_multiplier",
    "match_progress",
    "match_factor",
    "paired_bootstrap_interval",
    "paired_differences",
    "progress_curve",
    "rare_nll_rise",
    "run_arms",
    "run_comparison",
    "subset_sizes",
    "summarize_comparison",
    "summarize_seeds",
    "summarize_thresholds",
    "threshold_metrics",
]
