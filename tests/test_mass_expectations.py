"""Expectations over the group draw (theory.md sections 5-6).

Oracles independent of fgrpo_theory.mass: enumeration of every ORDERED sequence of N draws
(itertools.product, probability = product of p) with the logit step taken as the complex-step
gradient of the rule's surrogate written here; mpmath at 50 digits; Monte Carlo with tolerances
from the standard error (fixed seeds).
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_theory import mass as M
from fgrpo_theory.advantages import group_advantages
from fgrpo_theory.policy import paper_policy

# --------------------------------------------------------------------------------------------
# oracles
# --------------------------------------------------------------------------------------------


def softmax(z):
    e = np.exp(z - np.max(z.real))
    return e / e.sum()


def oracle_dz(z, correct, draws, lr, rule, rc=1.0, rw=-1.0, gamma=0.0, advantage=None):
    """lr * g * gradient of the rule's surrogate, by complex step."""
    draws = np.asarray(draws)
    N = draws.size
    rewards = np.where(correct[draws], rc, rw)
    g = (1.0 - correct[draws].sum() / N) ** gamma
    if rule == "theory":
        distinct = np.unique(draws)
        r_d = np.where(correct[distinct], rc, rw)

        def J(v):
            return (r_d * softmax(v)[distinct]).sum() / N

    elif rule == "linear":
        adv = rewards - rewards.mean()

        def J(v):
            return (adv * softmax(v)[draws]).sum() / N

    else:
        adv = group_advantages(rewards, advantage or "grpo")

        def J(v):
            return (adv * (v[draws] - np.log(np.exp(v).sum()))).sum() / N

    grad = np.empty(z.size)
    for k in range(z.size):
        v = z.astype(complex)
        v[k] += 1e-30j
        grad[k] = J(v).imag / 1e-30
    return lr * g * grad


def sequences(p, N):
    """Every ordered sequence of N draws with its probability."""
    for seq in itertools.product(range(p.size), repeat=N):
        yield np.array(seq), float(np.prod(p[list(seq)]))


def oracle_expectations(z, c, N, lr, rule, **kw):
    """E over the group of first-order and exact dQ_pos and dQ_u, and of new p_0."""
    p = softmax(z)
    out = dict.fromkeys(["dq_pos_first_order", "dq_pos_exact", "dq_u_first", "dq_u_exact"], 0.0)
    out["p0_new"] = 0.0
    for draws, prob in sequences(p, N):
        dz = oracle_dz(z, c, draws, lr, rule, **kw)
        new = softmax(z + dz)
        u_pos = c & ~np.isin(np.arange(z.size), draws)
        mean_dz = np.dot(p, dz)
        out["dq_pos_first_order"] += prob * (np.dot(p[c], dz[c]) - p[c].sum() * mean_dz)
        out["dq_pos_exact"] += prob * (new[c].sum() - p[c].sum())
        out["dq_u_first"] += prob * (np.dot(p[u_pos], dz[u_pos]) - p[u_pos].sum() * mean_dz)
        out["dq_u_exact"] += prob * (new[u_pos].sum() - p[u_pos].sum())
        out["p0_new"] += prob * new[0]
    return out


Z4 = np.array([1.2, 0.1, -0.4, 0.5])
C4 = np.array([True, True, False, False])
Z_TIES = np.array([1.0, 1.0, 0.0, 0.0, 0.0])  # equal logits across and within correctness
C_TIES = np.array([True, True, True, False, False])


# --------------------------------------------------------------------------------------------
# enumeration of outcomes
# --------------------------------------------------------------------------------------------


def test_count_outcomes_matches_brute_force():
    for K, N in [(1, 3), (2, 1), (3, 4), (4, 3), (5, 2)]:
        brute = len({tuple(sorted(s)) for s in itertools.product(range(K), repeat=N)})
        assert M.count_outcomes(K, N) == brute


