"""Tail-miss closed forms (Lemma 3.1, P-7) and the peak over N, against independent oracles.

Oracles: mpmath at 50 digits (direct formulas on the exact binary values of the float inputs),
Monte Carlo with multinomial groups over the three regions (tolerances from the binomial standard
error, fixed seeds), brute-force scans over integer N, and hand-computed values.
"""

from __future__ import annotations

import doctest
import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import fgrpo_theory.tail_miss as tm
from fgrpo_theory.tail_miss import (
    PeakResult,
    active_probability,
    all_modes_missed_probability,
    expected_missed_modes,
    hit_probability,
    peak_group_size,
    tail_miss_probability,
    tail_miss_probability_given_active,
)

REL = 1e-12
ABS = 1e-300


def assert_close(got: float, ref: float, rel: float = REL, abs_: float = ABS) -> None:
    assert math.isfinite(got)
    assert abs(got - ref) <= max(rel * abs(ref), abs_), (got, ref, abs(got - ref) / abs(ref))


# --------------------------------------------------------------------------------------------
# mpmath references (50 digits). Produced by:
#
#   from mpmath import mp, mpf, log, findroot
#   mp.dps = 50
#   def pb(N, mu, tau):
#       N, mu, tau = mpf(N), mpf(mu), mpf(tau)  # exact binary values of the floats
#       return (1 - tau) ** N - (mu - tau) ** N - (1 - mu) ** N
#   def pa(N, mu):
#       N, mu = mpf(N), mpf(mu)
#       return 1 - mu**N - (1 - mu) ** N
#   def ph(N, tau):
#       return 1 - (1 - mpf(tau)) ** mpf(N)
#   def nc(mu, tau):  # root of d/dN Pr(B), in log space
#       mu, tau = mpf(mu), mpf(tau)
#       a, b, c = 1 - tau, mu - tau, 1 - mu
#       f = lambda n: log((b / a) ** n * -log(b) + (c / a) ** n * -log(c)) - log(-log(a))
#       hi = mpf(2)
#       while f(hi) > 0:
#           hi *= 2
#       return findroot(f, (mpf(1), hi), solver="anderson")
#   print(mp.nstr(pb(N, mu, tau), 20))   # etc.; each pb value also agreed with mp.dps = 80
#
# (the tau of the "rho near 1" case is the float 0.3 * (1 - 1e-9)).
# --------------------------------------------------------------------------------------------

TAIL_MISS_REFS = [
    (8, 0.3, 0.015, "8.2842296452807630919e-1"),
    (2, 0.3, 0.015, "3.9899999999999999156e-1"),
    (1.5, 0.3, 0.015, "2.3977420346770191456e-1"),
    (1.000000001, 0.5, 0.1, "6.182654698100654799e-10"),
    (10000000.0, 0.3, 1e-12, "9.9999000004999982833e-1"),
    (10000000.0, 0.999999999999, 1e-12, "9.999628788404719897e-6"),
    (10000000.0, 0.5, 1e-12, "9.9999000004999982833e-1"),
    (100, 0.999999999999, 1e-12, "9.9997787813138287605e-11"),
    (2, 0.999999999999, 1e-12, "1.9999557565557571246e-12"),
    (1000, 1e-06, 1e-12, "9.9949966612559157847e-4"),
    (10000000.0, 1e-06, 1e-12, "9.9994460034723657611e-1"),
    (64, 0.3, 0.2999999997, "3.3456284690057304841e-18"),
    (100000.0, 0.99, 1e-12, "9.9999990000000499995e-1"),
    (5000, 0.3, 0.05, "4.1497931000097002716e-112"),
    (1000000.0, 0.999999, 1e-07, "5.7196653121035697755e-1"),
    (128, 0.64, 6.3e-05, "9.9196817483974568933e-1"),
    (131072, 0.64, 6.3e-05, "2.5922967236812539587e-4"),
    (10000000.0, 0.3, 0.015, "2.0182553729449158042e-65638"),
    (3, 0.5, 0.25, "2.8125e-1"),
    (693151453340, 0.999999999999, 1e-12, "2.4999616657336441972e-1"),
]

ACTIVE_REFS = [
    (2, 0.5, "5.0e-1"),
    (3, 0.3, "6.2999999999999998668e-1"),
    (1.5, 0.3, "2.5002121417459727757e-1"),
    (10000000.0, 0.999999999999, "9.9997287851825874214e-6"),
    (10000000.0, 1e-12, "9.9999500001716659989e-6"),
    (2, 0.999999999999, "1.9999557565577570804e-12"),
    (10000000.0, 0.3, "1.0"),
    (1.000000001, 0.5, "6.9314723767097363926e-10"),
]

