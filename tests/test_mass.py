"""Mass redistribution (theory.md sections 5-6): one-step changes, first order and exact.

Oracles, all independent of fgrpo_theory.mass:
- the logit step of each rule is the complex-step gradient (exact to rounding) of the rule's
  surrogate objective, written here from its definition;
- exact post-update masses are recomputed with mpmath at 50 digits;
- P-19 is evaluated by hand from that gradient.
"""

from __future__ import annotations

import dataclasses

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


def softmax_c(z):
    """Softmax that also works on complex logits (for the complex step)."""
    e = np.exp(z - np.max(z.real))
    return e / e.sum()


def objective(rule, draws, correct, rc=1.0, rw=-1.0, gamma=0.0, advantage=None):
    """Surrogate J(z) of one group (from the definitions in theory.md) and the focal weight."""
    draws = np.asarray(draws)
    N = draws.size
    rewards = np.where(correct[draws], rc, rw)
    x = int(correct[draws].sum())
    g = (1.0 - x / N) ** gamma
    if rule == "theory":  # linear surrogate over DISTINCT sampled actions (P-5)
        distinct = np.unique(draws)
        r_d = np.where(correct[distinct], rc, rw)

        def J(z):
            return (r_d * softmax_c(z)[distinct]).sum() / N

    elif rule == "linear":  # per-sample mean-centred linear surrogate (appendix J)
        adv = rewards - rewards.mean()

        def J(z):
            return (adv * softmax_c(z)[draws]).sum() / N

    else:  # log-prob policy gradient with the advantage module's group advantages
        adv = group_advantages(rewards, advantage or "grpo")

        def J(z):
            return (adv * (z[draws] - np.log(np.exp(z).sum()))).sum() / N

    return J, g


def grad_cs(J, z, h=1e-30):
    """Complex-step gradient of a real-analytic J (no subtractive cancellation)."""
    out = np.empty(z.size)
    for k in range(z.size):
        zz = z.astype(complex)
        zz[k] += 1j * h
        out[k] = J(zz).imag / h
    return out


def oracle_dz(z, correct, draws, lr, rule, **kw):
    J, g = objective(rule, draws, correct, **kw)
    return lr * g * grad_cs(J, z)


def mp_mass_change(z, dz, masks, weights=None):
    """Exact change of the mass of each mask after z -> z + dz, at 50 digits."""
    mp.mp.dps = 50
    w = np.ones(z.size) if weights is None else weights
    e0 = [mp.mpf(int(wi)) * mp.exp(mp.mpf(float(a))) for a, wi in zip(z, w, strict=True)]
    e1 = [
        mp.mpf(int(wi)) * mp.exp(mp.mpf(float(a)) + mp.mpf(float(b)))
        for a, b, wi in zip(z, dz, w, strict=True)
    ]
    s0, s1 = mp.fsum(e0), mp.fsum(e1)
    out = []
    for m in masks:
        q0 = mp.fsum(e for e, keep in zip(e0, m, strict=True) if keep) / s0
        q1 = mp.fsum(e for e, keep in zip(e1, m, strict=True) if keep) / s1
        out.append(float(q1 - q0))
    return out


# --------------------------------------------------------------------------------------------
# strategies
# --------------------------------------------------------------------------------------------


@st.composite
def policy_and_draws(draw, max_k=6, max_n=6):
    K = draw(st.integers(2, max_k))
    z = np.array(draw(st.lists(st.floats(-3, 3), min_size=K, max_size=K)))
    correct = np.array(draw(st.lists(st.booleans(), min_size=K, max_size=K)))
    if not correct.any():
        correct[draw(st.integers(0, K - 1))] = True
    N = draw(st.integers(1, max_n))
    draws = draw(st.lists(st.integers(0, K - 1), min_size=N, max_size=N))
    return z, correct, draws


REWARDS = st.sampled_from([(1.0, -1.0), (1.0, 0.0), (2.0, 0.5), (0.0, -1.0)])
GAMMAS = st.sampled_from([0.0, 0.5, 1.0])
RULE_CONV = st.sampled_from(
    [
        ("theory", None),
        ("linear", None),
        ("logprob", None),
        ("logprob", "grpo-bessel"),
        ("logprob", "trl"),
        ("logprob", "dr-grpo"),
    ]
)


