"""Two-level uncertainty of a population result: population draws, then training seeds.

A population experiment draws D populations from its declared distribution (population seeds)
and trains S seeds on each. A statement about the *distribution* (not about one draw) must carry
both sources of variation: one draw can sit far in the tail (a default draw once ranked near the
3rd percentile of its own distribution). :func:`two_level_interval` resamples draws with
replacement, then seeds with replacement inside each resampled draw, applying the same indices
to both arms (the arms of a draw share its population and, seed by seed, the random streams), and
returns the percentile interval of ``statistic(a) - statistic(b)`` over the pooled cells.
:func:`per_draw_differences` gives every draw's own estimate (what a figure shows), and
:func:`bimodality_coefficient` flags seed outcomes that split into two clusters (a progress match
is then ill-conditioned: a control's lr moves the fraction of seeds in each cluster).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import fail
from .stats import STATISTICS

__all__ = [
    "two_level_interval",
    "per_draw_differences",
    "bimodality_coefficient",
    "BIMODAL_THRESHOLD",
]

#: Sarle's bimodality coefficient of a uniform distribution; larger values suggest bimodality.
BIMODAL_THRESHOLD = 5.0 / 9.0

#: Largest bootstrap (n_boot x draws x seeds) materialized at once.
_MAX_BOOT_CELLS = 50_000_000


def _grid(name: str, x: Any) -> np.ndarray:
    if isinstance(x, str | bytes):
        fail(name, x, "a 2-D array of values, draws x seeds")
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        fail(name, repr(x)[:40], "a 2-D array of numbers, draws x seeds")
    if a.ndim != 2:
        fail(name, f"an array of shape {a.shape}", "a 2-D array of values, draws x seeds")
    if a.shape[0] < 2 or a.shape[1] < 1:
        fail(name, f"shape {a.shape}", "at least 2 population draws and 1 seed per draw")
    if not np.isfinite(a).all():
        fail(name, "a non-finite value", "finite values (no NaN or inf)")
    return a


def _check(a: Any, b: Any, statistic: str) -> tuple[np.ndarray, np.ndarray, Any]:
    x = _grid("a", a)
    y = _grid("b", b)
    if x.shape != y.shape:
        fail("b", f"shape {y.shape}", f"the shape of a {x.shape}: draws and seeds are paired")
    if statistic not in STATISTICS:
        fail("statistic", statistic, "one of " + ", ".join(STATISTICS))
    return x, y, (np.median if statistic == "median" else np.mean)


def per_draw_differences(a: Any, b: Any, *, statistic: str = "median") -> np.ndarray:
    """``statistic(a[d]) - statistic(b[d])`` over each draw's seeds, one value per draw."""
    x, y, fn = _check(a, b, statistic)
    return fn(x, axis=1) - fn(y, axis=1)


def two_level_interval(
    a: Any,
    b: Any,
    *,
    statistic: str = "median",
    level: float = 0.95,
    n_boot: int = 4_000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Two-level paired percentile-bootstrap interval of ``statistic(a) - statistic(b)``.

    Parameters
    ----------
    a, b : array_like, shape (D, S)
        Values of two arms on D >= 2 population draws x S >= 1 seeds; ``a[d, s]`` and
        ``b[d, s]`` are the same draw and seed.
    statistic : {"median", "mean"}
        Applied to the pooled D x S cells of each arm.
    level : float
        Two-sided coverage in (0, 1).
    n_boot : int
        Replicates, >= 100.
    seed : int
        Seed of the resampling (NumPy PCG64): the same seed gives the same interval.

    Returns
    -------
    (estimate, lo, hi) : tuple of float
        The pooled estimate and the percentile interval. Each replicate draws D draw indices
        with replacement, then S seed indices with replacement inside each drawn draw, and
        applies them to both arms.
    """
    x, y, fn = _check(a, b, statistic)
    if isinstance(level, bool) or not (isinstance(level, int | float) and 0.0 < level < 1.0):
        fail("level", level, "in (0, 1)")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 100:
        fail("n_boot", n_boot, "an integer >= 100")
    D, S = x.shape
    if n_boot * D * S > _MAX_BOOT_CELLS:
        fail("n_boot", n_boot, f"<= {_MAX_BOOT_CELLS // (D * S)} for {D} x {S} cells")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        fail("seed", seed, "an integer >= 0")
    est = float(fn(x) - fn(y))
    rng = np.random.default_rng(int(seed))
    draws = rng.integers(0, D, size=(int(n_boot), D))
    seeds = rng.integers(0, S, size=(int(n_boot), D, S))
    xa = x[draws[:, :, None], seeds].reshape(int(n_boot), D * S)
    ya = y[draws[:, :, None], seeds].reshape(int(n_boot), D * S)
    reps = fn(xa, axis=1) - fn(ya, axis=1)
    alpha = (1.0 - float(level)) / 2.0
    lo, hi = np.quantile(reps, [alpha, 1.0 - alpha])
    return est, float(lo), float(hi)


def bimodality_coefficient(x: Any) -> float:
    """Sarle's bimodality coefficient (g^2 + 1) / (k + 3 (n - 1)^2 / ((n - 2)(n - 3))) of a
    sample (g the sample skewness, k the sample excess kurtosis, both bias-corrected; SAS
    convention). Values above :data:`BIMODAL_THRESHOLD` = 5/9 (the uniform's) suggest two
    clusters. Needs n >= 4 finite values; a sample with no spread returns 0."""
    try:
        v = np.asarray(x, dtype=float).ravel()
    except (TypeError, ValueError):
        fail("x", repr(x)[:40], "an array of numbers")
    n = v.size
    if n < 4:
        fail("x", f"{n} value(s)", "at least 4 values")
    if not np.isfinite(v).all():
        fail("x", "a non-finite value", "finite values (no NaN or inf)")
    d = v - v.mean()
    m2 = float(np.mean(d * d))
    if m2 <= 1e-300:
        return 0.0
    m3 = float(np.mean(d**3))
    m4 = float(np.mean(d**4))
    g1 = m3 / m2**1.5
    g2 = m4 / m2**2 - 3.0
    G1 = g1 * np.sqrt(n * (n - 1)) / (n - 2)
    G2 = (n - 1) / ((n - 2) * (n - 3)) * ((n + 1) * g2 + 6)
    return float((G1 * G1 + 1.0) / (G2 + 3.0 * (n - 1) ** 2 / ((n - 2) * (n - 3))))