@pytest.mark.parametrize(
    ("rule", "conv", "gamma", "N"),
    [
        ("theory", None, 0.0, 4),
        ("theory", None, 1.0, 3),
        ("linear", None, 0.0, 4),
        ("logprob", None, 0.5, 4),
        ("logprob", "trl", 0.0, 3),
    ],
)
def test_enumeration_against_ordered_sequences(rule, conv, gamma, N):
    lr = 0.7
    ref = oracle_expectations(Z4, C4, N, lr, rule, gamma=gamma, advantage=conv)

    def p0_new(new_probs):
        return new_probs[0]

    res = M.expected_change(
        Z4,
        C4,
        N,
        lr,
        [
            "dq_pos_first_order",
            "dq_pos_exact",
            "dq_unsampled_correct_first_order",
            "dq_unsampled_correct_exact",
            p0_new,
        ],
        rule=rule,
        gamma=gamma,
        advantage=conv,
        method="enumerate",
    )
    assert res.method == "enumeration" and res.n_outcomes == M.count_outcomes(4, N)
    pairs = [
        ("dq_pos_first_order", "dq_pos_first_order"),
        ("dq_pos_exact", "dq_pos_exact"),
        ("dq_unsampled_correct_first_order", "dq_u_first"),
        ("dq_unsampled_correct_exact", "dq_u_exact"),
        ("p0_new", "p0_new"),
    ]
    for mine, theirs in pairs:
        assert res.mean[mine] == pytest.approx(ref[theirs], rel=1e-10, abs=1e-15), mine
        assert res.stderr[mine] == 0.0


@pytest.mark.parametrize(
    ("z", "c", "N", "rule", "conv", "seed"),
    [
        (Z4, C4, 5, "theory", None, 1),
        (Z4, C4, 3, "linear", None, 2),
        (Z4, C4, 4, "logprob", "grpo", 3),
        (Z_TIES, C_TIES, 4, "theory", None, 4),
        (Z_TIES, C_TIES, 5, "logprob", "rloo", 5),
    ],
)
def test_enumeration_against_monte_carlo(z, c, N, rule, conv, seed):
    kw = dict(rule=rule, advantage=conv, gamma=0.5)
    en = M.expected_change(z, c, N, 0.5, M.QUANTITIES, method="enumerate", **kw)
    mc = M.expected_change(
        z, c, N, 0.5, M.QUANTITIES, method="monte-carlo", samples=20_000, seed=seed, **kw
    )
    assert mc.method == "monte-carlo" and mc.n_samples == 20_000
    for q in M.QUANTITIES:
        tol = 4.5 * mc.stderr[q] + 1e-12 * (abs(en.mean[q]) + 1e-3)
        assert abs(mc.mean[q] - en.mean[q]) <= tol, (q, en.mean[q], mc.mean[q], mc.stderr[q])


def test_monte_carlo_callable_matches_enumeration_and_is_reproducible():
    def p_anchor(new_probs):
        return new_probs[0]

    kw = dict(rule="logprob", method="monte-carlo", samples=4000)
    a = M.expected_change(Z_TIES, C_TIES, 3, 0.5, [p_anchor, "dq_pos_exact"], seed=7, **kw)
    b = M.expected_change(Z_TIES, C_TIES, 3, 0.5, [p_anchor, "dq_pos_exact"], seed=7, **kw)
    c = M.expected_change(Z_TIES, C_TIES, 3, 0.5, [p_anchor, "dq_pos_exact"], seed=8, **kw)
    assert a.mean == b.mean and a.stderr == b.stderr
    assert a.mean != c.mean
    en = M.expected_change(Z_TIES, C_TIES, 3, 0.5, [p_anchor], rule="logprob")
    assert en.method == "enumeration"
    assert abs(a.mean["p_anchor"] - en.mean["p_anchor"]) <= 4.5 * a.stderr["p_anchor"]


def test_auto_method_and_validation():
    z, c = paper_policy()
    res = M.expected_change(z, c, 8, 1e-2, ["dq_pos_exact"], samples=200)
    assert res.method == "monte-carlo" and res.n_outcomes is None
    assert M.expected_change(Z4, C4, 3, 0.1, ["U2"]).method == "enumeration"
    with pytest.raises(ValueError, match="^method must be used with at most"):
        M.expected_change(z, c, 8, 1e-2, ["U2"], method="enumerate")
    with pytest.raises(ValueError, match="^method must be one of"):
        M.expected_change(Z4, C4, 3, 0.1, ["U2"], method="exact")
    with pytest.raises(ValueError, match="^quantities must be names from QUANTITIES"):
        M.expected_change(Z4, C4, 3, 0.1, ["dq_nothing"])
    with pytest.raises(ValueError, match="^samples must be >= 2; got 1"):
        M.expected_change(Z4, C4, 3, 0.1, ["U2"], method="monte-carlo", samples=1)
    with pytest.raises(ValueError, match="^N must be >= 1; got 0"):
        M.expected_change(Z4, C4, 0, 0.1, ["U2"])


# --------------------------------------------------------------------------------------------
# E[U2] = sum p^2 (1-p)^N
# --------------------------------------------------------------------------------------------