HIT_REFS = [
    (2, 0.5, "7.5e-1"),
    (10000000.0, 1e-12, "9.9999500001716659989e-6"),
    (1, 1e-12, "9.9999999999999997989e-13"),
    (10000000.0, 0.5, "1.0"),
    (1.5, 0.3, "4.1433798142614710248e-1"),
]

PEAK_CONTINUOUS_REFS = [
    (0.3, 0.015, "9.2577383444565759302"),
    (0.3, 1e-12, "74.577962749783507671"),
    (0.999999999999, 1e-12, "693151453340.62571125"),
    (0.64, 6.3e-05, "19.864103118375045523"),
    (0.8, 0.008, "14.959982441010822468"),
    (0.5, 0.25, "2.7938141909477832674"),
    (1e-06, 1e-12, "13815517.965718360728"),
    (0.2, 0.002, "21.315159029327767483"),
]


@pytest.mark.parametrize(("N", "mu", "tau", "ref"), TAIL_MISS_REFS)
def test_tail_miss_matches_mpmath(N, mu, tau, ref):
    assert_close(tail_miss_probability(N, mu, tau), float(mpmath.mpf(ref)))


def test_tail_miss_references_as_one_array():
    N, mu, tau, ref = (np.array(col, dtype=float) for col in zip(*TAIL_MISS_REFS, strict=True))
    got = tail_miss_probability(N, mu, tau)
    assert isinstance(got, np.ndarray) and got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=REL, atol=ABS)


@pytest.mark.parametrize(("N", "mu", "ref"), ACTIVE_REFS)
def test_active_matches_mpmath(N, mu, ref):
    assert_close(active_probability(N, mu), float(mpmath.mpf(ref)))


@pytest.mark.parametrize(("N", "tau", "ref"), HIT_REFS)
def test_hit_matches_mpmath(N, tau, ref):
    assert_close(hit_probability(N, tau), float(mpmath.mpf(ref)))


@pytest.mark.parametrize(("mu", "tau", "ref"), PEAK_CONTINUOUS_REFS)
def test_continuous_peak_matches_mpmath(mu, tau, ref):
    assert_close(peak_group_size(mu, tau).n_star_continuous, float(mpmath.mpf(ref)))


# Property version of the mpmath comparison: random integer N up to 1e7, mu up to 1 - 1e-12,
# tau down to 1e-12 (log-uniform), against the direct formula at 50 digits.
@settings(max_examples=400)
@given(
    logN=st.floats(0, 7),
    logc=st.floats(-12, math.log10(0.999)),
    mu_side=st.booleans(),
    logrho=st.floats(-11, -1e-6),
)
def test_tail_miss_property_vs_mpmath(logN, logc, mu_side, logrho):
    N = float(round(10**logN))
    mu = 1.0 - 10**logc if mu_side else 10**logc
    tau = mu * 10**logrho
    assume(1e-12 <= tau < mu < 1.0)
    with mpmath.workdps(50):
        a, b, c = 1 - mpmath.mpf(tau), mpmath.mpf(mu) - mpmath.mpf(tau), 1 - mpmath.mpf(mu)
        ref = float(a ** mpmath.mpf(N) - b ** mpmath.mpf(N) - c ** mpmath.mpf(N))
        ref_active = float(1 - mpmath.mpf(mu) ** N - c ** mpmath.mpf(N))
    assert_close(tail_miss_probability(N, mu, tau), ref)
    assert_close(active_probability(N, mu), ref_active)


# --------------------------------------------------------------------------------------------
# hand-computed values, scalar/array behaviour, validation
# --------------------------------------------------------------------------------------------


def test_hand_computed_values():
    # mu = 0.5, tau = 0.25, N = 2: a = 0.75, b = 0.25, c = 0.5 -> 0.5625 - 0.0625 - 0.25 = 0.25
    assert tail_miss_probability(2, 0.5, 0.25) == pytest.approx(0.25, rel=1e-15)
    # N = 3, mu = 0.5, tau = 0.25: 27/64 - 1/64 - 8/64 = 18/64
    assert tail_miss_probability(3, 0.5, 0.25) == pytest.approx(18 / 64, rel=1e-15)
    # N = 2 in general: Pr(B) = 2 b c
    assert tail_miss_probability(2, 0.3, 0.1) == pytest.approx(2 * 0.2 * 0.7, rel=1e-15)
    assert active_probability(2, 0.3) == pytest.approx(2 * 0.3 * 0.7, rel=1e-15)
    assert hit_probability(3, 0.5) == pytest.approx(0.875, rel=1e-15)