# --------------------------------------------------------------------------------------------
# groups and statistics
# --------------------------------------------------------------------------------------------


def test_make_group_and_sample_group():
    g = M.make_group([3, 0, 3, 3], n_actions=5)
    assert g.actions.tolist() == [0, 3] and g.counts.tolist() == [1, 3] and g.N == 4
    g2 = M.make_group([3, 0], [3, 1], n_actions=5)
    assert g2.actions.tolist() == [0, 3] and g2.counts.tolist() == [1, 3]
    with pytest.raises(ValueError, match="^group must be <= 4; got 5"):
        M.make_group([5], n_actions=5)
    with pytest.raises(ValueError, match="^group counts must be >= 1; got 0"):
        M.make_group([1, 2], [1, 0], n_actions=5)
    with pytest.raises(ValueError, match="^group must be a list of distinct actions"):
        M.make_group([1, 1], [1, 2], n_actions=5)
    z, _ = paper_policy()
    a = M.sample_group(z, 131_072, seed=1)
    b = M.sample_group(z, 131_072, seed=1)
    assert a.N == 131_072 and np.array_equal(a.actions, b.actions)
    assert np.array_equal(a.counts, b.counts)
    # The anchor (p ~ 4.65e-4) is drawn N p ~ 61 times on average: binomial check, 5 sigma.
    p0 = np.exp(5.0) / (np.exp(5.0) + 9999 * np.exp(3.0) + 118_000)
    n0 = a.counts[a.actions == 0].sum()
    assert abs(n0 - 131_072 * p0) < 5 * np.sqrt(131_072 * p0)


def test_group_statistics_hand_case():
    # p = softmax([ln 4, ln 2, ln 1, ln 3]) = [0.4, 0.2, 0.1, 0.3]; C = {0, 1, 2}.
    z = np.log([4.0, 2.0, 1.0, 3.0])
    c = np.array([True, True, True, False])
    s = M.group_statistics(z, c, M.make_group([0, 0, 3], n_actions=4), 1.0, -1.0)
    assert (s.N, s.X, s.n_distinct) == (3, 2, 2)
    expected = dict(
        Q_pos=0.7,
        Q_neg=0.3,
        P_pos=0.4,
        P_neg=0.3,
        Q_u=0.3,
        A2=0.16,
        B2=0.09,
        U_pos2=0.05,
        U_neg2=0.0,
        U2=0.05,
        S_R=0.1,
    )
    for key, value in expected.items():
        assert getattr(s, key) == pytest.approx(value, abs=1e-15), key


# --------------------------------------------------------------------------------------------
# the logit step of every rule is the gradient of its surrogate
# --------------------------------------------------------------------------------------------


@settings(max_examples=150)
@given(policy_and_draws(), RULE_CONV, REWARDS, GAMMAS)
def test_logit_step_is_gradient_of_surrogate(pd_, rule_conv, rewards, gamma):
    z, c, draws = pd_
    rule, conv = rule_conv
    rc, rw = rewards
    grp = M.make_group(draws, n_actions=z.size)
    kw = dict(r_correct=rc, r_incorrect=rw, gamma=gamma, advantage=conv)
    dz = M.logit_step(z, c, grp, 0.3, rule, **kw)
    ref = oracle_dz(z, c, draws, 0.3, rule, rc=rc, rw=rw, gamma=gamma, advantage=conv)
    np.testing.assert_allclose(dz, ref, rtol=1e-12, atol=1e-15)


# --------------------------------------------------------------------------------------------
# P-17 and Proposition 3.2 (P-10) agree with P-19 applied to the right subsets
# --------------------------------------------------------------------------------------------


