"""Checks of the training-scheme closed forms (docs/theory.md section 15).

- H(mu; N) (:func:`~fgrpo_theory.schemes.theory.difficulty_profile`) against the expected
  gradient of the (1/N) surrogate on a small tabular softmax policy, summed over every ordered
  group of N actions (its projection on grad mu is H, its part orthogonal to grad mu is 0);
- the same on a 1000-action policy by Monte Carlo (groups drawn with NumPy at a fixed seed);
- the pass@k weights (:func:`~fgrpo_theory.schemes.theory.passk_weights`) at N = 8 against the
  reference values of section 15 and against GRPO / focal tables expanded in 60-digit mpmath.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ._rows import CheckRow, _exact_row, _mc_row, _mean_se, _rng

#: Section 15's reference weights at N = 8, rewards 1/0 (3 decimals; MaxRL exact).
REFERENCE_WEIGHTS = {
    "maxrl": ([1 / k for k in range(1, 8)] + [0.0], 1e-13),
    "grpo": ([2.646, -1.875, 2.058, -1.279, 0.644, -0.132, 0.038, 0.0], 6e-4),
    "focal:gamma=0.5": ([0.935, 0.225, 0.107, 0.064, 0.042, 0.028, 0.019, 0.0], 6e-4),
    "focal:gamma=1": ([0.331, 0.523, -0.009, 0.133, 0.019, 0.035, 0.019, 0.0], 6e-4),
}

_ENUM_SPECS = ("grpo", "maxrl", "focal:gamma=1", "w-reinforce", "pkpo:k=2", "rloo")


def _softmax(z: np.ndarray) -> np.ndarray:
    p = np.exp(z - z.max())
    return p / p.sum()


def _enumerate(a_c: np.ndarray, a_w: np.ndarray, N: int, p: np.ndarray, correct: np.ndarray):
    """Expected logit gradient of (1/N) sum_i A_i log pi(a_i) over all ordered groups."""
    K = len(p)
    grad = np.zeros(K)
    for group in itertools.product(range(K), repeat=N):
        prob = math.prod(p[a] for a in group)
        X = int(sum(correct[a] for a in group))
        for a in group:
            A = a_c[X] if correct[a] else a_w[X]
            grad -= prob * A * p / N
            grad[a] += prob * A / N
    return grad


def _checks_schemes(reps: int) -> list[CheckRow]:
    from ..schemes import parse_scheme
    from ..schemes.theory import difficulty_profile, passk_weights

    rows: list[CheckRow] = []
    # exact enumeration: 4 actions, the first two correct
    p = _softmax(np.array([0.3, -1.1, 0.4, -0.2]))
    correct = np.array([True, True, False, False])
    mu = float(p[correct].sum())
    grad_mu = p * (correct - mu)
    for spec in _ENUM_SPECS:
        for N in (3, 4):
            a_c, a_w = parse_scheme(spec).tables(N, 1.0, 0.0)
            g = _enumerate(a_c, a_w, N, p, correct)
            H = difficulty_profile(spec, N, mu)
            proj = float(g @ grad_mu / (grad_mu @ grad_mu))
            resid = float(np.abs(g - proj * grad_mu).max())
            par = f"{spec}, N={N}, mu={mu:.4f}, 4 actions"
            rows.append(
                _exact_row("profile H(mu; N) (sec. 15)", par, "enumeration", H, proj, 1e-12)
            )
            rows.append(
                _exact_row("gradient orthogonal to grad mu", par, "enumeration", 0.0, resid, 1e-13)
            )
    # Monte Carlo: 1000 actions, 40 correct, N = 8
    rng = _rng(15)
    K, N = 1000, 8
    p = _softmax(rng.normal(size=K))
    correct = np.zeros(K, bool)
    correct[:40] = True
    mu = float(p[correct].sum())
    grad_mu = p * (correct - mu)
    u = grad_mu / (grad_mu @ grad_mu)
    groups = max(reps // 8, 2_000)
    for i, spec in enumerate(("grpo", "maxrl", "focal:gamma=1", "pkpo:k=4")):
        a_c, a_w = parse_scheme(spec).tables(N, 1.0, 0.0)
        acts = _rng(15, i).choice(K, size=(groups, N), p=p)
        c = correct[acts]
        X = c.sum(axis=1, keepdims=True)
        A = np.where(c, a_c[X], a_w[X])
        proj = (A * (u[acts] - float(p @ u))).sum(axis=1) / N
        est, se = _mean_se(proj)
        par = f"{spec}, N={N}, mu={mu:.4f}, {K} actions, {groups} groups"
        rows.append(
            _mc_row("profile H(mu; N) (sec. 15)", par, difficulty_profile(spec, N, mu), est, se)
        )
    # pass@k weights at N = 8: section 15's reference values and 60-digit expansions
    for spec, (ref, tol) in REFERENCE_WEIGHTS.items():
        c = passk_weights(spec, 8)
        for k in range(8):
            rows.append(
                _exact_row(
                    f"pass@k weight c_{k + 1} (sec. 15)",
                    f"{spec}, N=8, rewards 1/0",
                    "reference",
                    c[k],
                    ref[k],
                    tol,
                )
            )
    for gamma in (0.0, 0.5, 1.0):
        spec = f"grpo+focal:gamma={gamma:g}"
        c = passk_weights(spec, 8)
        ref = _mp_weights(8, gamma)
        err = float(np.abs(c - ref).max())
        rows.append(
            _exact_row("pass@k weights, max error", f"{spec}, N=8", "mpmath", 0.0, err, 1e-13)
        )
    return rows


def _mp_weights(N: int, gamma: float) -> np.ndarray:
    """c_1..c_N of GRPO (population std, rewards 1/0) with focal gamma: tables and the change of
    basis in 60-digit arithmetic."""
    import mpmath as mp

    with mp.workdps(60):
        g = mp.mpf(gamma)
        coef = [mp.mpf(0)] * N
        for y in range(N):
            d = mp.mpf(0)
            if y + 1 < N:  # a correct rollout in a group with y + 1 correct
                x = mp.mpf(y + 1)
                d += mp.sqrt((N - x) / x) * (1 - x / N) ** g
            if y > 0:  # minus the advantage of an incorrect one with y correct
                x = mp.mpf(y)
                d += mp.sqrt(x / (N - x)) * (1 - x / N) ** g
            for i in range(y + 1):
                coef[N - 1 - y + i] += d * math.comb(N - 1, y) * math.comb(y, i) * (-1) ** i
        return np.array([float(coef[k - 1] / k) for k in range(1, N + 1)])