def test_exactly_zero_at_N_equal_one():
    mu = np.array([1e-9, 0.3, 0.5, 1 - 1e-12])
    assert np.all(tail_miss_probability(1, mu, mu * 0.37) == 0.0)
    assert np.all(active_probability(1, mu) == 0.0)


def test_scalars_give_python_floats_and_arrays_broadcast():
    assert type(tail_miss_probability(8, 0.3, 0.015)) is float
    assert type(active_probability(8, 0.3)) is float
    assert type(hit_probability(8, 0.3)) is float
    assert type(expected_missed_modes(8, 0.3, [0.01, 0.02])) is float
    N = np.arange(1, 5)[:, None]
    mu = np.array([0.3, 0.6])
    got = tail_miss_probability(N, mu, 0.1)
    assert got.shape == (4, 2)
    assert got[2, 1] == tail_miss_probability(3, 0.6, 0.1)
    assert active_probability(N, mu).shape == (4, 2)
    assert hit_probability(N, mu).shape == (4, 2)
    assert isinstance(tail_miss_probability([8], 0.3, 0.1), np.ndarray)


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda: tail_miss_probability(8, 1.5, 0.1), r"^mu must be in \(0, 1\); got 1\.5$"),
        (lambda: tail_miss_probability(8, 0.0, 0.1), r"^mu must be in \(0, 1\); got 0\.0$"),
        (lambda: tail_miss_probability(8, 1.0, 0.1), r"^mu must be in \(0, 1\); got 1\.0$"),
        (lambda: tail_miss_probability(8, np.nan, 0.1), r"^mu must be a finite number; got nan$"),
        (lambda: tail_miss_probability(8, 0.3, 0.0), r"^tau must be > 0; got 0\.0$"),
        (lambda: tail_miss_probability(8, 0.3, 0.4), r"^tau must be < mu .*0\.3.*; got 0\.4$"),
        (lambda: tail_miss_probability(8, 0.3, 0.3), r"^tau must be < mu .*; got 0\.3$"),
        (lambda: tail_miss_probability(0.5, 0.3, 0.1), r"^N must be >= 1.*; got 0\.5$"),
        (lambda: tail_miss_probability(0, 0.3, 0.1), r"^N must be >= 1.*; got 0(\.0)?$"),
        (lambda: tail_miss_probability(np.inf, 0.3, 0.1), r"^N must be a finite number"),
        (lambda: tail_miss_probability([1, 2], [0.3] * 3, 0.1), r"^N must be broadcastable"),
        (lambda: active_probability([1, 2], [0.3] * 3), r"^N must be broadcastable with mu"),
        (lambda: hit_probability([1, 2], [0.3] * 3), r"^N must be broadcastable with tau"),
        (lambda: peak_group_size([0.3, 0.4], [0.1] * 3), r"^tau must be broadcastable with mu"),
        (lambda: active_probability(8, -0.1), r"^mu must be in \(0, 1\); got -0\.1$"),
        (lambda: hit_probability(8, 1.0), r"^tau must be in \(0, 1\); got 1\.0$"),
        (lambda: expected_missed_modes(8, 0.3, [0.2, 0.2]), r"^sum\(taus\) must be <= mu"),
        (lambda: expected_missed_modes(8, 0.3, [0.2, 0.0]), r"^taus must be > 0"),
        (lambda: expected_missed_modes(8, 0.3, 0.1), r"^taus must be a 1-d array"),
        (lambda: all_modes_missed_probability(8, 0.3, [0.1, 0.2]), r"^sum\(taus\) must be < mu"),
        (lambda: peak_group_size(0.3, [0.1, 0.5]), r"^tau must be < mu .*; got 0\.5$"),
        (lambda: peak_group_size(1.2, 0.1), r"^mu must be in \(0, 1\); got 1\.2$"),
    ],
)
def test_bad_input_raises_one_line_value_error(call, pattern):
    with pytest.raises(ValueError, match=pattern) as info:
        call()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("call", "rule"),
    [
        (lambda: active_probability([1, 2], [0.3] * 3), ("N", (2,), "mu", (3,))),
        (lambda: hit_probability([1, 2], [0.3] * 3), ("N", (2,), "tau", (3,))),
        (lambda: tail_miss_probability([1, 2], [0.3] * 3, 0.1), ("N", (2,), "mu and tau", (3,))),
        (lambda: peak_group_size([0.3, 0.4], [0.1] * 3), ("tau", (3,), "mu", (2,))),
        (
            lambda: tail_miss_probability_given_active(
                np.arange(2, 2**14)[:, None], 0.5, [0.1] * 2**14
            ),
            ("N", (2**14 - 2, 1), "mu and tau", (2**14,)),
        ),
    ],
)
def test_broadcast_refusals_are_the_shared_rule(call, rule):
    """tail_miss refuses shapes by _validate.check_broadcastable (one rule, one wording): its
    message is the shared function's, word for word, for shapes that do not broadcast and for a
    broadcast past MAX_BROADCAST values."""
    from fgrpo_theory._validate import check_broadcastable

    with pytest.raises(ValueError) as expected:
        check_broadcastable(*rule)
    with pytest.raises(ValueError) as got:
        call()
    assert str(got.value) == str(expected.value)
    assert not hasattr(tm, "_check_broadcast")


