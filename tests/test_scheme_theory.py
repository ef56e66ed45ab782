"""Section 15 closed forms (fgrpo_theory.schemes.theory) against independent oracles: exact
enumeration of group outcomes on small tabular policies, Monte Carlo on a large one, 80-digit
mpmath, hand cases and the reference values of docs/theory.md section 15."""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest

from fgrpo_theory.advantages import effective_lr_multiplier, lr_multiplier
from fgrpo_theory.schemes import SCHEMES, parse_scheme
from fgrpo_theory.schemes.theory import (
    Beta,
    difficulty_profile,
    implied_objective,
    passk_error_bound,
    passk_weights,
    scheme_lr_multiplier,
)

TABLE_SCHEMES = [n for n, d in SCHEMES.items() if d.table is not None and d.role == "advantage"]
SPECS = TABLE_SCHEMES + ["focal:gamma=0.5", "focal:gamma=1", "trl+focal:gamma=2", "pkpo:k=2"]

# docs/theory.md section 15, N = 8, rewards 1/0 (3 decimals)
REFERENCE = {
    "maxrl": [1, 1 / 2, 1 / 3, 1 / 4, 1 / 5, 1 / 6, 1 / 7, 0],
    "grpo": [2.646, -1.875, 2.058, -1.279, 0.644, -0.132, 0.038, 0],
    "focal:gamma=0.5": [0.935, 0.225, 0.107, 0.064, 0.042, 0.028, 0.019, 0],
    "focal:gamma=1": [0.331, 0.523, -0.009, 0.133, 0.019, 0.035, 0.019, 0],
}


def _enumerated_gradient(spec, N, logits, rc=1.0, rw=0.0):
    """Expected gradient of the (1/N) surrogate w.r.t. the logits of a tabular softmax policy,
    by summing over every ordered group of N actions (action 0 and 1 correct)."""
    a_c, a_w = parse_scheme(spec).tables(N, rc, rw)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    correct = np.array([True, True] + [False] * (len(p) - 2))
    grad = np.zeros(len(p))
    for group in itertools.product(range(len(p)), repeat=N):
        prob = math.prod(p[a] for a in group)
        X = sum(correct[a] for a in group)
        for a in group:
            A = a_c[X] if correct[a] else a_w[X]
            onehot = np.zeros(len(p))
            onehot[a] = 1.0
            grad += prob * A * (onehot - p) / N  # grad log softmax = e_a - p
    mu = p[correct].sum()
    grad_mu = p * (correct - mu)  # d mu / d logits
    return grad, grad_mu, mu


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("N", [2, 4])
def test_profile_matches_exact_enumeration(spec, N):
    if spec == "pkpo" and N < 4:
        pytest.skip("pkpo's default k = 4 needs N >= 4")
    logits = np.array([0.3, -1.1, 0.4, -0.2])
    grad, grad_mu, mu = _enumerated_gradient(spec, N, logits)
    H = difficulty_profile(spec, N, mu)
    np.testing.assert_allclose(grad, H * grad_mu, rtol=1e-12, atol=1e-14)


def test_profile_dr_grpo_with_pm_one_rewards_and_enumeration():
    logits = np.array([-0.5, 0.2, 1.0])
    grad, grad_mu, mu = _enumerated_gradient("dr-grpo", 3, logits, rc=1.0, rw=-1.0)
    H = difficulty_profile("dr-grpo", 3, mu, 1.0, -1.0)
    np.testing.assert_allclose(grad, H * grad_mu, rtol=1e-12, atol=1e-14)
    for N in (2, 8, 64):  # section 15: H = 2 (1 - 1/N), pass@1 only
        h = difficulty_profile("dr-grpo", N, np.linspace(0, 1, 7), 1.0, -1.0)
        np.testing.assert_allclose(h, 2 * (1 - 1 / N), rtol=1e-13)
        c = passk_weights("dr-grpo", N, 1.0, -1.0) if N <= 16 else None
        if c is not None:
            np.testing.assert_allclose(c, [2 * (1 - 1 / N)] + [0] * (N - 1), atol=1e-13)


