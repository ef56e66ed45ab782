"""Checks of the mass-redistribution results, theory.md sections 5-6 (``fgrpo-theory validate``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from ._rows import (
    BASE_SEED,
    CheckRow,
    _exact_row,
    _mc_row,
    _mean_se,
    _rng,
)

# ----------------------------------------------------------------------------- mass (sections 5-6)

#: Small policy of the mass checks: 3 correct actions (one dominant) and 3 incorrect ones.
_MASS_LOGITS = np.array([2.0, 0.5, -0.5, 1.0, 0.0, -1.0])
_MASS_CORRECT = np.array([True, True, True, False, False, False])


def _mp_derivative(z: np.ndarray, u: np.ndarray, mask: np.ndarray) -> float:
    """d/dt sum_mask softmax(z + t u) at t = 0, at 50 digits (mpmath.diff)."""
    import mpmath

    mpmath.mp.dps = 50
    zz = [mpmath.mpf(float(v)) for v in z]
    uu = [mpmath.mpf(float(v)) for v in u]

    def f(t):
        e = [mpmath.exp(a + t * b) for a, b in zip(zz, uu, strict=True)]
        return mpmath.fsum(e[i] for i in range(len(e)) if mask[i]) / mpmath.fsum(e)

    return float(mpmath.diff(f, 0))


def _p5_direction(
    p: np.ndarray, counts: np.ndarray, corr: np.ndarray, N: int, rc: float, rw: float
) -> np.ndarray:
    """Logit direction dz/eta of the linear surrogate (P-5) on the distinct sampled actions."""
    sampled = counts > 0
    r = np.where(corr, rc, rw)
    s_r = float(np.sum(np.where(sampled, p * r, 0.0)))
    return np.where(sampled, p * (r - s_r), -s_r * p) / N


def _checks_mass(reps: int) -> list[CheckRow]:
    from scipy.special import softmax

    from ..mass import (
        expected_change,
        expected_logprob_drift,
        expected_sampled_mass_given_correct,
        expected_unsampled_square_mass,
        group_statistics,
        make_group,
        one_step,
        total_correct_change_p17,
        unsampled_correct_change_p10,
    )

    rows = []
    z, corr = _MASS_LOGITS, _MASS_CORRECT
    K = z.size
    p = softmax(z)
    rc, rw = 1.0, -1.0
    # P-17 and P-10 are the derivative in eta of Q_pos and Q_u along the P-5 step (mpmath).
    for draws in ([0, 0, 3], [0, 1, 4, 4], [3, 4, 5, 5, 0], [2, 3]):
        grp = make_group(draws, n_actions=K)
        counts = np.bincount(draws, minlength=K)
        N = len(draws)
        u = _p5_direction(p, counts, corr, N, rc, rw)
        stats = group_statistics(z, corr, grp, rc, rw)
        par = f"K=6, draws={draws}"
        d_pos = _mp_derivative(z, u, corr)
        rows.append(
            _exact_row(
                "dQ_pos/eta first order (P-17)",
                par,
                "mpmath",
                total_correct_change_p17(stats, 1.0).total,
                d_pos,
                1e-12,
            )
        )
        unsampled_corr = corr & (counts == 0)
        d_u = _mp_derivative(z, u, unsampled_corr)
        rows.append(
            _exact_row(
                "dQ_u/eta first order (P-10, Prop. 3.2)",
                par,
                "mpmath",
                unsampled_correct_change_p10(stats, 1.0).total,
                d_u,
                1e-12,
            )
        )
        # Exact update: softmax of z + eta u, recomputed here, against one_step's exact change.
        eta = 0.5
        new = softmax(z + eta * u)
        res = one_step(z, corr, grp, eta, "theory", r_correct=rc, r_incorrect=rw)
        rows.append(
            _exact_row(
                "dQ_pos exact update",
                f"{par}, eta={eta:g}",
                "enumeration",
                res.dq_pos_exact,
                new[corr].sum() - p[corr].sum(),
                1e-12,
            )
        )
    # First order vs exact: the error is O(eta^2): halving eta divides it by 4.
    grp = make_group([0, 1, 4, 4], n_actions=K)
    errs = []
    for eta in (0.02, 0.01):
        r = one_step(z, corr, grp, eta, "theory", r_correct=rc, r_incorrect=rw)
        errs.append(r.dq_pos_exact - r.dq_pos_first_order)
    rows.append(
        _exact_row(
            "P-17 error ratio err(eta)/err(eta/2) -> 4",
            "draws=[0,1,4,4], eta=0.02",
            "enumeration",
            4.0,
            errs[0] / errs[1],
            0.02,
        )
    )
    # E[U2] = sum p^2 (1-p)^N against sampling groups.
    for i, N in enumerate((1, 4, 16)):
        counts = _rng(5, i).multinomial(N, p, size=reps)
        u2 = np.sum(np.where(counts == 0, p**2, 0.0), axis=1)
        est, se = _mean_se(u2)
        rows.append(
            _mc_row(
                "E[U2] = sum p^2 (1-p)^N",
                f"K=6, N={N}",
                expected_unsampled_square_mass(z, N),
                est,
                se,
            )
        )
    # Lemma H.1: E[P_pos | X=k], E[P_neg | X=k] against sampling groups conditioned on X = k.
    mu = float(p[corr].sum())
    q_pos, q_neg = p[corr] / mu, p[~corr] / (1.0 - mu)
    N = 6
    for k in (1, 3, 5):
        rng = _rng(6, k)
        c_pos = rng.multinomial(k, q_pos, size=reps)
        c_neg = rng.multinomial(N - k, q_neg, size=reps)
        pp = np.sum(np.where(c_pos > 0, p[corr], 0.0), axis=1)
        pn = np.sum(np.where(c_neg > 0, p[~corr], 0.0), axis=1)
        e_pos, e_neg = expected_sampled_mass_given_correct(z, corr, N, k)
        for name, arr, closed in (
            ("E[P_pos | X=k] (Lemma H.1, P-24)", pp, e_pos),
            ("E[P_neg | X=k] (Lemma H.1, P-25)", pn, e_neg),
        ):
            est, se = _mean_se(arr)
            rows.append(_mc_row(name, f"K=6, N={N}, k={k}", closed, est, se))
    # Expected first-order change of Q_pos over the group draw: enumeration vs Monte Carlo.
    N, eta = 3, 0.1
    en = expected_change(
        z,
        corr,
        N,
        eta,
        ("dq_pos_first_order", "dq_unsampled_correct_first_order"),
        method="enumerate",
    )
    mc = expected_change(
        z,
        corr,
        N,
        eta,
        ("dq_pos_first_order", "dq_unsampled_correct_first_order"),
        method="monte-carlo",
        samples=max(2, reps // 4),
        seed=BASE_SEED,
    )
    for q in ("dq_pos_first_order", "dq_unsampled_correct_first_order"):
        rows.append(
            _mc_row(
                f"E[{q}] (theory rule)",
                f"K=6, N={N}, eta={eta:g}",
                en.mean[q],
                mc.mean[q],
                mc.stderr[q],
            )
        )
    # Section 6: expected first-order drift of the log-prob rule against exact enumeration of
    # every group outcome, with GRPO (population std) advantages computed here.
    rows.extend(_drift_enumeration_rows(expected_logprob_drift))
    return rows


def _drift_enumeration_rows(expected_logprob_drift: Callable[..., Any]) -> list[CheckRow]:
    from scipy.special import softmax
    from scipy.stats import multinomial

    rows = []
    z = np.array([1.5, 0.2, -0.3, 0.4, -0.8])
    corr = np.array([True, True, True, False, False])
    K = z.size
    p = softmax(z)
    for N, gamma in ((4, 0.0), (5, 1.0)):
        e_dp = np.zeros(K)
        for draws in itertools.combinations_with_replacement(range(K), N):
            n = np.bincount(draws, minlength=K)
            prob = multinomial.pmf(n, N, p)
            x = int(n[corr].sum())
            rewards = np.repeat(np.where(corr, 1.0, -1.0), n)
            sd = rewards.std()
            if sd == 0:
                continue  # zero-variance group: A = 0, no update
            a_act = np.where(corr, (1.0 - rewards.mean()) / sd, (-1.0 - rewards.mean()) / sd)
            g = (1.0 - x / N) ** gamma
            dz = g * n * a_act / N  # eta = 1
            e_dp += prob * p * (dz - np.dot(p, dz))
        drift = expected_logprob_drift(z, corr, N, lr=1.0, gamma=gamma)
        for j in range(K):
            rows.append(
                _exact_row(
                    "E[dp_j] log-prob drift (section 6)",
                    f"K=5, N={N}, gamma={gamma:g}, action={j} "
                    f"({'correct' if corr[j] else 'incorrect'})",
                    "enumeration",
                    drift.expected_dp[j],
                    e_dp[j],
                    1e-10,
                )
            )
    return rows