def test_modes_refuse_a_broadcast_past_the_limit_before_allocating(monkeypatch):
    """expected_missed_modes holds one term per mode of every broadcast (N, mu): N (20, 1)
    against mu (20,) and 2 modes is 800 values, refused by the shared size rule with the limit
    lowered to 100 (the same inputs at 10 x 10 pass; all_modes_missed_probability holds no
    per-mode terms, so 2 modes count once)."""
    import fgrpo_theory._validate as validate

    monkeypatch.setattr(validate, "MAX_BROADCAST", 100)
    N20, mu20 = np.arange(1, 21)[:, None], np.full(20, 0.5)
    for f in (expected_missed_modes, all_modes_missed_probability):
        with pytest.raises(ValueError, match=r"^taus must be inputs that broadcast to at most 100"):
            f(N20, mu20, [0.01, 0.02])
    N10, mu10 = np.arange(1, 11)[:, None], np.full(10, 0.5)
    with pytest.raises(ValueError, match=r"shape \(10, 10, 2\) \(200 values\)"):
        expected_missed_modes(N10, mu10, [0.01, 0.02])
    assert expected_missed_modes(N10, mu10, [0.01]).shape == (10, 10)
    assert all_modes_missed_probability(N10, mu10, [0.01, 0.02]).shape == (10, 10)