@settings(max_examples=200)
@given(policy_and_draws(max_k=7, max_n=8), REWARDS, st.floats(0.01, 2.0))
def test_p17_p10_equal_p19_on_subsets(pd_, rewards, lr):
    z, c, draws = pd_
    rc, rw = rewards
    grp = M.make_group(draws, n_actions=z.size)
    dz = oracle_dz(z, c, draws, lr, "theory", rc=rc, rw=rw)
    p = np.exp(z - z.max())
    p /= p.sum()
    sampled = np.isin(np.arange(z.size), draws)
    mean_dz = np.dot(p, dz)

    def p19(mask):  # by hand: sum_S p dz - Q_S sum_j p_j dz_j
        return np.dot(p[mask], dz[mask]) - p[mask].sum() * mean_dz

    stats = M.group_statistics(z, c, grp, rc, rw)
    t17 = M.total_correct_change_p17(stats, lr)
    t10 = M.unsampled_correct_change_p10(stats, lr)
    scale = np.dot(p, np.abs(dz)) + 1e-300
    tol = dict(rel=1e-9, abs=1e-13 * scale)
    assert t17.total == pytest.approx(p19(c), **tol)
    u_pos = c & ~sampled
    assert t10.total == pytest.approx(p19(u_pos), **tol)
    # The terms: P-17 groups sum_C p dz - Q_pos sum p dz by A, B, U; P-10 splits direct/coupling.
    q_pos, q_neg = p[c].sum(), p[~c].sum()
    a, b = c & sampled, ~c & sampled
    u_neg = ~c & ~sampled
    assert t17.sampled_correct == pytest.approx(q_neg * np.dot(p[a], dz[a]), **tol)
    assert t17.sampled_incorrect == pytest.approx(-q_pos * np.dot(p[b], dz[b]), **tol)
    unsampled = q_neg * np.dot(p[u_pos], dz[u_pos]) - q_pos * np.dot(p[u_neg], dz[u_neg])
    assert t17.unsampled_coupling == pytest.approx(unsampled, **tol)
    assert t10.direct_drift == pytest.approx(np.dot(p[u_pos], dz[u_pos]), **tol)
    assert t10.coupling == pytest.approx(-p[u_pos].sum() * mean_dz, **tol)
    if rc >= 0 >= rw:  # both encodings of the paper; for other rewards the signs can flip
        assert t17.sampled_correct >= 0 and t17.sampled_incorrect >= 0
    # one_step reports the same closed forms, and P-18 summed over a subset is P-19.
    r = M.one_step(z, c, grp, lr, r_correct=rc, r_incorrect=rw)
    assert r.first_order_source == "P-17/P-10"
    assert r.dq_pos_first_order == pytest.approx(t17.total, rel=1e-12, abs=1e-300)
    assert r.dq_unsampled_correct_first_order == pytest.approx(t10.total, rel=1e-12, abs=1e-300)
    dp = M.prob_change_first_order(p, dz)
    assert dp[c].sum() == pytest.approx(p19(c), **tol)
    assert M.subset_change_first_order(p, dz, u_pos) == pytest.approx(p19(u_pos), **tol)


def test_p17_p10_on_paper_policy_against_p19_by_hand():
    z, c = paper_policy()
    grp = M.sample_group(z, 64, seed=3)
    for rc, rw in [(1.0, -1.0), (1.0, 0.0)]:
        dz = M.logit_step(z, c, grp, 1e-2, "theory", r_correct=rc, r_incorrect=rw)
        p = np.exp(z - z.max())
        p /= p.sum()
        sampled = np.zeros(z.size, dtype=bool)
        sampled[grp.actions] = True
        # P-5 by hand on the sampled actions, and -(lr/N) S_R p on the unsampled ones.
        s_r = np.dot(p[grp.actions], np.where(c[grp.actions], rc, rw))
        np.testing.assert_allclose(dz[~sampled], -1e-2 / 64 * s_r * p[~sampled], rtol=1e-12)
        mean_dz = np.dot(p, dz)
        r = M.one_step(z, c, grp, 1e-2, r_correct=rc, r_incorrect=rw)
        u_pos = c & ~sampled
        assert r.dq_pos_first_order == pytest.approx(
            np.dot(p[c], dz[c]) - p[c].sum() * mean_dz, rel=1e-9
        )
        assert r.dq_unsampled_correct_first_order == pytest.approx(
            np.dot(p[u_pos], dz[u_pos]) - p[u_pos].sum() * mean_dz, rel=1e-9
        )


# --------------------------------------------------------------------------------------------
# exact update against mpmath
# --------------------------------------------------------------------------------------------


