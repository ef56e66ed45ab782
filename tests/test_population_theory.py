"""Population simulator against independent oracles: exact enumeration, Monte Carlo, Beta fit."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from fgrpo_theory.population import (
    Population,
    PopulationConfig,
    generate_population,
    simulate_population,
)


def _grpo_adv(X: int, N: int) -> tuple[float, float]:
    """Hand-written GRPO population-std advantages (theory.md section 3), 0 for flat groups."""
    if X in (0, N):
        return 0.0, 0.0
    x = X / N
    return math.sqrt((1 - x) / x), -math.sqrt(x / (1 - x))


def _outcomes(p: np.ndarray, N: int):
    """Every count vector of N draws from p with its multinomial probability."""
    K = len(p)
    for n in itertools.product(range(N + 1), repeat=K):
        if sum(n) != N:
            continue
        coef = math.factorial(N) / math.prod(math.factorial(c) for c in n)
        yield np.array(n), coef * math.prod(pi**c for pi, c in zip(p, n, strict=True))


def _step_direction(z, correct, N, BN):
    """All outcomes of one group of softmax(z) with their logit step dz/lr (log-prob rule)."""
    p = np.exp(z - z.max())
    p /= p.sum()
    for n, w in _outcomes(p, N):
        X = int(n[correct == 1].sum())
        ac, aw = _grpo_adv(X, N)
        yield w, n * np.where(correct == 1, ac, aw) / BN


def _mu(z, correct):
    p = np.exp(z - z.max())
    p /= p.sum()
    return float(p[correct == 1].sum())


def _pop(phi, correct, n_train, rare=None):
    P_all, K = phi.shape
    return Population(
        correct=np.asarray(correct, np.uint8),
        rare=np.zeros((P_all, K), np.uint8) if rare is None else np.asarray(rare, np.uint8),
        phi0=np.asarray(phi, float),
        theta0=np.zeros(K),
        mu0=np.full(P_all, 0.5),
        breadth=np.full(K, np.nan),
        n_train=n_train,
        dropped=0,
    )


LR = 1.0


def test_tabular_end_every_prompt_rises_in_expectation():
    """theta frozen: one GRPO step raises each prompt's expected success (theory.md section 6)."""
    phi = np.log(np.array([[0.5, 0.2, 0.3], [0.1, 0.3, 0.6], [0.2, 0.7, 0.1]]))
    correct = np.array([[1, 0, 0], [0, 1, 1], [1, 0, 1]])
    N, B = 3, 3
    exact = []
    for p in range(3):
        e = sum(
            w * _mu(phi[p] + LR * d, correct[p])
            for w, d in _step_direction(phi[p], correct[p], N, B * N)
        )
        exact.append(e)
        assert e > _mu(phi[p], correct[p])
    cfg = PopulationConfig(
        P=3, P_test=0, K=3, B=B, N=N, steps=1, optimizer="sgd", lr_shared=0.0, lr_prompt=LR,
        seeds=4000, log_every=1, advantage="grpo", seed=1,
    )  # fmt: skip
    df = simulate_population(cfg, population=_pop(phi, correct, 3), per_prompt=True)
    after = df[df.step == 1].groupby("prompt")["mu"]
    mean, se = after.mean().to_numpy(), after.std().to_numpy() / math.sqrt(4000)
    assert np.all(np.abs(mean - np.array(exact)) < 4 * se + 1e-12)


def test_shared_end_training_sharpening_lowers_test_prompt():
    """phi frozen: the shared step on a train prompt lowers a held-out prompt's success."""
    phi = np.log(np.array([[0.5, 0.2, 0.3], [0.5, 0.2, 0.3]]))
    correct = np.array([[1, 0, 0], [0, 1, 0]])  # train solved by strategy 0, test by strategy 1
    N = 4
    mu0_test = _mu(phi[1], correct[1])
    exact_test = sum(
        w * _mu(phi[1] + LR * d, correct[1]) for w, d in _step_direction(phi[0], correct[0], N, N)
    )
    exact_train = sum(
        w * _mu(phi[0] + LR * d, correct[0]) for w, d in _step_direction(phi[0], correct[0], N, N)
    )
    assert exact_test < mu0_test - 1e-3
    assert exact_train > _mu(phi[0], correct[0])
    cfg = PopulationConfig(
        P=1, P_test=1, K=3, B=1, N=N, steps=1, optimizer="sgd", lr_shared=LR, lr_prompt=0.0,
        seeds=4000, log_every=1, seed=2,
    )  # fmt: skip
    df = simulate_population(cfg, population=_pop(phi, correct, 1), per_prompt=True)
    d1 = df[df.step == 1]
    for prompt, exact in ((0, exact_train), (1, exact_test)):
        v = d1.loc[d1.prompt == prompt, "mu"]
        assert abs(v.mean() - exact) < 4 * v.std() / math.sqrt(len(v)) + 1e-12