def test_expected_u2_against_enumeration():
    for N in (1, 2, 5):
        ref = sum(
            prob * np.sum(np.where(np.isin(np.arange(4), d), 0.0, softmax(Z4) ** 2))
            for d, prob in sequences(softmax(Z4), N)
        )
        assert M.expected_unsampled_square_mass(Z4, N) == pytest.approx(ref, rel=1e-12)
    np.testing.assert_allclose(
        M.expected_unsampled_square_mass(Z4, [1, 2, 5]),
        [M.expected_unsampled_square_mass(Z4, n) for n in (1, 2, 5)],
        rtol=1e-15,
    )


@pytest.mark.parametrize(("N", "seed"), [(8, 11), (1024, 12)])
def test_expected_u2_paper_policy_against_monte_carlo(N, seed):
    z, c = paper_policy()
    mc = M.expected_change(
        z, c, N, 1e-2, ["U2", "U_pos2"], method="monte-carlo", samples=3000, seed=seed
    )
    closed = M.expected_unsampled_square_mass(z, N)
    assert abs(mc.mean["U2"] - closed) <= 4.5 * mc.stderr["U2"]
    closed_pos = M.expected_unsampled_square_mass(z, N, mask=c)
    assert abs(mc.mean["U_pos2"] - closed_pos) <= 4.5 * mc.stderr["U_pos2"]


def test_expected_u2_paper_policy_mpmath():
    # mp.dps = 50; Z = e^5 + 9999 e^3 + 118000; levels (count, p) = (1, e^5/Z), (9999, e^3/Z),
    # (118000, 1/Z); E[U2] = sum count p^2 (1 - p)^N.
    mp.mp.dps = 50
    Z = mp.e**5 + 9999 * mp.e**3 + 118000
    levels = [(1, mp.e**5 / Z), (9999, mp.e**3 / Z), (118000, 1 / Z)]
    z, _ = paper_policy()
    for N in (1, 8, 2**15, 131_072):
        ref = mp.fsum(m * p**2 * (1 - p) ** N for m, p in levels)
        assert M.expected_unsampled_square_mass(z, N) == pytest.approx(float(ref), rel=1e-11)


# --------------------------------------------------------------------------------------------
# Lemma H.1 and Corollary H.2
# --------------------------------------------------------------------------------------------


def test_lemma_h1_against_conditional_enumeration():
    p = softmax(Z4)
    N = 5
    num_pos = np.zeros(N + 1)
    num_neg = np.zeros(N + 1)
    den = np.zeros(N + 1)
    for draws, prob in sequences(p, N):
        k = int(C4[draws].sum())
        seen = np.isin(np.arange(4), draws)
        num_pos[k] += prob * p[seen & C4].sum()
        num_neg[k] += prob * p[seen & ~C4].sum()
        den[k] += prob
    e_pos, e_neg = M.expected_sampled_mass_given_correct(Z4, C4, N, np.arange(N + 1))
    np.testing.assert_allclose(e_pos, num_pos / den, rtol=1e-12, atol=1e-16)
    np.testing.assert_allclose(e_neg, num_neg / den, rtol=1e-12, atol=1e-16)
    s = M.expected_baseline_given_correct(Z4, C4, N, np.arange(N + 1), 1.0, -1.0)
    np.testing.assert_allclose(s, (num_pos - num_neg) / den, rtol=1e-12, atol=1e-15)


@st.composite
def random_policy(draw):
    K = draw(st.integers(2, 9))
    z = np.array(draw(st.lists(st.floats(-6, 6), min_size=K, max_size=K)))
    c = np.array(draw(st.lists(st.booleans(), min_size=K, max_size=K)))
    c[0], c[-1] = True, False  # at least one correct and one incorrect action
    return z, c


@settings(max_examples=100)
@given(
    random_policy(),
    st.integers(1, 40),
    st.sampled_from([(1.0, 0.0), (1.0, -1.0), (0.3, -2.0), (0.0, -0.5)]),
)
def test_lemma_h1_and_corollary_h2_monotone(policy, N, rewards):
    z, c = policy
    k = np.arange(N + 1)
    e_pos, e_neg = M.expected_sampled_mass_given_correct(z, c, N, k)
    mu = softmax(z)[c].sum()
    assert e_pos[0] == 0.0 and e_neg[-1] == 0.0
    assert np.all(np.diff(e_pos) >= -1e-15)  # non-decreasing in k (P-24)
    assert np.all(np.diff(e_neg) <= 1e-15)  # non-increasing in k (P-25)
    assert np.all(e_pos <= mu + 1e-15) and np.all(e_neg <= 1 - mu + 1e-15)
    rc, rw = rewards  # R_c >= 0 >= R_w: Corollary H.2
    s = M.expected_baseline_given_correct(z, c, N, k, rc, rw)
    assert np.all(np.diff(s) >= -1e-14)


