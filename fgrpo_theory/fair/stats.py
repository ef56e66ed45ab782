"""Uncertainty of matched comparisons: median, IQR, every seed, and paired bootstrap intervals.

Runs of different arms with the same ``seed_index`` share the simulator's counter-based random
streams (common random numbers), so the focal-minus-control difference is computed seed by seed
and resampled with the *same* seed indices for both arms (a paired bootstrap; theory.md
section 11). Comparisons default to :data:`DEFAULT_SEEDS` seeds because outcomes at the edge of the
collapse band are bimodal across seeds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import fail

__all__ = ["DEFAULT_SEEDS", "STATISTICS", "summarize_seeds", "paired_bootstrap_interval"]

#: Seeds per arm of a comparison (at least 16: bimodal outcomes need many seeds).
DEFAULT_SEEDS = 16

#: Statistics a bootstrap can use.
STATISTICS = ("median", "mean")

#: Largest bootstrap (n_boot x seeds) materialized at once.
_MAX_BOOT_CELLS = 50_000_000


def _values(name: str, x: Any) -> np.ndarray:
    if isinstance(x, str | bytes):
        fail(name, x, "a 1-D array of per-seed values")
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        fail(name, repr(x)[:40], "a 1-D array of per-seed numbers")
    if a.ndim != 1:
        fail(name, f"an array of shape {a.shape}", "a 1-D array of per-seed values")
    if a.size < 2:
        fail(name, f"{a.size} value(s)", "at least 2 seeds for an interval")
    if not np.isfinite(a).all():
        fail(name, "a non-finite value", "finite per-seed values (no NaN or inf)")
    return a


def summarize_seeds(x: Any) -> dict[str, Any]:
    """Median, quartiles, IQR, mean, count and every seed's value of a 1-D sample.

    Quartiles use NumPy's default (linear) interpolation. Refuses fewer than 2 values or
    non-finite ones (one-line ValueError).
    """
    a = _values("x", x)
    q25, q50, q75 = np.percentile(a, [25, 50, 75])
    return {
        "median": float(q50),
        "q25": float(q25),
        "q75": float(q75),
        "iqr": float(q75 - q25),
        "mean": float(a.mean()),
        "n": int(a.size),
        "values": a.tolist(),
    }


def paired_bootstrap_interval(
    a: Any,
    b: Any,
    *,
    statistic: str = "median",
    level: float = 0.95,
    n_boot: int = 10_000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Paired percentile-bootstrap interval of ``statistic(a) - statistic(b)``.

    ``a[i]`` and ``b[i]`` are the same seed of two arms (focal and control). Each bootstrap
    replicate draws seed indices with replacement and applies them to *both* arms, so the
    interval keeps the pairing of the common random numbers.

    Parameters
    ----------
    a, b : array_like, shape (n,)
        Per-seed values, n >= 2, finite, same length.
    statistic : {"median", "mean"}
    level : float
        Two-sided coverage in (0, 1).
    n_boot : int
        Bootstrap replicates, >= 100.
    seed : int
        Seed of the resampling (NumPy PCG64); the same seed gives the same interval.

    Returns
    -------
    (estimate, lo, hi) : tuple of float
        ``statistic(a) - statistic(b)`` on the data, and the percentile interval.
    """
    x = _values("a", a)
    y = _values("b", b)
    if x.size != y.size:
        fail("b", f"{y.size} values", f"as many values as a ({x.size}): they are paired by seed")
    if statistic not in STATISTICS:
        fail("statistic", statistic, "one of " + ", ".join(STATISTICS))
    if isinstance(level, bool) or not (isinstance(level, int | float) and 0.0 < level < 1.0):
        fail("level", level, "in (0, 1)")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 100:
        fail("n_boot", n_boot, "an integer >= 100")
    if n_boot * x.size > _MAX_BOOT_CELLS:
        fail("n_boot", n_boot, f"<= {_MAX_BOOT_CELLS // x.size} for {x.size} seeds")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        fail("seed", seed, "an integer >= 0")
    fn = np.median if statistic == "median" else np.mean
    est = float(fn(x) - fn(y))
    rng = np.random.default_rng(int(seed))
    idx = rng.integers(0, x.size, size=(int(n_boot), x.size))
    reps = fn(x[idx], axis=1) - fn(y[idx], axis=1)
    alpha = (1.0 - float(level)) / 2.0
    lo, hi = np.quantile(reps, [alpha, 1.0 - alpha])
    return est, float(lo), float(hi)