def test_doctests():
    result = doctest.testmod(tm, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 6 and result.failed == 0


# --------------------------------------------------------------------------------------------
# properties
# --------------------------------------------------------------------------------------------

mus = st.floats(1e-4, 1 - 1e-4)
rhos = st.floats(1e-6, 1 - 1e-6)


@settings(max_examples=300)
@given(N=st.floats(1, 1e6), mu=mus, rho=rhos)
def test_bounds(N, mu, rho):
    tau = mu * rho
    assume(tau < mu)
    p = tail_miss_probability(N, mu, tau)
    assert 0.0 <= p <= active_probability(N, mu) * (1 + 1e-12)
    assert p <= math.exp(N * math.log1p(-tau)) * (1 + 1e-12)  # Pr(no rollout in E)


@given(mu=mus, rho=rhos)
def test_tends_to_zero_for_large_N(mu, rho):
    tau = mu * rho
    assume(tau < mu)
    # Pr(B) <= (1 - tau)^N <= exp(-N tau) = exp(-40) at N = 40 / tau.
    N = 40.0 / tau
    assert tail_miss_probability(N, mu, tau) <= math.exp(-40.0)
    # and it decreases beyond the peak
    n_c = peak_group_size(mu, tau).n_star_continuous
    grid = n_c * np.array([1.0, 1.5, 2.0, 4.0, 16.0])
    p = tail_miss_probability(grid, mu, tau)
    assert np.all(np.diff(p) <= 0)


def _simulate_groups(rng, N, probs, n_groups):
    return rng.multinomial(N, probs, size=n_groups)


@settings(max_examples=40)
@given(N=st.integers(1, 120), mu=st.floats(0.02, 0.98), rho=st.floats(0.01, 0.95))
def test_monte_carlo_agreement(N, mu, rho):
    """Multinomial groups over (E, C minus E, incorrect); 5 binomial standard errors."""
    tau = mu * rho
    rng = np.random.default_rng(20260521)
    n_groups = 40_000
    counts = _simulate_groups(rng, N, [tau, mu - tau, 1.0 - mu], n_groups)
    n_e, n_rest, n_wrong = counts.T
    correct = n_e + n_rest
    active = (correct > 0) & (n_wrong > 0)
    miss = active & (n_e == 0)
    for est, p in [
        (miss.mean(), tail_miss_probability(N, mu, tau)),
        (active.mean(), active_probability(N, mu)),
        ((n_e > 0).mean(), hit_probability(N, tau)),
    ]:
        se = math.sqrt(max(p * (1 - p), 1e-12) / n_groups)
        assert abs(est - p) <= 5 * se + 1.0 / n_groups, (est, p, se)


@settings(max_examples=30)
@given(
    N=st.integers(1, 80),
    mu=st.floats(0.05, 0.95),
    shares=st.lists(st.floats(0.01, 1.0), min_size=1, max_size=4),
    cover=st.floats(0.05, 0.9),
)
def test_expected_missed_modes_monte_carlo(N, mu, shares, cover):
    taus = np.asarray(shares) / np.sum(shares) * mu * cover
    rng = np.random.default_rng(7)
    n_groups = 40_000
    probs = np.concatenate([taus, [mu - taus.sum(), 1.0 - mu]])
    probs = probs / probs.sum()
    counts = _simulate_groups(rng, N, probs, n_groups)
    m = taus.size
    n_correct = counts[:, : m + 1].sum(axis=1)
    active = (n_correct > 0) & (counts[:, m + 1] > 0)
    missed = np.where(active, (counts[:, :m] == 0).sum(axis=1), 0)
    all_missed = active & (counts[:, :m].sum(axis=1) == 0)
    exp_missed = expected_missed_modes(N, mu, taus)
    se = max(missed.std(ddof=1), 1e-6) / math.sqrt(n_groups)
    assert abs(missed.mean() - exp_missed) <= 5 * se + 1.0 / n_groups
    p_all = all_modes_missed_probability(N, mu, taus)
    se_all = math.sqrt(max(p_all * (1 - p_all), 1e-12) / n_groups)
    assert abs(all_missed.mean() - p_all) <= 5 * se_all + 1.0 / n_groups


def test_expected_missed_modes_structure():
    # one mode: Lemma 3.1; several: the sum; leading axes broadcast against N and mu
    assert expected_missed_modes(8, 0.3, [0.01]) == tail_miss_probability(8, 0.3, 0.01)
    taus = np.array([[0.01, 0.02], [0.03, 0.04]])
    got = expected_missed_modes(np.array([[4], [8], [16]])[:, :, None][:, :, 0], 0.3, taus)
    assert got.shape == (3, 2)
    want = tail_miss_probability(16, 0.3, 0.03) + tail_miss_probability(16, 0.3, 0.04)
    assert got[2, 1] == pytest.approx(want, rel=1e-15)
    # modes covering all of C are allowed for the expectation
    assert expected_missed_modes(5, 0.5, [0.25, 0.25]) > 0


# --------------------------------------------------------------------------------------------
# peak
# --------------------------------------------------------------------------------------------


def test_peak_examples_by_brute_force():
    # direct formula over N = 1..400 in float: fine in this well-conditioned range
    N = np.arange(1, 401, dtype=float)
    for mu, rho in [(0.3, 0.05), (0.3, 0.1), (0.3, 0.2), (0.8, 0.01), (0.5, 0.5), (0.2, 0.01)]:
        tau = mu * rho
        direct = (1 - tau) ** N - (mu - tau) ** N - (1 - mu) ** N
        res = peak_group_size(mu, tau)
        assert isinstance(res, PeakResult)
        assert type(res.n_star) is int and type(res.p_peak) is float
        assert res.n_star == int(N[np.argmax(direct)])
        assert res.p_peak == pytest.approx(direct.max(), rel=1e-13)


@settings(max_examples=200)
@given(mu=st.floats(0.01, 0.99), rho=st.floats(1e-3, 0.99))
def test_integer_peak_beats_neighbours_and_scan(mu, rho):
    tau = mu * rho
    assume(tau < mu)
    res = peak_group_size(mu, tau)
    n, nc = res.n_star, res.n_star_continuous
    assert n >= 2 and math.floor(nc) <= n <= math.ceil(nc)
    assert res.p_peak == tail_miss_probability(n, mu, tau)
    assert res.p_peak >= tail_miss_probability(n + 1, mu, tau)
    assert res.p_peak >= tail_miss_probability(n - 1, mu, tau)
    scan = np.arange(1, max(64, int(4 * nc)) + 1)
    p_scan = tail_miss_probability(scan, mu, tau)
    assert res.p_peak >= p_scan.max()
    assert n == scan[np.argmax(p_scan)]
    # unimodal: differences change sign once (+ then -)
    d = np.sign(np.diff(p_scan))
    d = d[d != 0]
    assert np.all(np.diff(d) <= 0)


@settings(max_examples=300)
@given(mu=st.floats(1e-6, 1 - 1e-6), rho1=st.floats(1e-6, 0.99), ratio=st.floats(1.05, 100.0))
def test_smaller_rho_moves_peak_right_and_up(mu, rho1, ratio):
    rho2 = rho1 * ratio
    assume(rho2 < 0.999)
    small, large = peak_group_size(mu, mu * rho1), peak_group_size(mu, mu * rho2)
    assert small.n_star_continuous > large.n_star_continuous
    assert small.n_star >= large.n_star
    assert small.p_peak > large.p_peak


def test_peak_broadcasts_and_handles_tiny_tau():
    res = peak_group_size(np.array([0.2, 0.5, 0.8]), np.array([[0.002], [0.01]]))
    assert res.n_star.shape == res.n_star_continuous.shape == res.p_peak.shape == (2, 3)
    assert res.n_star.dtype == np.int64
    assert res.n_star[0, 0] == peak_group_size(0.2, 0.002).n_star
    # tau = 1e-12 with mu close to 1: the peak is near 7e11, found without scanning
    tiny = peak_group_size(1 - 1e-12, 1e-12)
    p = [tail_miss_probability(tiny.n_star + k, 1 - 1e-12, 1e-12) for k in (-1, 0, 1)]
    assert p[1] >= max(p[0], p[2])
    assert tiny.p_peak == pytest.approx(0.24999616657336441972, rel=1e-12)  # mpmath pb() above


# Subnormal and tiny tau: log1p(ln v / ln a) overflowed (ln a = log1p(-tau) is subnormal), the
# peak of about 1,065 was refused as "beyond 2**53" after NumPy's overflow warnings. References:
# mp.dps = 400 (so 1 - tau is exact), bisection of k(N) = a^N ln a - b^N ln b - c^N ln c on
# [2, 20000] (120 halvings), n_star by comparing Pr(B) = a^N - b^N - c^N at floor(root) and +1.
PEAK_TINY_TAU_REFS = [
    (0.5, 5e-321, "1064.4882400523607923", 1065),
    (0.5, 5e-324, "1074.4712336270551024", 1074),
    (0.3, 1e-300, "1933.8184786636862009", 1934),
    (0.9, 1e-315, "6862.7600430087720732", 6863),
]


@pytest.mark.parametrize(("mu", "tau", "ref_cont", "ref_int"), PEAK_TINY_TAU_REFS)
def test_peak_with_a_subnormal_tau_matches_mpmath_without_warnings(mu, tau, ref_cont, ref_int):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = peak_group_size(mu, tau)
    assert_close(res.n_star_continuous, float(mpmath.mpf(ref_cont)))
    assert res.n_star == ref_int


@pytest.mark.parametrize(("mu", "tau"), [(1e-300, 5e-301), (3e-308, 2.5e-308), (1e-310, 5e-311)])
def test_peak_beyond_2_53_with_tiny_mu_is_refused_without_warnings(mu, tau):
    # u = min(mu - tau, 1 - mu) / (1 - tau) below 1e-289: the bracket passed the largest float
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"^tau must be such that the peak group size is"):
            peak_group_size(mu, tau)