def test_corollary_h2_needs_nonnegative_correct_reward():
    # theory.md states Corollary H.2 for R_c > R_w, R_w <= 0. With R_c < 0 it fails: one correct
    # action (p = e/(e+4)) and four incorrect ones (p = 1/(e+4) each), N = 1, R_c = -1,
    # R_w = -1.5: E[S_R | X=0] = -1.5/(e+4) (one incorrect draw), E[S_R | X=1] = -e/(e+4).
    z = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    c = np.array([True, False, False, False, False])
    s = M.expected_baseline_given_correct(z, c, 1, [0, 1], -1.0, -1.5)
    e = math.e
    np.testing.assert_allclose(s, [-1.5 / (e + 4), -e / (e + 4)], rtol=1e-14)
    assert s[1] < s[0]


def test_lemma_h1_single_correct_action_and_validation():
    z = np.array([0.0, 0.0, 0.0])
    c = np.array([True, False, False])
    e_pos, e_neg = M.expected_sampled_mass_given_correct(z, c, 4, [0, 1, 4])
    np.testing.assert_allclose(e_pos, [0.0, 1 / 3, 1 / 3])  # one correct action: seen iff k > 0
    # Incorrect side: two equally likely actions, N - k draws: (2/3) (1 - 2^-(N-k)).
    np.testing.assert_allclose(e_neg, [2 / 3 * (1 - 2.0**-4), 2 / 3 * (1 - 2.0**-3), 0.0])
    with pytest.raises(ValueError, match="^k must be <= 4; got 5"):
        M.expected_sampled_mass_given_correct(z, c, 4, 5)


# --------------------------------------------------------------------------------------------
# section 6: expected drift of the log-prob update
# --------------------------------------------------------------------------------------------


def enumerate_logprob(z, c, N, lr, gamma, advantage="grpo"):
    """E[dz], E[first-order dp] and E[exact dp] over every ordered sequence of draws."""
    p = softmax(z)
    e_dz = np.zeros(z.size)
    e_dp_exact = np.zeros(z.size)
    for draws, prob in sequences(p, N):
        dz = oracle_dz(z, c, draws, lr, "logprob", gamma=gamma, advantage=advantage)
        e_dz += prob * dz
        e_dp_exact += prob * (softmax(z + dz) - p)
    return e_dz, p * (e_dz - np.dot(p, e_dz)), e_dp_exact


POLICIES = [
    (np.array([1.5, 0.2, -0.3, 0.4, -0.8]), np.array([True, True, True, False, False])),
    (np.array([0.0, 2.0, -1.0, 0.5]), np.array([False, True, True, False])),
]


@pytest.mark.parametrize("policy", range(len(POLICIES)))
@pytest.mark.parametrize(("N", "gamma"), [(1, 0.0), (2, 1.0), (3, 0.5), (4, 0.0), (5, 1.0)])
def test_logprob_drift_against_enumeration(policy, N, gamma):
    z, c = POLICIES[policy]
    lr = 0.2
    e_dz, e_dp_first, _ = enumerate_logprob(z, c, N, lr, gamma)
    d = M.expected_logprob_drift(z, c, N, lr, gamma)
    np.testing.assert_allclose(d.expected_dz, e_dz, rtol=1e-10, atol=1e-16)
    np.testing.assert_allclose(d.expected_dp, e_dp_first, rtol=1e-10, atol=1e-16)
    assert d.expected_dmu == pytest.approx(e_dp_first[c].sum(), rel=1e-10, abs=1e-16)
    # h = E[g(X/N) sqrt(X (N-X))] / N, X ~ Bin(N, mu), summed here in mpmath at 50 digits.
    mp.mp.dps = 50
    mu = mp.mpf(float(softmax(z)[c].sum()))
    h = (
        mp.fsum(
            mp.binomial(N, x)
            * mu**x
            * (1 - mu) ** (N - x)
            * (1 - mp.mpf(x) / N) ** gamma
            * mp.sqrt(x * (N - x))
            for x in range(N + 1)
        )
        / N
    )
    assert d.h == pytest.approx(float(h), rel=1e-12, abs=1e-300)
    assert d.h_neg == pytest.approx(-d.h, rel=1e-12, abs=1e-300)
    if d.h > 0:  # a correct action loses mass in expectation iff p_j < threshold
        losing = c & (e_dp_first < 0)
        below = c & (softmax(z) < d.threshold_prob)
        assert np.array_equal(losing, below)
        assert d.n_correct_losing == losing.sum()
    else:
        assert d.threshold_prob is None and np.all(d.expected_dz == 0)