def test_profile_matches_monte_carlo_on_a_large_policy():
    # 1000 actions, 40 of them correct; the gradient estimate of the surrogate over B groups
    rng = np.random.default_rng(2602_06717)
    K, N, B = 1000, 8, 20_000
    logits = rng.normal(size=K)
    correct = np.zeros(K, bool)
    correct[:40] = True
    p = np.exp(logits - logits.max())
    p /= p.sum()
    mu = p[correct].sum()
    for spec in ("grpo", "maxrl", "focal:gamma=1"):
        a_c, a_w = parse_scheme(spec).tables(N, 1.0, 0.0)
        acts = rng.choice(K, size=(B, N), p=p)
        c = correct[acts]
        X = c.sum(axis=1, keepdims=True)
        A = np.where(c, a_c[X], a_w[X])
        # per group: (1/N) sum_i A_i (e_{a_i} - p), projected on the direction grad mu / |.|^2
        grad_mu = p * (correct - mu)
        u = grad_mu / (grad_mu @ grad_mu)
        proj = (A * (u[acts] - (p @ u))).sum(axis=1) / N
        est, se = proj.mean(), proj.std(ddof=1) / math.sqrt(B)
        H = difficulty_profile(spec, N, mu)
        assert abs(est - H) <= 4 * se, (spec, est, H, se)


@pytest.mark.parametrize("spec", ["grpo", "maxrl", "focal:gamma=0.5", "pkpo:k=3", "w-reinforce"])
def test_implied_objective_is_the_integral_of_the_profile(spec):
    mu = np.array([0.0, 0.05, 0.3, 0.77, 1.0])
    F = implied_objective(spec, 8, mu)
    for m, f in zip(mu, F, strict=True):
        ref = mp.quad(lambda t: difficulty_profile(spec, 8, float(t)), [0, m]) if m else 0
        assert abs(f - float(ref)) <= 1e-12 * max(1, abs(f))
    # and it is sum_k c_k pass@k (both sides exact)
    c = passk_weights(spec, 8)
    passk = 1 - (1 - mu[:, None]) ** np.arange(1, 9)
    np.testing.assert_allclose(F, passk @ c, rtol=1e-12, atol=1e-14)


def test_maxrl_objective_by_hand():
    F = implied_objective("maxrl", 8, 0.3)
    assert F == pytest.approx(sum((1 - 0.7**k) / k for k in range(1, 8)), rel=1e-14)


@pytest.mark.parametrize("spec", list(REFERENCE))
def test_passk_weights_reference_values(spec):
    c = passk_weights(spec, 8)
    atol = 1e-14 if spec == "maxrl" else 6e-4
    np.testing.assert_allclose(c, REFERENCE[spec], atol=atol)


@pytest.mark.parametrize("k", [1, 2, 5, 8])
@pytest.mark.parametrize("estimator", ["loo-1", "plain"])
def test_pkpo_optimizes_pass_at_k_only(k, estimator):
    N = 8
    c = passk_weights(f"pkpo:k={k},estimator={estimator}", N)
    expect = np.zeros(N)
    expect[k - 1] = 1 / N
    np.testing.assert_allclose(c, expect, atol=1e-14)


def _mp_grpo_focal_weights(N, gamma):
    """c_k from GRPO (population std, rewards 1/0) with focal gamma, tables in 80 digits."""
    mp.mp.dps = 80
    g = mp.mpf(gamma)

    def ac(X):
        return mp.sqrt(mp.mpf(N - X) / X) * (1 - mp.mpf(X) / N) ** g if 0 < X < N else 0

    def aw(X):
        return -mp.sqrt(mp.mpf(X) / (N - X)) * (1 - mp.mpf(X) / N) ** g if 0 < X < N else 0

    coef = [mp.mpf(0)] * N
    for y in range(N):
        d = ac(y + 1) - aw(y)
        for i in range(y + 1):
            coef[N - 1 - y + i] += d * math.comb(N - 1, y) * math.comb(y, i) * (-1) ** i
    return [coef[k - 1] / k for k in range(1, N + 1)]


@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("N", [8, 16, 22])
def test_passk_weights_against_80_digits_and_error_bound(gamma, N):
    spec = f"grpo+focal:gamma={gamma}"
    c = passk_weights(spec, N)
    ref = np.array([float(x) for x in _mp_grpo_focal_weights(N, gamma)])
    err = np.abs(c - ref)
    bound = passk_error_bound(spec, N)
    assert np.all(err <= bound + 1e-16 * np.abs(ref))  # the bound holds
    assert err.max() <= 1e-6 * np.abs(ref).max()


def test_passk_weights_refuse_untrusted_N():
    with pytest.raises(ValueError, match=r"^N must be small enough .* grpo .*; got 44$"):
        passk_weights("grpo", 44)
    with pytest.raises(ValueError, match=r"^N must be <= 200 for pass@k weights; got 201$"):
        passk_weights("psr", 201)
    # the refusal is needed: at N = 64 the exact expansion of the float64 tables of focal
    # gamma = 0.5 is far from the 80-digit weights
    from fgrpo_theory.schemes.theory import _expand

    a_c, a_w = parse_scheme("focal:gamma=0.5").tables(64, 1.0, 0.0)
    c = np.array([float(x) for x in _expand(a_c, a_w, 64)])
    ref = np.array([float(x) for x in _mp_grpo_focal_weights(64, 0.5)])
    assert np.abs(c - ref).max() > 1e-3 * np.abs(ref).max()


