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
@pytest.mark.parametrize("dtype,atol", [("float64", 1e-12), ("float32", 1e-5)])
@pytest.mark.parametrize("optimizer,lr", [("adamw", 0.05), ("sgd", 50.0)])
@pytest.mark.parametrize("gamma", [0.0, 1.0])
def test_torch_linear_matches_numpy_on_same_samples(optimizer, lr, gamma, dtype, atol):
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
    a = rt.run_linear(z0, correct, N, steps, lr, actions_fn=actions_fn, dtype=dtype, **kw)
    b = rn.run_linear(z0, correct, N, steps, lr, counts_fn=counts_fn, **kw)
    assert np.abs(a - z0).max() > 0.1  # the trajectory really moved
    np.testing.assert_allclose(a, b, rtol=0, atol=atol)


# ---------------------------------------------------------------- the simulator, in distribution


def _exact_metric_means(z0, correct, N, steps, update):
    """E[Q_pos] and E[entropy] after each step, enumerating every sequence of group outcomes.

    ``update(z, state, counts) -> (z, state)`` is one deterministic reference step.
    """
    comps = np.array(list(_compositions(N, z0.size)))
    q = np.zeros(steps + 1)
    h = np.zeros(steps + 1)

    def visit(z, state, weight, t):
        p = rn.softmax(z)
        q[t] += weight * p[correct].sum()
        h[t] += weight * -np.sum(p * np.log(p))
        if t == steps:
            return
        for counts, w in zip(comps, multinomial.pmf(comps, N, p), strict=True):
            z2, s2 = update(z, state, counts)
            visit(z2, s2, weight * w, t + 1)

    visit(np.asarray(z0, dtype=float), None, 1.0, 0)
    return q, h


def _sgd_logprob(lr, advantage, rc, rw, correct):
    def update(z, state, counts):
        grad = rn.logprob_gradient(rn.softmax(z), counts, correct, 0.0, advantage, rc, rw)
        return z + lr * grad, None

    return update


def _adam(rule, lr, wd, gamma, correct):
    grad_fn = rn.linear_gradient if rule == "linear" else rn.logprob_gradient

    def update(z, state, counts):
        state = rn.AdamState.zeros_like(z) if state is None else rn.AdamState(*vars(state).values())
        grad = grad_fn(rn.softmax(z), counts, correct, gamma, "mean", 1.0, -1.0)
        return rn.adam_update(z, grad, state, lr, weight_decay=wd), state

    return update


def _sim_means(cfg):
    from fgrpo_theory.sim import simulate

    df = simulate(cfg)
    g = df.groupby("step")
    n = g.size().to_numpy()
    return (
        g["q_pos"].mean().to_numpy(),
        g["q_pos"].std().fillna(0).to_numpy() / np.sqrt(n),
        g["entropy"].mean().to_numpy(),
        g["entropy"].std().fillna(0).to_numpy() / np.sqrt(n),
    )


def _assert_within(mean, se, exact, k=4.5):
    # step 0 is deterministic (se 0): equal up to rounding
    assert np.all(np.abs(mean - exact) <= k * se + 1e-12), (mean, exact, se)


@pytest.mark.parametrize("backend", ["dense", "sumtree"])
def test_simulator_matches_reference_small_tabular(backend):
    # the bench_sim_small setting (log-prob GRPO, population std, SGD), one step, 20,000 seeds,
    # against the NumPy reference's exact one-step expectation over all 1,287 group outcomes
    sim = pytest.importorskip("fgrpo_theory.sim")
    K, N, lr = 6, 8, 0.5
    z0 = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    correct = np.arange(K) < 2
    cfg = sim.SimConfig(
        K=K, logits="1.0x1,0.0x5", correct=2, N=N, steps=1, seeds=20_000, rule="logprob",
        advantage="grpo", optimizer="sgd", lr=lr, r_correct=1.0, r_incorrect=0.0,
        log_steps=(0, 1), backend=backend,
    )  # fmt: skip
    qm, qse, hm, hse = _sim_means(cfg)
    q, h = _exact_metric_means(z0, correct, N, 1, _sgd_logprob(lr, "grpo", 1.0, 0.0, correct))
    _assert_within(qm, qse, q)
    _assert_within(hm, hse, h)
    # power: twice the learning rate would be rejected
    q2, _ = _exact_metric_means(z0, correct, N, 1, _sgd_logprob(2 * lr, "grpo", 1.0, 0.0, correct))
    assert abs(qm[1] - q2[1]) > 10 * qse[1]


@pytest.mark.parametrize(
    "rule,optimizer,wd,gamma",
    [("linear", "adamw", 0.01, 0.0), ("linear", "adamw", 0.0, 1.0), ("logprob", "adam", 0.0, 0.0)],
)
def test_simulator_matches_reference_adam_three_steps(rule, optimizer, wd, gamma):
    # the paper-setting algorithm (mean-centred advantage, rewards +1/-1, Adam/AdamW) on K = 3,
    # N = 3 for 3 steps: exact expectation over all 10^3 outcome sequences vs 20,000 seeds
    sim = pytest.importorskip("fgrpo_theory.sim")
    K, N, steps, lr = 3, 3, 3, 0.2
    z0 = np.array([0.5, 0.0, 0.0])
    correct = np.arange(K) < 1
    cfg = sim.SimConfig(
        K=K, logits="0.5x1,0.0x2", correct=1, N=N, steps=steps, seeds=20_000, rule=rule,
        advantage="dr-grpo", gamma=gamma, optimizer=optimizer, lr=lr, weight_decay=wd,
        r_correct=1.0, r_incorrect=-1.0, log_steps=(0, 1, 2, 3),
    )  # fmt: skip
    qm, qse, hm, hse = _sim_means(cfg)
    q, h = _exact_metric_means(z0, correct, N, steps, _adam(rule, lr, wd, gamma, correct))
    _assert_within(qm, qse, q)
    _assert_within(hm, hse, h)
    # power: the other surrogate (linear <-> log-prob) would be rejected
    other = "logprob" if rule == "linear" else "linear"
    q_other, _ = _exact_metric_means(z0, correct, N, steps, _adam(other, lr, wd, gamma, correct))
    assert abs(qm[steps] - q_other[steps]) > 10 * qse[steps]