@settings(max_examples=100)
@given(policy_and_draws(), RULE_CONV, GAMMAS, st.sampled_from([1e-3, 0.1, 1.0, 30.0]))
def test_exact_changes_against_mpmath(pd_, rule_conv, gamma, lr):
    z, c, draws = pd_
    rule, conv = rule_conv
    grp = M.make_group(draws, n_actions=z.size)
    r = M.one_step(z, c, grp, lr, rule, gamma=gamma, advantage=conv)
    sampled = np.isin(np.arange(z.size), draws)
    ref = mp_mass_change(z, r.dz, [c, c & ~sampled, c & sampled])
    for got, want in zip(
        [r.dq_pos_exact, r.dq_unsampled_correct_exact, r.dq_sampled_correct_exact],
        ref,
        strict=True,
    ):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-15)
    dp = M.exact_prob_change(np.exp(z - z.max()) / np.exp(z - z.max()).sum(), r.dz)
    assert dp.sum() == pytest.approx(0.0, abs=1e-14)


def test_exact_change_on_paper_policy_against_mpmath():
    z, c = paper_policy()
    grp = M.sample_group(z, 8, seed=11)
    r = M.one_step(z, c, grp, 1e-2, "logprob", gamma=1.0)
    # Merge the unsampled actions of each logit level (they share dz) for the 50-digit sum.
    sampled = np.zeros(z.size, dtype=bool)
    sampled[grp.actions] = True
    atoms_z, atoms_dz, atoms_w, atoms_c = [], [], [], []
    for a in grp.actions:
        atoms_z.append(z[a]), atoms_dz.append(r.dz[a]), atoms_w.append(1), atoms_c.append(c[a])
    for level in (0, 1, 10_000):  # anchor, other correct, incorrect
        same = (z == z[level]) & (c == c[level]) & ~sampled
        if same.any():
            assert np.all(r.dz[same] == r.dz[same][0])
            atoms_z.append(z[level]), atoms_dz.append(r.dz[same][0])
            atoms_w.append(int(same.sum())), atoms_c.append(c[level])
    ac = np.array(atoms_c)
    samp = np.r_[np.ones(grp.actions.size, bool), np.zeros(len(atoms_z) - grp.actions.size, bool)]
    ref = mp_mass_change(
        np.array(atoms_z), np.array(atoms_dz), [ac, ac & ~samp], weights=np.array(atoms_w)
    )
    assert r.dq_pos_exact == pytest.approx(ref[0], rel=1e-9)
    assert r.dq_unsampled_correct_exact == pytest.approx(ref[1], rel=1e-9)
    assert r.direct_drift == 0.0  # log-prob: unsampled logits do not move


# --------------------------------------------------------------------------------------------
# first order vs exact: the error is O(lr^2)
# --------------------------------------------------------------------------------------------


def _errors(z, c, grp, lr, rule, conv, gamma, rc, rw):
    """Signed exact - first-order changes (dQ_pos, dQ_u, dP_pos, every dp_j) and sum p |dz|."""
    r = M.one_step(z, c, grp, lr, rule, advantage=conv, gamma=gamma, r_correct=rc, r_incorrect=rw)
    p = np.exp(z - z.max())
    p /= p.sum()
    per_action = M.exact_prob_change(p, r.dz) - M.prob_change_first_order(p, r.dz)
    scalars = [
        r.dq_pos_exact - r.dq_pos_first_order,
        r.dq_unsampled_correct_exact - r.dq_unsampled_correct_first_order,
        r.dq_sampled_correct_exact - r.dq_sampled_correct_first_order,
    ]
    return np.concatenate([scalars, per_action]), float(np.dot(p, np.abs(r.dz)))


@settings(max_examples=200)
@given(policy_and_draws(), RULE_CONV, REWARDS, GAMMAS)
def test_first_order_error_is_second_order_in_lr(pd_, rule_conv, rewards, gamma):
    z, c, draws = pd_
    rule, conv = rule_conv
    rc, rw = rewards
    grp = M.make_group(draws, n_actions=z.size)
    kw = dict(advantage=conv, gamma=gamma, r_correct=rc, r_incorrect=rw)
    scale = np.abs(M.logit_step(z, c, grp, 1.0, rule, **kw)).max()
    if scale == 0:  # zero-variance group or g = 0: nothing moves, exactly
        r = M.one_step(z, c, grp, 1.0, rule, **kw)
        assert r.dq_pos_exact == 0.0 and r.dq_pos_first_order == 0.0
        return
    lrs = 0.2 / scale / 2.0 ** np.arange(8)  # largest logit move 0.2, 0.1, ..., 0.0016
    errs, sizes = zip(*[_errors(z, c, grp, e, rule, conv, gamma, rc, rw) for e in lrs], strict=True)
    coef = np.array(errs) / lrs[:, None] ** 2  # (exact - first)/lr^2 -> second-order coefficient
    noise = 1e-13 * np.array(sizes) / lrs**2
    # If the error is O(lr^2), coef converges: its successive differences shrink (by ~2 per
    # halving, the next term being O(lr)). An O(lr) error would make them DOUBLE per halving.
    diffs = np.abs(np.diff(coef, axis=0)).max(axis=1)
    for k in range(4, 7):
        assert diffs[k] <= 0.75 * diffs[k - 1] + 4 * noise[k + 1], (k, diffs)