@pytest.mark.parametrize("advantage", ["trl", "dr-grpo", "rloo"])
def test_logprob_drift_other_conventions_against_enumeration(advantage):
    z, c = POLICIES[0]
    e_dz, e_dp_first, _ = enumerate_logprob(z, c, 4, 0.3, 0.5, advantage)
    d = M.expected_logprob_drift(z, c, 4, 0.3, 0.5, advantage)
    np.testing.assert_allclose(d.expected_dz, e_dz, rtol=1e-10, atol=1e-16)
    np.testing.assert_allclose(d.expected_dp, e_dp_first, rtol=1e-10, atol=1e-16)


def test_logprob_drift_exact_expectation_differs_at_second_order():
    z, c = POLICIES[0]
    errs = []
    for lr in (0.08, 0.04, 0.02):
        _, first, exact = enumerate_logprob(z, c, 4, lr, 0.0)
        d = M.expected_logprob_drift(z, c, 4, lr, 0.0)
        np.testing.assert_allclose(d.expected_dp, first, rtol=1e-10)
        errs.append(np.abs(exact - d.expected_dp).max())
    np.testing.assert_allclose(errs[0] / errs[1], 4.0, rtol=0.06)
    np.testing.assert_allclose(errs[1] / errs[2], 4.0, rtol=0.06)


@pytest.mark.parametrize("N", [2, 3, 5])
def test_focal_weight_gives_parallel_expected_steps(N):
    z, c = POLICIES[0]
    e0, _, _ = enumerate_logprob(z, c, N, 0.1, 0.0)
    for gamma in (0.5, 1.0, 2.0):
        e1, _, _ = enumerate_logprob(z, c, N, 0.1, gamma)
        # Parallel: e1 = lambda e0 with one lambda for every action, lambda = h_gamma / h_0.
        lam = np.dot(e1, e0) / np.dot(e0, e0)
        np.testing.assert_allclose(e1, lam * e0, rtol=1e-10, atol=1e-17)
        h0 = M.expected_logprob_drift(z, c, N, 0.1, 0.0).h
        h1 = M.expected_logprob_drift(z, c, N, 0.1, gamma).h
        assert lam == pytest.approx(h1 / h0, rel=1e-10)
        assert 0 < lam < 1


def test_logprob_drift_paper_policy_against_monte_carlo():
    z, c = paper_policy()
    d = M.expected_logprob_drift(z, c, 8, 1e-2, 1.0)
    mc = M.expected_change(
        z,
        c,
        8,
        1e-2,
        ["dq_pos_first_order"],
        rule="logprob",
        gamma=1.0,
        method="monte-carlo",
        samples=20_000,
        seed=21,
    )
    assert (
        abs(mc.mean["dq_pos_first_order"] - d.expected_dmu) <= 4.5 * mc.stderr["dq_pos_first_order"]
    )
    # Threshold in closed form: sum_C p^2 - mu/(1-mu) sum_notC p^2 (zero-sum advantages).
    p = softmax(z)
    mu = p[c].sum()
    thr = (p[c] ** 2).sum() - mu / (1 - mu) * (p[~c] ** 2).sum()
    assert d.threshold_prob == pytest.approx(thr, rel=1e-12)
    assert d.threshold_ratio == pytest.approx(thr / mu, rel=1e-12)
    assert d.n_correct_losing == int(np.sum(c & (p < thr)))
    assert math.isfinite(d.h) and d.h > 0


def test_logprob_drift_validation():
    with pytest.raises(
        ValueError,
        match="^correct must be a mask leaving at least one incorrect action of 2; got 2",
    ):
        M.expected_logprob_drift([0.0, 1.0], [True, True], 4)
    with pytest.raises(ValueError, match="^N must be >= 1; got 0"):
        M.expected_logprob_drift([0.0, 1.0], [True, False], 0)


def test_lemma_h1_paper_policy_levels_against_dense_sum():
    # The implementation merges equal logits; here the sum runs over all 128,000 actions.
    z, c = paper_policy()
    p = softmax(z)
    mu = p[c].sum()
    N = 64
    k = np.array([0, 1, 8, 63, 64])
    e_pos, e_neg = M.expected_sampled_mass_given_correct(z, c, N, k)
    for i, kk in enumerate(k):
        dense_pos = np.sum(p[c] * -np.expm1(kk * np.log1p(-p[c] / mu)))
        dense_neg = np.sum(p[~c] * -np.expm1((N - kk) * np.log1p(-p[~c] / (1 - mu))))
        assert e_pos[i] == pytest.approx(dense_pos, rel=1e-10, abs=1e-300)
        assert e_neg[i] == pytest.approx(dense_neg, rel=1e-10, abs=1e-300)