# --------------------------------------------------------------------------------------------
# peak when tau is within ~1e-9 (relative) of mu (issue 10 item 12)
# --------------------------------------------------------------------------------------------

# Continuous root by nc() above (mp.dps = 50); integer argmax by comparing pb(n) and pb(n + 1) at
# n = floor(nc) with mp.dps = 50:
#   r = nc(mu, tau); n = int(mpmath.floor(r))
#   n_star = n if pb(n, mu, tau) >= pb(n + 1, mu, tau) else n + 1
# (at the first two, Pr(B) at n and n + 1 differ in the 17th digit: 3.9235059151682945114e-11
# against 3.9235059151682943055e-11, and 4.24391104479025596e-10 against 4.2439110447902553744e-10).
PEAK_NEAR_MU_REFS = [
    (1.0985812721926083e-08, 1.0985812720754425e-08, "91026492.065039957791", 91026492),
    (7.322842159514167e-08, 7.32284215106643e-08, "13655899.474268347381", 13655899),
    (0.3, 0.2999999997, "2.8036732537415405818", 3),
    (1e-3, 1e-3 * (1 - 1e-11), "999.49991662997358711", 1000),
    (0.999, 0.999 * (1 - 1e-9), "1.0840512768485849198", 2),
]


@pytest.mark.parametrize(("mu", "tau", "ref_cont", "ref_int"), PEAK_NEAR_MU_REFS)
def test_peak_when_tau_is_close_to_mu(mu, tau, ref_cont, ref_int):
    res = peak_group_size(mu, tau)
    assert_close(res.n_star_continuous, float(mpmath.mpf(ref_cont)))
    assert res.n_star == ref_int
    assert res.p_peak == tail_miss_probability(ref_int, mu, tau)


def test_peak_near_mu_as_array():
    mu, tau, ref_cont, ref_int = zip(*PEAK_NEAR_MU_REFS, strict=True)
    res = peak_group_size(np.array(mu), np.array(tau))
    np.testing.assert_array_equal(res.n_star, ref_int)
    np.testing.assert_allclose(res.n_star_continuous, [float(r) for r in ref_cont], rtol=REL)