@pytest.mark.parametrize(
    ("rule", "conv", "draws"),
    [
        ("theory", None, [0, 1, 4, 4]),
        ("theory", None, [0, 0, 0]),
        ("linear", None, [0, 2, 3, 5, 5]),
        ("logprob", None, [0, 1, 4, 4]),
        ("logprob", "trl", [1, 3, 3, 5, 0]),
    ],
)
def test_halving_lr_divides_error_by_four(rule, conv, draws):
    z = np.array([2.0, 0.5, -0.5, 1.0, 0.0, -1.0])
    c = np.array([True, True, True, False, False, False])
    grp = M.make_group(draws, n_actions=6)
    e = [np.abs(_errors(z, c, grp, lr, rule, conv, 0.0, 1.0, -1.0)[0]) for lr in (0.04, 0.02, 0.01)]
    for big, small in zip(e[:-1], e[1:], strict=True):
        np.testing.assert_allclose(big / small, 4.0, rtol=0.05)


# --------------------------------------------------------------------------------------------
# Proposition 3.2: total correct mass grows while the unsampled correct mass shrinks
# --------------------------------------------------------------------------------------------


def test_total_correct_mass_grows_while_unsampled_correct_mass_shrinks():
    # High-success prompt (mu ~ 0.82), reward-positive group: the anchor drawn 4 times.
    z = np.array([2.0, 0.0, 0.0, 0.0, 0.0])
    c = np.array([True, True, True, False, False])
    grp = M.make_group([0, 0, 0, 0], n_actions=5)
    r = M.one_step(z, c, grp, 1.0, "theory")
    assert r.stats.S_R > 0
    sampled = np.array([True, False, False, False, False])
    dq_pos, dq_u = mp_mass_change(z, r.dz, [c, c & ~sampled])  # exact update at 50 digits
    assert dq_pos > 0 > dq_u
    assert r.dq_pos_exact == pytest.approx(dq_pos, rel=1e-12)
    assert r.dq_unsampled_correct_exact == pytest.approx(dq_u, rel=1e-12)
    # Both first-order terms of P-10 are negative here: direct drift and coupling.
    assert r.direct_drift < 0 and r.coupling < 0
    assert r.dq_pos_first_order > 0 > r.dq_unsampled_correct_first_order


def test_same_on_paper_policy_all_correct_group():
    # The paper's start, a group of 8 distinct non-anchor correct draws (X = N, S_R > 0).
    z, c = paper_policy()
    grp = M.make_group(np.arange(1, 9), n_actions=z.size)
    r = M.one_step(z, c, grp, 1e-2, "theory")
    assert r.stats.S_R > 0
    assert r.dq_pos_exact > 0 > r.dq_unsampled_correct_exact


# --------------------------------------------------------------------------------------------
# small and large policies, validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", M.RULES)
def test_two_actions(rule):
    z = np.array([0.3, -0.2])
    c = np.array([True, False])
    for draws in ([0], [1], [0, 1], [0, 0, 1]):
        grp = M.make_group(draws, n_actions=2)
        r = M.one_step(z, c, grp, 0.5, rule)
        assert r.dq_pos_exact == pytest.approx(r.stats.Q_neg - mp_q_after(z, r.dz), abs=1e-15)
        if 0 in draws:
            assert r.stats.Q_u == 0 and r.dq_unsampled_correct_exact == 0.0


def mp_q_after(z, dz):
    mp.mp.dps = 50
    e = [mp.exp(mp.mpf(float(a)) + mp.mpf(float(b))) for a, b in zip(z, dz, strict=True)]
    return float(e[1] / (e[0] + e[1]))