def test_profile_bad_input_is_one_line():
    for call, msg in [
        (lambda: difficulty_profile("nope", 8, 0.5), "scheme must be one of"),
        (lambda: difficulty_profile("grpo", 0, 0.5), "N must be"),
        (lambda: difficulty_profile("grpo", 8, 1.5), "mu must be in [0, 1]; got 1.5"),
        (lambda: difficulty_profile("trl-batch", 8, 0.5), "scheme must be a binary group"),
        (lambda: implied_objective("grpo", 8, np.nan), "mu must be a finite number"),
        (lambda: difficulty_profile("grpo", 10_000, np.zeros(10_000)), "mu must be at most"),
    ]:
        with pytest.raises(ValueError) as e:
            call()
        assert msg in str(e.value) and "\n" not in str(e.value)


def test_profile_broadcasts_and_is_stable_at_large_N():
    mu = np.array([[0.1, 0.5], [0.9, 0.0]])
    assert difficulty_profile("grpo", 8, mu).shape == (2, 2)
    assert isinstance(difficulty_profile("grpo", 8, 0.5), float)
    # maxrl, N = 10^4: H(mu) = sum_{k<N} (1 - mu)^(k-1) = (1 - (1-mu)^(N-1)) / mu
    N = 10_000
    mu = np.array([1e-4, 0.01, 0.5])
    expect = (1 - (1 - mu) ** (N - 1)) / mu
    np.testing.assert_allclose(difficulty_profile("maxrl", N, mu), expect, rtol=1e-10)


# -- learning-rate multiplier ------------------------------------------------------------------


def test_lr_multiplier_reproduces_the_focal_multiplier_on_pass_rates():
    rng = np.random.default_rng(7)
    mu = rng.beta(0.5, 2.0, size=50)
    for gamma in (0.5, 1.0, 2.0):
        m = scheme_lr_multiplier(f"focal:gamma={gamma}", 16, mu)
        assert m == pytest.approx(float(effective_lr_multiplier(mu, 16, gamma)), rel=1e-13)


def test_lr_multiplier_under_beta_against_gauss_jacobi_quadrature():
    # Beta(2, 5) mixture of Binomial(N, mu): a polynomial of degree N + 5 in mu, so Gauss-Jacobi
    # with 20 nodes integrates it exactly; weights go to effective_lr_multiplier
    from scipy.special import roots_jacobi

    x, w = roots_jacobi(20, 5 - 1, 2 - 1)  # weight (1-x)^(b-1) (1+x)^(a-1) on [-1, 1]
    mu = (1 + x) / 2
    for gamma in (0.5, 1.0):
        ref = float(effective_lr_multiplier(mu, 16, gamma, weights=w))
        m = scheme_lr_multiplier(f"focal:gamma={gamma}", 16, Beta(2, 5))
        assert m == pytest.approx(ref, rel=1e-12)


def test_lr_multiplier_uniform_tends_to_appendix_n():
    for gamma in (0.5, 1.0):
        m = scheme_lr_multiplier(f"focal:gamma={gamma}", 4096, Beta(1, 1))
        assert m == pytest.approx(float(lr_multiplier(gamma)), abs=2e-4)
    # vanilla against itself is 1; maxrl is zero-sum, so E|A| = 2 mu (1 - mu) H
    assert scheme_lr_multiplier("grpo", 8, [0.2, 0.6]) == pytest.approx(1.0, rel=1e-15)
    mu = 0.3
    ratio = difficulty_profile("maxrl", 8, mu) / difficulty_profile("grpo", 8, mu)
    assert scheme_lr_multiplier("maxrl", 8, [mu]) == pytest.approx(ratio, rel=1e-12)


def test_lr_multiplier_refuses():
    with pytest.raises(ValueError, match="reference must be a scheme with E|A| > 0"):
        scheme_lr_multiplier("maxrl", 8, [0.0, 1.0])
    with pytest.raises(ValueError, match="difficulty must be in"):
        scheme_lr_multiplier("maxrl", 8, [1.2])
    with pytest.raises(ValueError, match="difficulty Beta a must be > 0"):
        Beta(0, 1)
