"""Fair comparisons of focal weighting (theory.md section 11).

- :mod:`.controls`: matched vanilla controls (lr x m_gamma, lr x h_gamma/h_0, progress matched);
- :mod:`.progress`: equal-progress metrics from per-step logs (M_ret, rare mass, rare NLL at the
  first step where Q_pos reaches a threshold; the M_ret-against-Q_pos curve);
- :mod:`.stats`: median, IQR, every seed, paired bootstrap intervals;
- :mod:`.twolevel`: two-level (population draws, then seeds) intervals, a bimodality flag and
  the draws x seeds grid of a metric (:func:`metric_grid`);
- :mod:`.compare`: :func:`run_comparison`, the one call behind ``simulate --controls``;
- :mod:`.lr`: :func:`lr_advice`, the learning rate to run focal weighting at coming from a
  vanilla setting (the one answer behind ``fgrpo-theory lr``), and :func:`step_ratio`, the
  quantity behind every multiplier.

Built on the simulator's public API (:func:`fgrpo_theory.sim.simulate`).
"""

from __future__ import annotations

# Names load on first use (PEP 562): the statistics (:mod:`.stats`, :mod:`.twolevel`) do not
# import the simulator, so code that only needs them (the sequence rung's summaries) neither
# runs nor depends on it (the experiments' code digests follow what a module may import).
_LAZY = {
    "paired_differences": "compare",
    "run_arms": "compare",
    "run_comparison": "compare",
    "subset_sizes": "compare",
    "summarize_comparison": "compare",
    "ARM_NAMES": "controls",
    "CONTROLS": "controls",
    "ProgressMatch": "controls",
    "arm_configs": "controls",
    "h_multiplier": "controls",
    "h_value": "controls",
    "m_multiplier": "controls",
    "match_factor": "controls",
    "match_progress": "controls",
    "LrAdvice": "lr",
    "h_profile": "lr",
    "lr_advice": "lr",
    "lr_advice_table": "lr",
    "step_ratio": "lr",
    "DEFAULT_THRESHOLDS": "progress",
    "progress_curve": "progress",
    "rare_nll_rise": "progress",
    "summarize_thresholds": "progress",
    "threshold_metrics": "progress",
    "DEFAULT_SEEDS": "stats",
    "paired_bootstrap_interval": "stats",
    "summarize_seeds": "stats",
    "bimodality_coefficient": "twolevel",
    "per_draw_differences": "twolevel",
    "two_level_interval": "twolevel",
    "summarize_arms": "twolevel",
    "variance_components": "twolevel",
    "metric_grid": "twolevel",
}
_SUBMODULES = ("compare", "controls", "lr", "progress", "stats", "twolevel")


__all__ = [
    "bimodality_coefficient",
    "per_draw_differences",
    "two_level_interval",
    "summarize_arms",
    "variance_components",
    "metric_grid",
    "ARM_NAMES",
    "CONTROLS",
    "LrAdvice",
    "DEFAULT_SEEDS",
    "DEFAULT_THRESHOLDS",
    "ProgressMatch",
    "arm_configs",
    "h_multiplier",
    "h_profile",
    "lr_advice",
    "lr_advice_table",
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
    "step_ratio",
    "summarize_thresholds",
    "threshold_metrics",
]


def __getattr__(name: str) -> object:
    """Import a public name or a submodule on first access (PEP 562)."""
    import importlib

    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(_SUBMODULES))
