"""pass@k: the unbiased estimator and the exact value.

Oracles: enumeration of all k-subsets (itertools) and exact rationals (math.comb, fractions) for
small n, mpmath at 50 digits for n = 1e5 and tiny mu, Monte Carlo of random k-subsets with a
standard-error tolerance, and the unbiasedness identity E_c[estimator] = 1 - (1 - mu)^k.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy.stats import binom

from fgrpo_theory.passk import pass_at_k, pass_at_k_exact


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_matches_subset_enumeration(n):
    # samples 0..c-1 are the correct ones; count k-subsets that contain one
    for c in range(n + 1):
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(range(n), k))
            hits = sum(1 for s in subsets if min(s) < c)
            assert pass_at_k(n, c, k) == pytest.approx(hits / len(subsets), rel=1e-14, abs=0)


def test_pass_at_k_matches_exact_rationals():
    n = np.arange(1, 41)
    for nn in n:
        c = np.arange(nn + 1)[:, None]
        k = np.arange(1, nn + 1)[None, :]
        got = pass_at_k(nn, c, k)
        for ci in range(nn + 1):
            for ki in range(1, nn + 1):
                exact = 1 - Fraction(math.comb(nn - ci, ki), math.comb(nn, ki))
                assert abs(got[ci, ki - 1] - float(exact)) <= 2e-15 * float(exact)


@pytest.mark.parametrize(
    ("c", "k"),
    [(1, 1), (1, 256), (3, 256), (10, 1), (1000, 50), (10, 50_000), (50_000, 7), (2, 99_990)],
)
def test_pass_at_k_mpmath_large_n(c, k):
    n = 100_000
    # mpmath.mp.dps = 50; 1 - mpmath.binomial(n - c, k) / mpmath.binomial(n, k)
    with mpmath.workdps(50):
        ref = 1 - mpmath.binomial(n - c, k) / mpmath.binomial(n, k)
    assert abs(pass_at_k(n, c, k) - float(ref)) <= 1e-13 * float(ref)


def test_pass_at_k_monte_carlo_subsampling():
    # Draw random k-subsets of n samples (c correct) without replacement; fixed seed.
    n, c, k, reps = 64, 5, 8, 100_000
    rng = np.random.default_rng(20260525)
    picks = rng.random((reps, n)).argsort(axis=1)[:, :k]
    hit = (picks < c).any(axis=1)
    p = pass_at_k(n, c, k)
    se = math.sqrt(p * (1 - p) / reps)
    assert abs(hit.mean() - p) < 4 * se


@pytest.mark.parametrize(("n", "mu", "k"), [(64, 0.1, 8), (1024, 0.003, 256), (20, 0.7, 20)])
def test_estimator_is_unbiased_for_exact_pass_at_k(n, mu, k):
    c = np.arange(n + 1)
    expected = float(np.sum(binom.pmf(c, n, mu) * pass_at_k(n, c, k)))
    assert expected == pytest.approx(pass_at_k_exact(mu, k), rel=1e-12)


def test_pass_at_k_edge_cases_and_shapes():
    assert pass_at_k(10, 0, 5) == 0.0
    assert math.copysign(1.0, pass_at_k(10, 0, 5)) == 1.0  # +0.0, not -0.0
    assert pass_at_k(10, 6, 5) == 1.0  # n - c < k: every 5-subset has a correct sample
    assert pass_at_k(10, 5, 5) < 1.0
    assert pass_at_k(1024, 3, 1) == 3 / 1024
    assert pass_at_k(4, 1, 2) == 0.5
    assert isinstance(pass_at_k(10, 2, 3), float)
    out = pass_at_k(1024, [[0], [3], [10]], [1, 256])
    assert out.shape == (3, 2)
    np.testing.assert_allclose(out[:, 0], [0, 3 / 1024, 10 / 1024], rtol=1e-15)
    assert np.all(np.diff(out, axis=0) >= 0)  # more correct samples, higher pass@k


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        ((10, 11, 1), r"^c must be <= n = 10; got 11$"),
        ((10, 2, 11), r"^k must be <= n = 10; got 11$"),
        ((10, 2, 0), r"^k must be >= 1; got 0(\.0)?$"),
        ((0, 0, 1), r"^n must be >= 1; got 0(\.0)?$"),
        ((10, -1, 1), r"^c must be >= 0; got -1(\.0)?$"),
        ((10, 2.5, 1), r"^c must be an integer; got 2.5$"),
        ((10, np.nan, 1), r"^c must be a finite number; got nan$"),
    ],
)
def test_pass_at_k_validation(args, pattern):
    with pytest.raises(ValueError, match=pattern):
        pass_at_k(*args)


def test_shapes_that_do_not_broadcast_name_the_argument():
    with pytest.raises(ValueError, match=r"^c must be broadcastable with n of shape \(3,\)"):
        pass_at_k([8, 9, 10], [1, 2], 1)
    with pytest.raises(ValueError, match=r"^k must be broadcastable with n and c of shape \(2,\)"):
        pass_at_k([8, 9], 1, [1, 2, 3])
    with pytest.raises(ValueError, match=r"^k must be broadcastable with mu of shape \(2,\)"):
        pass_at_k_exact([0.1, 0.2], [1, 2, 3])
    # (3000, 1) against (3000,) x 3 ... : 9e6 values is fine, (1e5, 1) x (1e5,) is refused
    assert pass_at_k(np.full((3000, 1), 8), 1, np.ones(3000, dtype=int)).shape == (3000, 3000)
    with pytest.raises(ValueError, match=r"^k must be inputs that broadcast to at most 134217728"):
        pass_at_k(np.full((10**5, 1), 8), 1, np.ones(10**5, dtype=int))
    with pytest.raises(ValueError, match=r"^k must be inputs that broadcast to at most 134217728"):
        pass_at_k_exact(np.full((10**5, 1), 0.5), np.ones(10**5, dtype=int))


@pytest.mark.parametrize("mu", [1e-300, 1e-15, 1e-12, 1e-6, 0.3, 0.999])
@pytest.mark.parametrize("k", [1, 256, 10**6])
def test_pass_at_k_exact_mpmath(mu, k):
    # mpmath.mp.dps = 350 (so 1 - 1e-300 is represented); 1 - (1 - mpmath.mpf(mu))**k
    with mpmath.workdps(350):
        ref = 1 - (1 - mpmath.mpf(mu)) ** k
    assert abs(pass_at_k_exact(mu, k) - float(ref)) <= 4e-15 * float(ref)


def test_pass_at_k_exact_edges():
    assert pass_at_k_exact(0.0, 5) == 0.0
    assert pass_at_k_exact(1.0, 5) == 1.0
    assert pass_at_k_exact(0.25, 1) == 0.25
    np.testing.assert_allclose(pass_at_k_exact([0.5, 0.1], [[1], [2]]), [[0.5, 0.1], [0.75, 0.19]])
    with pytest.raises(ValueError, match=r"^mu must be in \[0, 1\]; got 1.5$"):
        pass_at_k_exact(1.5, 1)
    with pytest.raises(ValueError, match=r"^k must be >= 1; got 0(\.0)?$"):
        pass_at_k_exact(0.5, 0)