# --------------------------------------------------------------------------------------------
# Pr(B | A_N): tail miss among active groups (docs/theory.md section 12)
# --------------------------------------------------------------------------------------------

# mpmath references. Produced by pb() and pa() above (the exact binary values of the floats) at
# mp.dps = 700, agreeing to 40 digits with mp.dps = 750 (700 digits are needed for mu = 1e-200):
#   with mpmath.workdps(700):
#       print(mp.nstr(pb(N, mu, tau) / pa(N, mu), 20))
GIVEN_ACTIVE_REFS = [
    (2, 0.3, 0.015, "0.95"),
    (64, 0.3, 0.015, "0.38011827676676758127"),
    (1.000000001, 0.5, 0.1, "0.89196845375519856594"),
    (2, 0.999999999999, 1e-12, "0.999999999999"),
    (3, 1e-200, 1e-210, "0.9999999999"),
    (10, 1e-12, 1e-13, "0.89999999999959499495"),
    (10000000.0, 0.999999999999, 1e-12, "0.99999000005099981333"),
    (1000000.0, 0.3, 1e-07, "0.90483741351177219678"),
    (5000, 0.3, 0.05, "4.1497931000097002716e-112"),
    (131072, 0.64, 6.3e-05, "0.00025922967236812539587"),
    (100, 0.5, 0.4999999999, "1.5777219566027601503e-38"),
    (1.5, 0.3, 0.015, "0.95901543498729044034"),
]


@pytest.mark.parametrize(("N", "mu", "tau", "ref"), GIVEN_ACTIVE_REFS)
def test_given_active_matches_mpmath(N, mu, tau, ref):
    assert_close(tail_miss_probability_given_active(N, mu, tau), float(mpmath.mpf(ref)))


def _exact_three_region(N: int, mu: float, tau: float) -> tuple[Fraction, Fraction]:
    """Pr(B) and Pr(A_N) by exact enumeration of the multinomial over (E, C minus E, wrong)."""
    t, m = Fraction(tau), Fraction(mu)
    probs = (t, m - t, 1 - m)
    p_b = p_a = Fraction(0)
    for e, r in itertools.product(range(N + 1), repeat=2):
        w = N - e - r
        if w < 0:
            continue
        coef = math.factorial(N) // (math.factorial(e) * math.factorial(r) * math.factorial(w))
        p = coef * probs[0] ** e * probs[1] ** r * probs[2] ** w
        if e + r > 0 and w > 0:
            p_a += p
            if e == 0:
                p_b += p
    return p_b, p_a


@pytest.mark.parametrize("N", [2, 3, 5, 8, 13])
@pytest.mark.parametrize(("mu", "tau"), [(0.3, 0.015), (0.5, 0.25), (0.9, 0.6), (1e-6, 1e-9)])
def test_given_active_matches_exact_enumeration(N, mu, tau):
    p_b, p_a = _exact_three_region(N, mu, tau)
    assert_close(tail_miss_probability_given_active(N, mu, tau), float(p_b / p_a), rel=1e-14)
    assert_close(tail_miss_probability(N, mu, tau), float(p_b), rel=1e-14)


@pytest.mark.parametrize("N", [2, 5, 16, 64])
def test_given_active_monte_carlo(N):
    """Fraction of active multinomial groups that miss E; 5 binomial standard errors."""
    mu, tau = 0.3, 0.015
    rng = np.random.default_rng(20261122 + N)
    n_e, n_rest, n_wrong = rng.multinomial(N, [tau, mu - tau, 1 - mu], size=200_000).T
    active = (n_e + n_rest > 0) & (n_wrong > 0)
    est = (active & (n_e == 0)).sum() / active.sum()
    p = tail_miss_probability_given_active(N, mu, tau)
    se = math.sqrt(p * (1 - p) / active.sum())
    assert abs(est - p) <= 5 * se, (est, p, se)


def test_given_active_section_12_values_and_monotone_in_N():
    # docs/theory.md section 12: mu = 0.3, rho = 0.05 gives 0.95 at N = 2 and 0.38 at N = 64
    assert tail_miss_probability_given_active(2, 0.3, 0.015) == pytest.approx(0.95, rel=1e-14)
    assert round(tail_miss_probability_given_active(64, 0.3, 0.015), 2) == 0.38
    N = np.arange(2, 2000)
    for mu, rho in [(0.3, 0.05), (0.8, 0.01), (0.05, 0.5), (0.999, 1e-4)]:
        p = tail_miss_probability_given_active(N, mu, mu * rho)
        assert np.all(np.diff(p) <= 0)
        assert np.all(p >= tail_miss_probability(N, mu, mu * rho))