def test_focal_weight_scales_the_step():
    z = np.array([1.0, 0.0, -1.0, 0.5])
    c = np.array([True, True, False, False])
    grp = M.make_group([0, 0, 3], n_actions=4)  # X = 2, N = 3: g = (1/3)^gamma
    for rule in M.RULES:
        d0 = M.logit_step(z, c, grp, 0.1, rule)
        d1 = M.logit_step(z, c, grp, 0.1, rule, gamma=2.0)
        np.testing.assert_allclose(d1, d0 / 9.0, rtol=1e-14)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(lr=0.0), "^lr must be > 0.0; got 0.0"),
        (dict(lr=-1.0), "^lr must be"),
        (dict(rule="ppo"), "^rule must be one of"),
        (dict(gamma=-0.5), "^gamma must be >= 0.0; got -0.5"),
        (dict(r_correct=0.0, r_incorrect=0.0), "^r_correct must be > r_incorrect = 0.0; got 0.0"),
        (dict(advantage="trl"), "^advantage must be None for rule 'theory'"),
        (dict(rule="logprob", advantage="nope"), "^advantage must be one of"),
    ],
)
def test_one_step_validation(kwargs, message):
    z = np.array([1.0, 0.0])
    c = np.array([True, False])
    args = dict(lr=0.1, rule="theory")
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        M.one_step(z, c, M.make_group([0], n_actions=2), args.pop("lr"), **args)


def test_one_step_rejects_bad_policies():
    grp = M.make_group([0], n_actions=2)
    with pytest.raises(ValueError, match="^logits must be a finite number; got nan"):
        M.one_step([np.nan, 0.0], [True, False], grp, 0.1)
    with pytest.raises(ValueError, match="^correct must be a mask with at least one correct"):
        M.one_step([1.0, 0.0], [False, False], grp, 0.1)
    with pytest.raises(ValueError, match="^group must be <= 1; got 2"):
        M.one_step([1.0, 0.0], [True, False], M.make_group([2], n_actions=3), 0.1)
    with pytest.raises(ValueError, match="^N must be >= 1; got 0"):
        M.sample_group([1.0, 0.0], 0)


def test_result_frames():
    z, c = paper_policy()
    r = M.one_step(z, c, M.sample_group(z, 8, seed=0), 1e-2)
    d = r.as_dict()
    assert {"dq_pos_first_order", "dq_pos_exact", "direct_drift", "coupling", "Q_u"} <= set(d)
    assert "dz" not in d
    df = r.to_frame()
    assert (
        df.shape[0] == 1
        and df["dq_unsampled_correct_exact"].iloc[0] == d["dq_unsampled_correct_exact"]
    )


def test_per_action_and_subset_methods():
    z = np.array([2.0, 0.5, -0.5, 1.0, 0.0, -1.0])
    c = np.array([True, True, True, False, False, False])
    draws = [0, 3, 3]
    r = M.one_step(z, c, M.make_group(draws, n_actions=6), 0.4, "linear")
    dz = oracle_dz(z, c, draws, 0.4, "linear")
    p = np.exp(z) / np.exp(z).sum()
    np.testing.assert_allclose(r.dp_first_order(), p * (dz - np.dot(p, dz)), rtol=1e-12)
    mp.mp.dps = 50
    masks = [np.arange(6) == j for j in range(6)]
    np.testing.assert_allclose(r.dp_exact(), mp_mass_change(z, dz, masks), rtol=1e-10)
    odd = np.array([False, True, False, True, False, True])
    first, exact = r.subset_change(odd)
    assert first == pytest.approx(r.dp_first_order()[odd].sum(), rel=1e-12)
    assert exact == pytest.approx(mp_mass_change(z, dz, [odd])[0], rel=1e-10)
    assert r.subset_change(c) == pytest.approx((r.dq_pos_first_order, r.dq_pos_exact), rel=1e-12)
    with pytest.raises(ValueError, match=r"^mask must be of the shape of probs \(6,\)"):
        r.subset_change([1, 0])


# --------------------------------------------------------------------------------------------
# issue 10 item 11: every public function names the argument and the value
# --------------------------------------------------------------------------------------------

P3 = np.array([0.5, 0.3, 0.2])
DZ3 = np.array([0.1, -0.2, 0.0])


