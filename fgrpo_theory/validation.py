"""Independent checks of every closed form of the toolkit (``fgrpo-theory validate``).

Each check compares a closed form with an oracle that does not share its code:

- ``monte_carlo``: sampling groups with NumPy's generator (fixed seeds). The row gives the Monte
  Carlo estimate, its standard error ``stderr`` (for a probability p0: sqrt(p0 (1 - p0) / n) under
  the closed form; for a mean: the sample standard deviation over sqrt(n)) and
  ``z = (estimate - closed_form) / stderr``; the
  check passes when ``|z| <= Z_CRIT`` (= 4). With a few dozen such checks, the chance that a correct
  closed form fails any of them is below 0.3 % (two-sided normal tail 6.3e-5 per check); seeds are
  fixed, so the table is the same on every run. If the estimate has zero variance (a probability
  estimated as exactly 0 or 1), the check passes only when the closed form equals it to 1e-12.
- ``enumeration`` / ``quadrature`` / ``scan`` / ``mpmath``: deterministic oracles (exact sums over
  all outcomes, ``scipy.integrate.quad``, brute-force argmax, 50-digit arithmetic). ``stderr`` is 0
  and the check passes when ``|estimate - closed_form| <= tolerance`` (stated per row, a relative
  tolerance times ``max(1, |closed_form|)``); ``z`` is the error in units of that tolerance.

:func:`run_validation` returns one row per check; ``quick=True`` uses fewer Monte Carlo samples.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Z_CRIT",
    "CheckRow",
    "monte_carlo_region_counts",
    "monte_carlo_tail_miss",
    "run_validation",
]

#: Largest |z| a Monte Carlo check may show and still pass.
Z_CRIT = 4.0

#: Base seed of every Monte Carlo check (each check derives its own stream from it).
BASE_SEED = 2602_06717


@dataclass(frozen=True)
class CheckRow:
    """One line of the validation table."""

    quantity: str
    parameters: str
    method: str
    closed_form: float
    estimate: float
    stderr: float
    z: float
    tolerance: float
    passed: bool


def _mc_row(quantity: str, parameters: str, closed: float, est: float, se: float) -> CheckRow:
    closed, est, se = float(closed), float(est), float(se)
    diff = est - closed
    if se > 0:
        z = diff / se
        passed = abs(z) <= Z_CRIT
    else:
        passed = abs(diff) <= 1e-12
        z = 0.0 if passed else math.copysign(1e9, diff)
    return CheckRow(quantity, parameters, "monte_carlo", closed, est, se, z, Z_CRIT, passed)


def _mc_prop_row(quantity: str, parameters: str, closed: float, est: float, reps: int) -> CheckRow:
    """Monte Carlo check of a probability: standard error of the proportion under the closed form,
    sqrt(p0 (1 - p0) / reps), so an event too rare to be seen still gets a finite z."""
    p0 = min(max(float(closed), 0.0), 1.0)
    return _mc_row(quantity, parameters, closed, est, math.sqrt(p0 * (1.0 - p0) / reps))


def _exact_row(
    quantity: str, parameters: str, method: str, closed: float, est: float, rtol: float
) -> CheckRow:
    closed, est = float(closed), float(est)
    tol = rtol * max(1.0, abs(closed))
    diff = est - closed
    passed = bool(np.isfinite(closed) and np.isfinite(est) and abs(diff) <= tol)
    if tol > 0:
        z = diff / tol
    else:  # exact equality required (integers)
        z = 0.0 if passed else math.copysign(1e9, diff)
    return CheckRow(quantity, parameters, method, closed, est, 0.0, z, tol, passed)


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng([BASE_SEED, *key])


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, dtype=float)
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))


# ----------------------------------------------------------------------------- Monte Carlo helpers


def monte_carlo_region_counts(
    N: int, probs: Any, reps: int, rng: np.random.Generator
) -> np.ndarray:
    """Counts of a group of N i.i.d. draws over disjoint regions with the given probabilities.

    Returns an int array of shape ``(reps, len(probs))`` (one multinomial draw per group).
    """
    p = np.asarray(probs, dtype=float)
    return rng.multinomial(int(N), p / p.sum(), size=int(reps))


def monte_carlo_tail_miss(
    N: int, mu: float, tau: float, reps: int, seed: int | tuple[int, ...] = 0
) -> dict[str, float]:
    """Monte Carlo estimates of Pr(active), Pr(hit E) and Pr(B) (Lemma 3.1) for one (N, mu, tau).

    Each group is a multinomial draw over the three disjoint regions E (mass tau), C \\ E
    (mu - tau) and the incorrect set (1 - mu); B = {0 < X < N and no draw in E}.

    Returns
    -------
    dict
        ``p_active, p_hit, p_tail_miss`` and their standard errors ``se_*`` (binomial).
    """
    key = seed if isinstance(seed, tuple) else (seed,)
    counts = monte_carlo_region_counts(N, [tau, mu - tau, 1.0 - mu], reps, _rng(*key))
    n_e, n_w = counts[:, 0], counts[:, 2]
    active = (n_w > 0) & (n_w < N)
    events = {"p_active": active, "p_hit": n_e > 0, "p_tail_miss": active & (n_e == 0)}
    out: dict[str, float] = {}
    for k, ev in events.items():
        p = float(ev.mean())
        out[k] = p
        out["se_" + k] = math.sqrt(p * (1.0 - p) / reps)
    return out


# ------------------------------------------------------------------------------------ the checks


def _checks_tail_miss(reps: int) -> list[CheckRow]:
    from .tail_miss import (
        active_probability,
        hit_probability,
        peak_group_size,
        tail_miss_probability,
    )

    rows = []
    grid = [(0.3, 0.015, 9), (0.5, 0.05, 4), (0.8, 0.008, 32), (0.2, 0.04, 64), (0.64, 6.3e-5, 20)]
    for i, (mu, tau, n) in enumerate(grid):
        mc = monte_carlo_tail_miss(n, mu, tau, reps, seed=(1, i))
        par = f"N={n}, mu={mu:g}, tau={tau:g}"
        rows.append(
            _mc_prop_row(
                "tail miss Pr(B) (Lemma 3.1)",
                par,
                tail_miss_probability(n, mu, tau),
                mc["p_tail_miss"],
                reps,
            )
        )
        rows.append(
            _mc_prop_row(
                "active Pr(A_N) (P-7)", par, active_probability(n, mu), mc["p_active"], reps
            )
        )
        rows.append(
            _mc_prop_row("hit Pr(E sampled)", par, hit_probability(n, tau), mc["p_hit"], reps)
        )
    # Extreme parameters against 50-digit arithmetic.
    import mpmath

    mpmath.mp.dps = 50
    for mu, tau, n in [(0.5, 1e-12, 10**6), (0.99, 1e-9, 3000), (0.3, 1e-6, 2)]:
        m, t = mpmath.mpf(mu), mpmath.mpf(tau)
        ref = (1 - t) ** n - (m - t) ** n - (1 - m) ** n
        rows.append(
            _exact_row(
                "tail miss Pr(B) (Lemma 3.1)",
                f"N={n}, mu={mu:g}, tau={tau:g}",
                "mpmath",
                tail_miss_probability(n, mu, tau),
                float(ref),
                1e-9,
            )
        )
    # Peak group size against a brute-force scan of the closed form.
    for mu, tau in [(0.3, 0.015), (0.8, 0.008), (0.5, 0.0005), (0.64, 6.3e-5), (0.2, 0.1)]:
        peak = peak_group_size(mu, tau)
        n = np.arange(1, 200_001)
        p = tail_miss_probability(n, mu, tau)
        i = int(np.argmax(p))
        par = f"mu={mu:g}, tau={tau:g}"
        rows.append(_exact_row("peak N* (argmax of Pr(B))", par, "scan", peak.n_star, n[i], 0.0))
        rows.append(_exact_row("peak Pr(B) at N*", par, "scan", peak.p_peak, p[i], 1e-12))
    return rows


def _checks_modes(reps: int) -> list[CheckRow]:
    from .tail_miss import expected_missed_modes

    rows = []
    cases = [(8, 0.4, [0.01, 0.03, 0.05]), (32, 0.7, [0.002, 0.01, 0.02, 0.1]), (3, 0.5, [0.25])]
    for i, (n, mu, taus) in enumerate(cases):
        t = np.asarray(taus)
        probs = [*t, mu - t.sum(), 1.0 - mu]
        counts = monte_carlo_region_counts(n, probs, reps, _rng(2, i))
        n_w = counts[:, -1]
        active = (n_w > 0) & (n_w < n)
        missed = ((counts[:, : len(t)] == 0).sum(axis=1)) * active
        est, se = _mean_se(missed)
        rows.append(
            _mc_row(
                "expected missed modes (active group)",
                f"N={n}, mu={mu:g}, taus={list(taus)}",
                expected_missed_modes(n, mu, t),
                est,
                se,
            )
        )
    return rows


def _checks_advantages(reps: int) -> list[CheckRow]:
    from scipy import integrate

    from .advantages import (
        binary_advantages,
        focal_advantages,
        group_advantages,
        lr_multiplier,
        weighted_magnitudes,
    )

    rows = []
    # Binary closed form against an explicit group, standardized with NumPy (population std).
    for n, x in [(8, 3), (2, 1), (33, 1), (1000, 999)]:
        r = np.array([1.0] * x + [0.0] * (n - x))
        ref = (r - r.mean()) / r.std()
        a_pos, a_neg = binary_advantages(x, n, "grpo")
        par = f"N={n}, X={x}, grpo"
        rows.append(
            _exact_row("binary advantage A+ (P-3)", par, "enumeration", a_pos, ref[0], 1e-12)
        )
        rows.append(
            _exact_row("binary advantage A- (P-3)", par, "enumeration", a_neg, ref[-1], 1e-12)
        )
        rb = np.array([1.0] * x + [-1.0] * (n - x))
        ref_b = (rb - rb.mean()) / rb.std(ddof=1)
        b_pos, _ = binary_advantages(x, n, "grpo-bessel", r_correct=1.0, r_incorrect=-1.0)
        rows.append(
            _exact_row(
                "binary advantage A+ (Bessel, +1/-1)",
                f"N={n}, X={x}",
                "enumeration",
                b_pos,
                ref_b[0],
                1e-12,
            )
        )
        g_adv = group_advantages(rb, "dr-grpo")
        rows.append(
            _exact_row(
                "mean-centred advantage (dr-grpo)",
                f"N={n}, X={x}",
                "enumeration",
                g_adv[0],
                rb[0] - rb.mean(),
                1e-12,
            )
        )
    # Focal advantages (P-12, P-13) and the Fig. 4 magnitudes, against a hand-built group.
    for n, x, gamma in [(10, 3, 0.5), (10, 7, 1.0), (4, 2, 2.0)]:
        r = np.array([1.0] * x + [0.0] * (n - x))
        g = (1.0 - x / n) ** gamma
        ref = g * (r - r.mean()) / r.std()
        fa = focal_advantages(r, gamma, "grpo", r_correct=1.0, r_incorrect=0.0)
        pos, neg = weighted_magnitudes(x / n, gamma)
        par = f"N={n}, X={x}, gamma={gamma:g}"
        rows.append(
            _exact_row("focal advantage A_F+ (P-13)", par, "enumeration", fa[0], ref[0], 1e-12)
        )
        rows.append(
            _exact_row("weighted g|A+| (Fig. 4)", par, "enumeration", pos, abs(ref[0]), 1e-12)
        )
        rows.append(
            _exact_row("weighted g|A-| (Fig. 4)", par, "enumeration", neg, abs(ref[-1]), 1e-12)
        )
    # Learning-rate multiplier (appendix N) against quadrature and Monte Carlo over mu ~ U(0, 1).
    rng = _rng(3)
    u = rng.random(reps)
    base = np.sqrt(u * (1.0 - u))
    for gamma in (0.5, 1.0, 2.0):

        def f(m: float, gm: float = gamma) -> float:
            return (1.0 - m) ** gm * math.sqrt(m * (1.0 - m))

        num = integrate.quad(f, 0.0, 1.0, epsabs=1e-14, epsrel=1e-13)[0]
        den = integrate.quad(lambda m: math.sqrt(m * (1.0 - m)), 0, 1, epsabs=1e-14)[0]
        rows.append(
            _exact_row(
                "LR multiplier m_gamma (app. N)",
                f"gamma={gamma:g}",
                "quadrature",
                lr_multiplier(gamma),
                num / den,
                1e-8,
            )
        )
        # Ratio estimator with a delta-method standard error.
        w = (1.0 - u) ** gamma * base
        ratio = w.mean() / base.mean()
        resid = (w - ratio * base) / base.mean()
        rows.append(
            _mc_row(
                "LR multiplier m_gamma (app. N)",
                f"gamma={gamma:g}",
                lr_multiplier(gamma),
                ratio,
                resid.std(ddof=1) / math.sqrt(reps),
            )
        )
    return rows


def _checks_passk(reps: int) -> list[CheckRow]:
    from scipy.stats import binom

    from .passk import pass_at_k, pass_at_k_exact

    rows = []
    # The estimator is the fraction of k-subsets of the n samples containing a correct one.
    for n, c, k in [(6, 2, 3), (8, 1, 1), (9, 4, 5), (7, 0, 2), (5, 4, 2)]:
        subsets = list(itertools.combinations(range(n), k))
        hit = sum(any(i < c for i in s) for s in subsets) / len(subsets)
        rows.append(
            _exact_row(
                "pass@k estimator",
                f"n={n}, c={c}, k={k}",
                "enumeration",
                pass_at_k(n, c, k),
                hit,
                1e-12,
            )
        )
    # Unbiasedness: E[estimator | c ~ Bin(n, mu)] = 1 - (1 - mu)^k, as an exact sum over c.
    for n, mu, k in [(64, 0.05, 16), (1024, 0.002, 256), (20, 0.5, 1)]:
        c = np.arange(n + 1)
        mean = float(np.sum(binom.pmf(c, n, mu) * pass_at_k(n, c, k)))
        rows.append(
            _exact_row(
                "pass@k exact = E[estimator]",
                f"n={n}, mu={mu:g}, k={k}",
                "enumeration",
                pass_at_k_exact(mu, k),
                mean,
                1e-9,
            )
        )
    # Exact pass@k against sampling k attempts.
    for i, (mu, k) in enumerate([(0.05, 16), (0.3, 2), (0.001, 256)]):
        rng = _rng(4, i)
        solved = rng.binomial(k, mu, size=reps) > 0
        rows.append(
            _mc_prop_row(
                "pass@k exact 1-(1-mu)^k",
                f"mu={mu:g}, k={k}",
                pass_at_k_exact(mu, k),
                solved.mean(),
                reps,
            )
        )
    return rows


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

    from .mass import (
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


#: Check groups in run order: (name, function of the Monte Carlo sample count).
CHECKS: list[tuple[str, Callable[[int], list[CheckRow]]]] = [
    ("tail_miss", _checks_tail_miss),
    ("modes", _checks_modes),
    ("advantages", _checks_advantages),
    ("passk", _checks_passk),
    ("mass", _checks_mass),
]


def run_validation(quick: bool = False) -> pd.DataFrame:
    """Run every check; return a DataFrame with one row per check.

    Parameters
    ----------
    quick : bool
        Fewer Monte Carlo samples (20,000 per check instead of 400,000).

    Returns
    -------
    pandas.DataFrame
        Columns ``group, quantity, parameters, method, closed_form, estimate, stderr, z,
        tolerance, passed`` (see the module docstring for the pass rules).
    """
    import pandas as pd

    reps = 20_000 if quick else 400_000
    records = []
    for group, fn in CHECKS:
        for row in fn(reps):
            records.append({"group": group, **row.__dict__})
    return pd.DataFrame.from_records(records)
