"""Checks of the closed forms: tail miss, modes, advantages, pass@k (``fgrpo-theory validate``)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from ._rows import (
    CheckRow,
    _exact_row,
    _mc_prop_row,
    _mc_row,
    _mean_se,
    _rng,
    monte_carlo_region_counts,
    monte_carlo_tail_miss,
)

# ------------------------------------------------------------------------------------ the checks


def _checks_tail_miss(reps: int) -> list[CheckRow]:
    from ..tail_miss import (
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
    from ..tail_miss import expected_missed_modes

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

    from ..advantages import (
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

    from ..passk import pass_at_k, pass_at_k_exact

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
