"""The benchmarks' reference implementations compute the simulator's algorithm.

A speed ratio against a reference is only honest if the reference does the same work. These tests
check the NumPy and PyTorch references of ``benchmarks/`` against independent oracles: hand-computed
steps, mpmath derivatives of the surrogates, the closed-form expected log-prob step of theory.md
section 6 by exact enumeration of all group outcomes, Monte Carlo with standard-error tolerances,
and each other (autograd against the hand-derived Jacobian, driven with the same samples).
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest
from scipy.stats import binom, multinomial

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name: str):
    mod_name = f"_fgrpo_bench_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    return mod


rn = _load("reference_numpy")
rt = _load("reference_torch")
needs_torch = pytest.mark.skipif(not rt.AVAILABLE, reason="torch is not installed")


def _compositions(N: int, K: int):
    """All count vectors of N draws over K actions."""
    for cut in itertools.combinations(range(N + K - 1), K - 1):
        bounds = (-1, *cut, N + K - 1)
        yield np.array([bounds[i + 1] - bounds[i] - 1 for i in range(K)], dtype=float)


# ---------------------------------------------------------------- hand-computed steps


def test_binary_advantages_hand_cases():
    # X = 1 of N = 4, rewards 1/0: mean 1/4, population std sqrt(3)/4
    # A+ = (3/4)/(sqrt(3)/4) = sqrt(3), A- = -(1/4)/(sqrt(3)/4) = -1/sqrt(3)
    ac, aw = rn.binary_advantages(1, 4, "grpo")
    assert ac == pytest.approx(np.sqrt(3.0), rel=1e-15)
    assert aw == pytest.approx(-1.0 / np.sqrt(3.0), rel=1e-15)
    # Bessel: std sqrt(3)/4 * sqrt(4/3) = 1/2  ->  A+ = 3/2, A- = -1/2
    ac, aw = rn.binary_advantages(1, 4, "grpo-bessel")
    assert (ac, aw) == pytest.approx((1.5, -0.5), rel=1e-15)
    # mean-centred with rewards +1/-1: mean = -1/2  ->  A+ = 3/2, A- = -1/2; RLOO x 4/3
    assert rn.binary_advantages(1, 4, "mean", 1.0, -1.0) == pytest.approx((1.5, -0.5))
    assert rn.binary_advantages(1, 4, "rloo", 1.0, -1.0) == pytest.approx((2.0, -2.0 / 3.0))
    # inactive groups get zero advantage, never NaN
    ac, aw = rn.binary_advantages(np.array([0, 4]), 4, "grpo")
    assert np.array_equal(ac, [0.0, 0.0]) and np.array_equal(aw, [0.0, 0.0])


def test_logprob_gradient_hand_case():
    # K = 3, action 0 correct, counts (2, 1, 1): X = 2 of N = 4, x = 1/2, A+ = 1, A- = -1
    # d/dz = (1/N) n_k A(k) = (2, -1, -1)/4; focal gamma = 1 multiplies by g = 1 - 1/2
    p = np.array([0.5, 0.3, 0.2])
    counts = np.array([2.0, 1.0, 1.0])
    correct = np.array([True, False, False])
    g0 = rn.logprob_gradient(p, counts, correct, gamma=0.0)
    np.testing.assert_allclose(g0, [0.5, -0.25, -0.25], rtol=0, atol=1e-16)
    g1 = rn.logprob_gradient(p, counts, correct, gamma=1.0)
    np.testing.assert_allclose(g1, [0.25, -0.125, -0.125], rtol=0, atol=1e-16)


def test_adam_first_step_hand_case():
    # first AdamW step: m = (1-b1) g, v = (1-b2) g^2, bias-corrected m/sqrt(v) = g/|g|:
    # z <- z (1 - lr wd) - lr g / (|g| + eps); ascent direction 2 means loss gradient g = -2
    state = rn.AdamState.zeros_like(np.zeros(2))
    z = rn.adam_update(
        np.array([1.0, -3.0]), np.array([2.0, -0.5]), state, lr=0.1, weight_decay=0.01
    )
    expected = [1.0 * 0.999 + 0.1 * 2.0 / (2.0 + 1e-8), -3.0 * 0.999 - 0.1 * 0.5 / (0.5 + 1e-8)]
    np.testing.assert_allclose(z, expected, rtol=1e-15)
    assert state.t == 1


# ---------------------------------------------------------------- mpmath derivatives


def _mp_softmax(z):
    e = [mpmath.exp(v) for v in z]
    s = mpmath.fsum(e)
    return [v / s for v in e]


@pytest.mark.parametrize("rule", ["logprob", "linear"])
def test_gradients_match_mpmath_derivative(rule):
    # d/dz_k of (1/N) sum_j n_j g A(j) f(p_j) at 50 digits, f = log (log-prob) or identity (linear)
    mpmath.mp.dps = 50
    z = np.array([0.7, -0.2, 1.3, 0.1, -1.0])
    correct = np.array([True, True, False, False, False])
    counts = np.array([1.0, 0.0, 3.0, 0.0, 2.0])  # X = 1 of N = 6; unsampled actions included
    gamma, N = 1.0, 6
    if rule == "logprob":
        adv, rc, rw = "grpo", 1.0, 0.0
        grad = rn.logprob_gradient(rn.softmax(z), counts, correct, gamma, adv, rc, rw)
    else:
        adv, rc, rw = "mean", 1.0, -1.0
        grad = rn.linear_gradient(rn.softmax(z), counts, correct, gamma, adv, rc, rw)
    ac, aw = rn.binary_advantages(1, N, adv, rc, rw)
    g = (1.0 - 1.0 / N) ** gamma
    A = [mpmath.mpf(g * (ac if c else aw)) for c in correct]

    def objective(k, x):
        zz = [mpmath.mpf(v) for v in z]
        zz[k] = x
        p = _mp_softmax(zz)
        f = mpmath.log if rule == "logprob" else (lambda v: v)
        return mpmath.fsum(counts[j] * A[j] * f(p[j]) for j in range(len(z))) / N

    oracle = [
        float(mpmath.diff(lambda x, k=k: objective(k, x), mpmath.mpf(z[k]))) for k in range(5)
    ]
    np.testing.assert_allclose(grad, oracle, rtol=1e-13, atol=1e-16)


# ---------------------------------------------------------------- expected step (theory.md 6)


def _expected_logprob_step(p, correct, N, gamma):
    """theory.md section 6: E[dz_c] = h p_c / mu, E[dz_w] = -h p_w / (1 - mu) (per unit lr)."""
    mu = p[correct].sum()
    X = np.arange(N + 1)
    h = np.sum(binom.pmf(X, N, mu) * (1 - X / N) ** gamma * np.sqrt(X * (N - X))) / N
    return np.where(correct, h * p / mu, -h * p / (1 - mu))


@pytest.mark.parametrize("gamma", [0.0, 0.5, 1.0])
def test_expected_logprob_step_by_exact_enumeration(gamma):
    K, N = 4, 5
    p = np.array([0.4, 0.1, 0.3, 0.2])
    correct = np.array([True, True, False, False])
    expected = np.zeros(K)
    total = 0.0
    for counts in _compositions(N, K):
        w = multinomial.pmf(counts, N, p)
        expected += w * rn.logprob_gradient(p, counts, correct, gamma)
        total += w
    assert total == pytest.approx(1.0, abs=1e-14)
    np.testing.assert_allclose(expected, _expected_logprob_step(p, correct, N, gamma), rtol=1e-12)


def _one_step_mc(final_logits, z0, lr):
    dz = (final_logits - z0) / lr
    return dz.mean(axis=0), dz.std(axis=0, ddof=1) / np.sqrt(dz.shape[0])


def test_numpy_tabular_run_one_step_matches_expectation():
    # one sampled SGD step on 20,000 seeds: sampling + update agree with the closed form
    z0 = np.array([2.0, 0.5, 0.0, 0.0, -0.5, 1.0])
    correct = np.array([True, True, False, False, False, False])
    lr, N, gamma = 0.1, 8, 1.0
    final, q = rn.run_tabular_logprob(z0, correct, N, 1, 20_000, lr, gamma=gamma, seed=3)
    mean, se = _one_step_mc(final, z0, lr)
    exact = _expected_logprob_step(rn.softmax(z0), correct, N, gamma)
    assert np.all(np.abs(mean - exact) < 4.5 * se)
    assert q.shape == (2, 20_000)
    np.testing.assert_allclose(q[0], rn.softmax(z0)[correct].sum())


@needs_torch
def test_torch_tabular_run_one_step_matches_expectation():
    z0 = np.array([2.0, 0.5, 0.0, 0.0, -0.5, 1.0])
    correct = np.array([True, True, False, False, False, False])
    lr, N, gamma = 0.1, 8, 1.0
    final = rt.run_tabular_logprob(z0, correct, N, 1, 20_000, lr, gamma=gamma, seed=3)
    mean, se = _one_step_mc(final, z0, lr)
    exact = _expected_logprob_step(rn.softmax(z0), correct, N, gamma)
    assert np.all(np.abs(mean - exact) < 4.5 * se)


def test_linear_run_sampling_matches_expected_counts():
    # the linear reference's sampler: with lr tiny, SGD, z barely moves; check E[counts] = N p
    K, N = 5, 7
    z0 = np.array([1.0, 0.0, -1.0, 0.5, 0.2])
    p = rn.softmax(z0)
    seen = []

    def counts_fn(t, pp):
        c = np.bincount(rng.choice(K, size=N, p=pp), minlength=K)
        seen.append(c)
        return c

    rng = np.random.default_rng(0)
    rn.run_linear(z0, np.arange(K) < 2, N, 5000, 1e-12, optimizer="sgd", counts_fn=counts_fn)
    seen = np.asarray(seen, dtype=float)
    se = seen.std(axis=0, ddof=1) / np.sqrt(len(seen))
    assert np.all(np.abs(seen.mean(axis=0) - N * p) < 4.5 * se)


# ---------------------------------------------------------------- PyTorch against NumPy


@needs_torch
@pytest.mark.parametrize("optimizer,lr", [("adamw", 0.05), ("sgd", 50.0)])
@pytest.mark.parametrize("gamma", [0.0, 1.0])
def test_torch_linear_matches_numpy_on_same_samples(optimizer, lr, gamma):
    # autograd + torch.optim against the hand-derived Jacobian + hand-written AdamW, 30 steps
    K, N, steps = 40, 16, 30
    rng = np.random.default_rng(7)
    z0 = rng.normal(size=K)
    correct = np.arange(K) < 8
    actions: dict[int, np.ndarray] = {}

    def actions_fn(t, p):
        if t not in actions:
            actions[t] = np.random.default_rng(t).choice(K, size=N, p=p / p.sum())
        return actions[t]

    def counts_fn(t, p):
        return np.bincount(actions_fn(t, p), minlength=K)

    kw = dict(gamma=gamma, optimizer=optimizer, weight_decay=0.01)
    a = rt.run_linear(z0, correct, N, steps, lr, actions_fn=actions_fn, **kw)
    b = rn.run_linear(z0, correct, N, steps, lr, counts_fn=counts_fn, **kw)
    assert np.abs(a - z0).max() > 0.1  # the trajectory really moved
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