@pytest.mark.parametrize(
    "fn", [M.prob_change_first_order, M.exact_prob_change], ids=["first_order", "exact"]
)
@pytest.mark.parametrize(
    ("probs", "dz", "message"),
    [
        ([0.5, np.nan, 0.5], DZ3, "^probs must be a finite number; got nan$"),
        ([0.5, np.inf, 0.5], DZ3, "^probs must be a finite number; got inf$"),
        (P3, [0.1, np.nan, 0.0], "^dz must be a finite number; got nan$"),
        (P3, [0.1, -np.inf, 0.0], "^dz must be a finite number; got -inf$"),
        ([1.2, -0.2, 0.0], DZ3, r"^probs must be >= 0\.0; got -0\.2$"),
        ([0.5, 0.3, 0.3], DZ3, "^probs must be probabilities summing to 1 over the last axis"),
        (
            [[0.5, 0.5, 0.0], [0.2, 0.2, 0.2]],
            [DZ3, DZ3],
            "summing to 1.*got 'an array summing to 0.6",
        ),
        (
            P3,
            [0.1, 0.2],
            r"^dz must be of the shape of probs \(3,\); got 'an array of shape \(2,\)'$",
        ),
        (P3, 0.1, r"^dz must be of the shape of probs \(3,\); got 'an array of shape \(\)'$"),
        (1.0, 0.1, "^probs must be an array of shape"),
        ("abc", DZ3, "^probs must be a number or an array of numbers"),
    ],
)
def test_prob_changes_validate(fn, probs, dz, message):
    with pytest.raises(ValueError, match=message):
        fn(probs, dz)


def test_prob_changes_accept_valid_batches():
    p = np.array([P3, [0.25, 0.25, 0.5]])
    d = np.array([DZ3, [0.0, 0.3, -0.1]])
    first = M.prob_change_first_order(p, d)
    exact = M.exact_prob_change(p, d)
    # hand-computed P-18 on the second row, and exact = softmax(log p + dz) - p
    np.testing.assert_allclose(first[1], p[1] * (d[1] - p[1] @ d[1]), rtol=1e-15)
    new = p[1] * np.exp(d[1]) / np.sum(p[1] * np.exp(d[1]))
    np.testing.assert_allclose(exact[1], new - p[1], rtol=1e-12)


