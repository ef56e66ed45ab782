"""Paired bootstrap interval (stand-in written by helper "pop"; the lead keeps helper "fair"'s)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import fail

__all__ = ["paired_bootstrap_interval"]


def paired_bootstrap_interval(
    a: Any,
    b: Any,
    *,
    statistic: str = "median",
    level: float = 0.95,
    n_boot: int = 10_000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Estimate and percentile interval of ``statistic(a - b)`` over seeds paired by index."""
    x = np.asarray(a, float) - np.asarray(b, float)
    if x.ndim != 1 or len(x) < 2:
        fail("a", len(np.atleast_1d(x)), "two equal-length 1-D arrays of >= 2 paired runs")
    if not 0 < level < 1:
        fail("level", level, "in (0, 1)")
    f = {"median": np.median, "mean": np.mean}.get(statistic)
    if f is None:
        fail("statistic", statistic, "one of median, mean")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))
    boots = f(x[idx], axis=1)
    lo, hi = np.quantile(boots, [(1 - level) / 2, (1 + level) / 2])
    return float(f(x)), float(lo), float(hi)
