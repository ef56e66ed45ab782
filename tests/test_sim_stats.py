"""Statistical checks of the simulator against closed forms and exact enumeration.

Every Monte Carlo comparison uses fixed seeds (deterministic) and a tolerance of 4.5 standard
errors of the simulated mean, so a correct simulator fails with probability below 1e-5 per check
while a wrong term (a missing factor, a wrong sign) moves the mean by many standard errors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.special import softmax

from fgrpo_theory.sim import SimConfig, expand_grid, simulate
from fgrpo_theory.tail_miss import active_probability, tail_miss_probability

ROOT = Path(__file__).resolve().parents[1]


def _prob_getters(K: int) -> list:
    """Callables new_probs -> new_probs[i] with distinct names (as mass.expected_change wants)."""
    out = []
    for i in range(K):

        def f(q, i=i):
            return float(q[i])

        f.__name__ = f"p{i}"
        out.append(f)
    return out


Z = 4.5  # standard errors

# K = 6: two correct actions (0 common, 1 rare), four incorrect
LOGITS = "1.2x1,-0.8x1,0.3x1,0.0x3"
Z0 = np.array([1.2, -0.8, 0.3, 0.0, 0.0, 0.0])
P0 = softmax(Z0)
MU, TAU = P0[:2].sum(), P0[1]


@pytest.mark.parametrize("N", [1, 2, 4, 8, 32])
def test_tail_miss_frequency_matches_lemma_3_1(N):
    """One step per run from the same policy: each run is one Bernoulli draw of event B."""
    R = 40_000
    cfg = SimConfig(
        K=6, logits=LOGITS, correct="0,1", subsets={"rare": "1"}, N=N, steps=1, seeds=R,
        log_steps=[1], lr=1e-3,
    )  # fmt: skip
    df = simulate(cfg)
    assert (df.groups == 1).all()
    p_b = float(tail_miss_probability(N, MU, TAU))
    freq = df.tail_miss_rare.mean()
    se = np.sqrt(max(p_b * (1 - p_b), 1e-12) / R)
    assert abs(freq - p_b) <= Z * se, (freq, p_b, se)
    p_a = float(active_probability(N, MU))
    se_a = np.sqrt(max(p_a * (1 - p_a), 1e-12) / R)
    assert abs(df.active_frac.mean() - p_a) <= Z * se_a
    if N == 1:
        assert freq == 0.0  # a group of one is never active


def test_dynamic_sampling_resamples_match_geometric_law():
    """Redraws until active, capped: E[resamples] = sum_{r=1}^{cap} q^r, q = Pr(inactive)."""
    R, N, cap = 40_000, 4, 3
    cfg = SimConfig(
        K=6, logits=LOGITS, correct="0,1", N=N, steps=1, seeds=R, log_steps=[1], lr=1e-3,
        dynamic_sampling="dapo", max_resamples=cap, algo="dapo",
    )  # fmt: skip
    res = simulate(cfg).resamples.to_numpy()
    q = 1 - float(active_probability(N, MU))
    k = np.arange(cap + 1)
    pmf = np.append(q ** k[:-1] * (1 - q), q**cap)  # number of redraws 0..cap
    mean = float((k * pmf).sum())
    sd = np.sqrt(float((k**2 * pmf).sum()) - mean**2)
    assert mean == pytest.approx(sum(q**r for r in range(1, cap + 1)), rel=1e-12)
    assert abs(res.mean() - mean) <= Z * sd / np.sqrt(R)
    assert res.max() == cap


@pytest.mark.parametrize(
    ("rule", "mass_rule", "advantage", "gamma", "N", "lr"),
    [
        ("logprob", "logprob", "grpo", 0.0, 3, 0.8),
        ("logprob", "logprob", "grpo", 1.0, 4, 0.8),
        ("logprob", "logprob", "rloo", 0.5, 3, 0.8),
        ("linear", "linear", "dr-grpo", 0.0, 3, 5.0),
        ("linear", "linear", "dr-grpo", 1.0, 4, 5.0),
    ],
)
def test_mean_one_step_change_matches_exact_enumeration(rule, mass_rule, advantage, gamma, N, lr):
    """E[p'_i] after one SGD step: simulator mean over seeds vs fgrpo_theory.mass enumeration."""
    from fgrpo_theory import mass

    R = 40_000
    subsets = {f"a{i}": str(i) for i in range(6)}
    cfg = SimConfig(
        K=6, logits=LOGITS, correct="0,1", subsets=subsets, N=N, steps=1, seeds=R,
        log_steps=[1], lr=lr, rule=rule, advantage=advantage, gamma=gamma,
    )  # fmt: skip
    df = simulate(cfg)
    sim = df[[f"mass_a{i}" for i in range(6)]].to_numpy()
    exact = mass.expected_change(
        Z0, np.arange(6) < 2, N, lr,
        quantities=_prob_getters(6),
        rule=mass_rule, advantage=advantage, gamma=gamma, method="enumerate",
    )  # fmt: skip
    expected = np.array(list(exact.mean.values()))
    se = sim.std(axis=0, ddof=1) / np.sqrt(R)
    change = np.abs(expected - P0)
    assert change.max() > 20 * se.max()  # the step is resolved, so the check has power
    np.testing.assert_array_less(np.abs(sim.mean(axis=0) - expected), Z * se + 1e-15)


def test_mean_drift_matches_section_6_first_order():
    """Small step: E[dp] of the log-prob rule is theory.md section 6's first-order drift."""
    from fgrpo_theory import mass

    R, N, lr = 40_000, 4, 0.02
    subsets = {f"a{i}": str(i) for i in range(6)}
    cfg = SimConfig(
        K=6, logits=LOGITS, correct="0,1", subsets=subsets, N=N, steps=1, seeds=R,
        log_steps=[1], lr=lr, rule="logprob", advantage="grpo", gamma=1.0,
    )  # fmt: skip
    sim = simulate(cfg)[[f"mass_a{i}" for i in range(6)]].to_numpy() - P0
    drift = mass.expected_logprob_drift(Z0, np.arange(6) < 2, N, lr=lr, gamma=1.0)
    se = sim.std(axis=0, ddof=1) / np.sqrt(R)
    # second-order remainder: O(lr^2) per component, bounded by the enumeration below
    exact = mass.expected_change(
        Z0, np.arange(6) < 2, N, lr, quantities=_prob_getters(6),
        rule="logprob", gamma=1.0, method="enumerate",
    )  # fmt: skip
    second = np.abs(np.array(list(exact.mean.values())) - P0 - drift.expected_dp)
    assert second.max() < 0.05 * np.abs(drift.expected_dp).max()
    np.testing.assert_array_less(np.abs(sim.mean(axis=0) - drift.expected_dp), Z * se + second)
    # the rare correct action (p/mu below the threshold) loses mass in expectation
    assert drift.expected_dp[1] < 0 and sim.mean(axis=0)[1] < -Z * se[1]


@pytest.mark.parametrize("name", ["fig2-logprob-adam"])
def test_q_pos_rises_for_every_N_on_the_paper_setting(name):
    """theory.md section 10: with the log-prob rule and Adam, Q_pos rises for every N."""
    from fgrpo_theory.sim.presets import load_preset

    cfgs = expand_grid(load_preset(name))
    picked = [
        c.replace(steps=20, seeds=2, log_steps=[0, 20])
        for c in cfgs
        if c.N in (2, 64, 1024, 16384, 131072)
    ]
    assert len(picked) == 10
    for c in picked:
        df = simulate(c)
        start = df[df.step == 0].q_pos.to_numpy()
        end = df[df.step == 20].q_pos.to_numpy()
        q0 = (np.exp(5) + 9999 * np.exp(3)) / (np.exp(5) + 9999 * np.exp(3) + 118000)
        np.testing.assert_allclose(start, q0, rtol=1e-12)
        assert (end > start).all(), (c.N, c.gamma, start, end)
        assert (df.mass_rare <= df.q_pos).all()