@pytest.mark.parametrize(
    "fn", [M.subset_change_first_order, M.exact_subset_change], ids=["first_order", "exact"]
)
def test_subset_changes_validate(fn):
    with pytest.raises(ValueError, match=r"^mask must be of the shape of probs \(3,\)"):
        fn(P3, DZ3, [True, False])
    with pytest.raises(ValueError, match="^mask must be a mask of booleans or 0/1 values; got 2"):
        fn(P3, DZ3, [1, 2, 0])
    with pytest.raises(ValueError, match="^weights must be >= 0.0; got -1.0"):
        fn(P3, DZ3, [True, False, True], [1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="^probs must be probabilities summing to 1"):
        fn(P3, DZ3, [True, False, True], [2.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="^dz must be a finite number; got nan"):
        fn(P3, [0.0, np.nan, 0.0], [True, False, True])
    # weights: one entry standing for two actions of probability 0.25 each
    merged = fn([0.5, 0.25], [0.1, 0.3], [True, False], [1.0, 2.0])
    dense = fn([0.5, 0.25, 0.25], [0.1, 0.3, 0.3], [True, False, False])
    assert merged == pytest.approx(dense, rel=1e-14)


@pytest.mark.parametrize(
    ("K", "N", "message"),
    [
        (np.inf, 3, "^K must be a finite number; got inf$"),
        (3, np.inf, "^N must be a finite number; got inf$"),
        (None, 3, "^K must be a single integer >= 1; got None$"),
        (3, None, "^N must be a single integer >= 1; got None$"),
        ([3, 4], 3, r"^K must be a single integer >= 1; got 'an array of shape \(2,\)'$"),
        (3, np.array([1, 2]), r"^N must be a single integer >= 1; got 'an array of shape \(2,\)'$"),
        (0, 3, "^K must be >= 1; got 0$"),
        (3, 2.5, "^N must be an integer; got 2.5$"),
        (128_000, 2**53, "^N must be such that C.N.K-1, N. has at most 100000 digits"),
    ],
)
def test_count_outcomes_validates(K, N, message):
    with pytest.raises(ValueError, match=message):
        M.count_outcomes(K, N)


def test_count_outcomes_and_its_log():
    # stars and bars by brute force for small cases
    import itertools
    import math

    for K, N in [(1, 5), (2, 3), (4, 4), (6, 3)]:
        brute = sum(1 for _ in itertools.combinations_with_replacement(range(K), N))
        assert M.count_outcomes(K, N) == brute
        assert M.log_count_outcomes(K, N) == pytest.approx(math.log(brute), rel=1e-13, abs=1e-13)
    # huge counts: the log against mpmath (gammaln differences lost 2e-5 relative here)
    mp.mp.dps = 50
    for K, N in [(128_000, 2**53), (1, 131_072), (2, 131_072), (128_000, 1), (10**9, 131_072)]:
        ref = float(mp.log(mp.binomial(N + K - 1, N)))
        assert M.log_count_outcomes(K, N) == pytest.approx(ref, rel=1e-13, abs=1e-13), (K, N)
    ref = float(mp.log(mp.binomial(2 * 10**7 - 1, 10**7)))
    assert M.log_count_outcomes(10**7, 10**7) == pytest.approx(ref, rel=1e-10)


def test_closed_forms_name_the_argument():
    z, c = np.array([1.0, 0.0, -1.0]), np.array([True, False, False])
    with pytest.raises(ValueError, match=r"^logits must be a 1-d array of logits; got 'an array"):
        M.expected_unsampled_square_mass(1.0, 4)
    with pytest.raises(ValueError, match=r"^logits must be a 1-d array of logits"):
        M.expected_unsampled_square_mass(np.zeros((2, 2)), 4)
    with pytest.raises(ValueError, match="^N must be >= 1; got 0"):
        M.expected_unsampled_square_mass(z, [4, 0])
    with pytest.raises(ValueError, match="^k must be <= 4; got 5"):
        M.expected_sampled_mass_given_correct(z, c, 4, 5)
    with pytest.raises(ValueError, match="^N must be <= 1048576; got 1048577"):
        M.expected_logprob_drift(z, c, 2**20 + 1)
    with pytest.raises(ValueError, match="^advantage must be one of"):
        M.expected_logprob_drift(z, c, 4, advantage="nope")
    with pytest.raises(ValueError, match="^stats must be a GroupStatistics"):
        M.total_correct_change_p17({"N": 3}, 0.1)
    stats = M.group_statistics(z, c, M.make_group([0, 1], n_actions=3))
    with pytest.raises(ValueError, match="^lr must be >= 0.0; got -0.1"):
        M.unsampled_correct_change_p10(stats, -0.1)
    with pytest.raises(ValueError, match=r"^logits must be a 1-d array of logits"):
        M.sample_group([[1.0, 0.0]], 3)


def test_work_is_bounded_before_it_starts():
    # issue 10 item 5, in the library: refused at once (no 8 GB draw, no endless loop)
    z, c = paper_policy()
    with pytest.raises(ValueError, match="^N must be <= 1048576; got 1000000000$"):
        M.sample_group(z, 1_000_000_000)
    with pytest.raises(ValueError, match="^N must be <= 1048576; got 1000000000$"):
        M.expected_change(z, c, 1_000_000_000, 0.1)
    with pytest.raises(ValueError, match="^samples must be <= 268435456 for N = 8"):
        M.expected_change(z, c, 8, 0.1, method="monte-carlo", samples=2**53)
    assert M.MAX_MONTE_CARLO_DRAWS == 2**31 and M.MAX_GROUP_SIZE == 2**20


def test_step_spec_is_validated_once_and_resolves_the_advantage():
    s = M.StepSpec("linear", 0.5)
    assert s.advantage.name == "dr-grpo" and s.lr == 0.5 and s.r_incorrect == -1.0
    assert M.StepSpec("logprob", 0.5).advantage_name == "grpo"
    assert M.StepSpec("theory", 0.5).advantage is None
    with pytest.raises(ValueError, match="^rule must be one of 'theory', 'linear', 'logprob'"):
        M.StepSpec("paper-sim", 0.5)
    with pytest.raises(ValueError, match="^advantage must be a preset name or an Advantage"):
        M.StepSpec("logprob", 0.5, advantage=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.lr = 1.0
