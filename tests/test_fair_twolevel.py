"""Two-level (population draws, then seeds) intervals: coverage against a known truth, and the
bimodality coefficient against scipy's bias-corrected moments."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fgrpo_theory.fair.stats import paired_bootstrap_interval
from fgrpo_theory.fair.twolevel import (
    BIMODAL_THRESHOLD,
    bimodality_coefficient,
    metric_grid,
    per_draw_differences,
    two_level_interval,
)


def _experiment(rng, D=16, S=4, effect=0.5, sd_draw=1.0, sd_seed=0.3):
    """Arms paired by draw and seed: b is a baseline, a adds a draw-specific effect."""
    base = rng.normal(size=(D, 1)) + rng.normal(size=(D, S))
    eff = effect + sd_draw * rng.normal(size=(D, 1))
    a = base + eff + sd_seed * rng.normal(size=(D, S))
    return a, base


@pytest.mark.slow
def test_two_level_covers_the_distribution_effect_where_seeds_alone_do_not():
    rng = np.random.default_rng(2026)
    reps = 300
    hit2 = hit1 = 0
    for r in range(reps):
        a, b = _experiment(rng)
        _, lo, hi = two_level_interval(a, b, statistic="mean", n_boot=1000, seed=r)
        hit2 += lo <= 0.5 <= hi
        _, lo1, hi1 = paired_bootstrap_interval(
            a.ravel(), b.ravel(), statistic="mean", n_boot=1000, seed=r
        )
        hit1 += lo1 <= 0.5 <= hi1
    # nominal 0.95; the percentile bootstrap with D = 16 draws covers a little less. Binomial SE
    # of a coverage near 0.93 over 300 reps is 0.015: the band is more than 3 SE wide each side.
    assert 0.86 <= hit2 / reps <= 0.99
    # cells treated as independent seeds ignore the between-draw spread: their SE is about
    # sqrt(1.09 / 64) = 0.13 against a true 0.25, so they cover P(|Z| < 1.02) = 0.69 (SE 0.027)
    assert hit1 / reps < 0.8


def test_two_level_reproducible_and_paired():
    rng = np.random.default_rng(1)
    a, b = _experiment(rng)
    assert two_level_interval(a, b, seed=3) == two_level_interval(a, b, seed=3)
    est, lo, hi = two_level_interval(a, a)  # identical arms: a zero-width interval at 0
    assert est == lo == hi == 0.0
    d = per_draw_differences(a, b, statistic="mean")
    np.testing.assert_allclose(d, a.mean(axis=1) - b.mean(axis=1))


@pytest.mark.parametrize(
    "a, b, msg",
    [
        ([[1.0, 2.0]], [[1.0, 2.0]], "at least 2 population draws"),
        ([1.0, 2.0], [1.0, 2.0], "a 2-D array"),
        ([[1.0], [np.nan]], [[1.0], [2.0]], "finite values"),
        ([[1.0], [2.0]], [[1.0, 2.0], [3.0, 4.0]], "the shape of a"),
    ],
)
def test_two_level_refusals(a, b, msg):
    with pytest.raises(ValueError, match=msg):
        two_level_interval(a, b)


def test_bimodality_coefficient_matches_scipy_moments():
    rng = np.random.default_rng(7)
    for x in (rng.normal(size=50), rng.exponential(size=30), rng.random(12)):
        n = x.size
        g = stats.skew(x, bias=False)
        k = stats.kurtosis(x, bias=False)
        ref = (g * g + 1) / (k + 3 * (n - 1) ** 2 / ((n - 2) * (n - 3)))
        assert bimodality_coefficient(x) == pytest.approx(ref, rel=1e-10)
    two = np.r_[rng.normal(0, 0.05, 40), rng.normal(1, 0.05, 40)]
    assert bimodality_coefficient(two) > BIMODAL_THRESHOLD
    assert bimodality_coefficient(rng.normal(size=400)) < BIMODAL_THRESHOLD
    assert bimodality_coefficient(np.ones(10)) == 0.0


def test_metric_grid_orders_draws_then_seeds():
    # rows shuffled by hand; draws 7 and 3 (draw 3 first), seeds 0..2; value = 10 * draw + seed
    runs = pd.DataFrame({"population_seed": [7, 3, 7, 3, 3, 7], "seed_index": [2, 1, 0, 0, 2, 1],
                         "m": [72.0, 31.0, 70.0, 30.0, 32.0, 71.0]})  # fmt: skip
    g = metric_grid(runs, "m")
    assert g.dtype == np.float64
    assert g.tolist() == [[30.0, 31.0, 32.0], [70.0, 71.0, 72.0]]


def test_metric_grid_refuses_draws_with_unequal_seeds():
    # 4 rows over 2 draws reshape to 2 x 2, but draw 3 has 3 runs and draw 7 one
    runs = pd.DataFrame({"population_seed": [3, 3, 3, 7], "seed_index": [0, 1, 2, 0],
                         "m": [1.0, 2.0, 3.0, 4.0]})  # fmt: skip
    with pytest.raises(ValueError, match="runs must be a table with the same number of runs"):
        metric_grid(runs, "m")