@pytest.mark.parametrize("N", [1, 1.0, 0.5, [4, 1]])
def test_given_active_refuses_N_of_one(N):
    with pytest.raises(ValueError, match=r"^N must be > 1 .*undefined at N = 1.*; got ") as info:
        tail_miss_probability_given_active(N, 0.3, 0.015)
    assert "\n" not in str(info.value)


def test_given_active_validates_mu_and_tau():
    with pytest.raises(ValueError, match=r"^tau must be < mu"):
        tail_miss_probability_given_active(4, 0.3, 0.3)
    with pytest.raises(ValueError, match=r"^mu must be in \(0, 1\); got 1\.0$"):
        tail_miss_probability_given_active(4, 1.0, 0.3)


# --------------------------------------------------------------------------------------------
# pandas Series keep their index
# --------------------------------------------------------------------------------------------


def test_series_keep_their_index():
    idx = pd.Index(["x", "y", "z"], name="prompt")
    N = pd.Series([2.0, 8.0, 64.0], index=idx)
    mu = pd.Series([0.3, 0.5, 0.8], index=idx)
    cases = [
        (tail_miss_probability(N, mu, 0.01), "p_tail_miss", tail_miss_probability(8, 0.5, 0.01)),
        (active_probability(N, mu), "p_active", active_probability(8, 0.5)),
        (hit_probability(N, 0.01), "p_hit", hit_probability(8, 0.01)),
        (
            tail_miss_probability_given_active(N, mu, 0.01),
            "p_tail_miss_given_active",
            tail_miss_probability_given_active(8, 0.5, 0.01),
        ),
        (
            expected_missed_modes(N, mu, [0.01, 0.02]),
            "expected_missed_modes",
            expected_missed_modes(8, 0.5, [0.01, 0.02]),
        ),
        (
            all_modes_missed_probability(N, mu, [0.01, 0.02]),
            "p_all_modes_missed",
            all_modes_missed_probability(8, 0.5, [0.01, 0.02]),
        ),
    ]
    for got, name, at_y in cases:
        assert isinstance(got, pd.Series) and got.index.equals(idx) and got.name == name
        assert got["y"] == at_y
    # one Series among scalars and arrays of its shape
    got = tail_miss_probability(8, mu, np.array([0.01, 0.02, 0.03]))
    assert isinstance(got, pd.Series) and got.index.equals(idx)
    res = peak_group_size(mu, 0.01)
    for field, name in zip(res, PeakResult._fields, strict=True):
        assert isinstance(field, pd.Series) and field.index.equals(idx) and field.name == name
    assert res.n_star["z"] == peak_group_size(0.8, 0.01).n_star
    # a result with more dimensions than the Series is an ndarray
    grid = tail_miss_probability(np.array([[2.0], [4.0]]), mu, 0.01)
    assert type(grid) is np.ndarray and grid.shape == (2, 3)


def test_series_with_different_indexes_are_refused():
    a = pd.Series([2.0, 8.0], index=[0, 1])
    b = pd.Series([0.3, 0.5], index=[1, 2])
    with pytest.raises(ValueError, match=r"^mu must be a Series with the index of N; got "):
        tail_miss_probability(a, b, 0.01)


def _mp_peak(mu: float, tau: float) -> tuple[mpmath.mpf, int]:
    """nc() of the reference snippet above and the integer argmax beside it, at 50 digits."""
    with mpmath.workdps(50):
        m, t = mpmath.mpf(mu), mpmath.mpf(tau)
        a, b, c = 1 - t, m - t, 1 - m

        def f(n):
            return mpmath.log((b / a) ** n * -mpmath.log(b) + (c / a) ** n * -mpmath.log(c)) - (
                mpmath.log(-mpmath.log(a))
            )

        hi = mpmath.mpf(2)
        while f(hi) > 0:
            hi *= 2
        root = mpmath.findroot(f, (mpmath.mpf(1), hi), solver="anderson")
        n = int(mpmath.floor(root))

        def pb(k):
            return a**k - b**k - c**k

        return root, (n if pb(n) >= pb(n + 1) else n + 1)


@settings(max_examples=25, deadline=None)
@given(
    log_mu=st.floats(-9, -0.01),
    near_one=st.booleans(),
    log_gap=st.floats(-13, -1),
)
def test_peak_near_mu_property_vs_mpmath(log_mu, near_one, log_gap):
    mu = 1 - 10**log_mu if near_one else 10**log_mu
    tau = mu * (1 - 10**log_gap)
    assume(0 < tau < mu < 1)
    root, n_star = _mp_peak(mu, tau)
    res = peak_group_size(mu, tau)
    assert_close(res.n_star_continuous, float(root))
    assert res.n_star == n_star