def test_dataset_pass_at_k_and_coverage_against_monte_carlo():
    cfg = PopulationConfig(P=40, P_test=0, K=16, B=4, steps=1, seeds=1, pass_k=(1, 4, 16))
    pop = generate_population(cfg)
    df = simulate_population(cfg)
    row = df[(df.step == 0) & (df.bucket == "all")].iloc[0]
    rng = np.random.default_rng(0)
    reps = 4000
    p = np.exp(pop.phi0)
    for k in (1, 4, 16):
        hits = np.empty((pop.correct.shape[0], reps))
        cov = np.empty_like(hits)
        for i in range(pop.correct.shape[0]):
            draws = rng.choice(cfg.K, size=(reps, k), p=p[i] / p[i].sum())
            hits[i] = pop.correct[i][draws].any(axis=1)
            cov[i] = pop.rare[i][draws].any(axis=1)
        est, se = hits.mean(), hits.mean(axis=0).std() / math.sqrt(reps)
        assert abs(row[f"pass_at_{k}"] - est) < 4 * se + 1e-9
        has = pop.rare.any(axis=1)
        c = cov[has]
        assert (
            abs(row[f"coverage_at_{k}"] - c.mean())
            < 4 * c.mean(axis=0).std() / math.sqrt(reps) + 1e-9
        )


def test_generated_mu0_follow_declared_beta():
    cfg = PopulationConfig(
        P=3000, P_test=0, K=8, B=1, mu0=(0.7, 1.3), breadth=(2.0, 2.0), population_seed=4
    )
    pop = generate_population(cfg)
    assert pop.dropped < 100
    assert stats.kstest(pop.mu0, stats.beta(0.7, 1.3).cdf).pvalue > 0.01
    # and not some other Beta: the test has power at this size
    assert stats.kstest(pop.mu0, stats.beta(1.0, 1.0).cdf).pvalue < 1e-6


@pytest.mark.parametrize("adam_state", ["global", "per-prompt"])
def test_adam_outside_batch_moves_only_with_global_state(adam_state):
    """Global Adam keeps moving prompts outside the batch through momentum; per-prompt does not."""
    cfg = PopulationConfig(
        P=8, P_test=0, K=6, B=1, N=4, steps=2, optimizer="adam", lr_shared=0.0, lr_prompt=0.1,
        seeds=1, log_every=1, adam_state=adam_state, population_seed=1, breadth=(2.0, 2.0),
        mu0=(20.0, 20.0),
    )  # fmt: skip
    df = simulate_population(cfg, per_prompt=True)
    mu = df.pivot(index="prompt", columns="step", values="mu")
    grp = df[df.step == 1].set_index("prompt")["groups"]
    first = grp.idxmax()  # trained at step 1, not at step 2 (B = 1, no replacement)
    moved_at_2 = mu.loc[first, 2] != mu.loc[first, 1]
    trained_at_2 = df[(df.step == 2) & (df.prompt == first)]["groups"].item() > 0
    assert not trained_at_2
    assert df[(df.step == 1) & (df.prompt == first)]["active"].item() == 1
    assert moved_at_2 == (adam_state == "global")


def test_focal_multiplier_limits():
    """gamma = 0 gives 1; mu ~ Uniform(0, 1) at large N gives appendix N's m_gamma."""
    from scipy.special import beta as B

    from fgrpo_theory.advantages import effective_lr_multiplier

    mu = (np.arange(4000) + 0.5) / 4000
    assert effective_lr_multiplier(mu, 8, 0.0) == pytest.approx(1.0, abs=1e-15)
    for g in (0.5, 1.0):
        m = B(1.5, g + 1.5) / B(1.5, 1.5)
        assert effective_lr_multiplier(mu, 2000, g) == pytest.approx(m, rel=2e-3)


def test_batch_gradient_snr_one_prompt_against_enumeration():
    """B = P = 1: E[g] and E[|g|^2] of the theta gradient by exact enumeration of the group."""
    from fgrpo_theory.population.analysis import batch_gradient_snr

    phi = np.log(np.array([[0.5, 0.2, 0.3]]))
    correct = np.array([[1, 0, 1]])
    N = 3
    mean = np.zeros(3)
    sq = 0.0
    for w, d in _step_direction(phi[0], correct[0], N, N):
        mean += w * d
        sq += w * float(d @ d)
    exact = float(mean @ mean) / sq
    cfg = PopulationConfig(P=1, P_test=0, K=3, B=1, N=N, seed=3)
    got = batch_gradient_snr(cfg, 20000, population=_pop(phi, correct, 1))["snr_theta"]
    assert got == pytest.approx(exact, abs=0.02)
