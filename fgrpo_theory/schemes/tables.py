"""Per-X advantage tables of the binary group schemes (theory.md section 15).

Each function returns ``(a_c, a_w)``, float64 arrays of length ``N + 1``: the advantage of a
correct and of an incorrect rollout in a group of ``N`` with ``X`` correct, X = 0..N. Entries for
a rollout that cannot exist (``a_c[0]``, ``a_w[N]``) are 0. These are the ONE definition of each
scheme's advantages: the array-API function gathers from them, the closed forms of section 15
sum over them and the simulators' kernels index them by X.
"""

from __future__ import annotations

import math

import numpy as np

from .._validate import fail

__all__ = [
    "convention_table",
    "maxrl_table",
    "w_reinforce_table",
    "psr_table",
    "nsr_table",
    "pkpo_table",
]


def _exists(N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X = np.arange(N + 1)
    return X, X > 0, X < N


def convention_table(name: str):
    """The table of convention preset ``name``: :func:`~fgrpo_theory.advantages.binary_advantages`
    with the declared reward pair (P-3 and the trainers' variants, theory.md section 3)."""

    def table(N: int, r_correct: float, r_incorrect: float) -> tuple[np.ndarray, np.ndarray]:
        from ..advantages import binary_advantages

        X = np.arange(N + 1)
        a_c, a_w = binary_advantages(X, N, name, r_correct=r_correct, r_incorrect=r_incorrect)
        return np.asarray(a_c, dtype=float), np.asarray(a_w, dtype=float)

    return table


def maxrl_table(N: int, r_correct: float, r_incorrect: float) -> tuple[np.ndarray, np.ndarray]:
    """MaxRL for binary rewards (Tajwar et al. 2026, arXiv 2602.02710): A_i = (r_i - mean r) /
    mean r with r in {0, 1}, so a_c = (N - X)/X and a_w = -1; a group with X = 0 has no
    correct rollout to normalize by and gets A = 0. In expectation it maximizes
    sum_{k<N} pass@k / k (theory.md section 15)."""
    X, has_c, has_w = _exists(N)
    Xs = np.maximum(X, 1)
    a_c = np.where(has_c, (N - X) / Xs, 0.0)
    a_w = np.where(has_c & has_w, -1.0, 0.0)
    return a_c.astype(float), a_w.astype(float)


def w_reinforce_table(
    N: int, r_correct: float, r_incorrect: float, **params: float
) -> tuple[np.ndarray, np.ndarray]:
    """W-REINFORCE (Zhu et al. 2025, arXiv 2506.01347): +lambda for a correct rollout, -1 for an
    incorrect one, no baseline and no normalization (lambda = 1 is REINFORCE with rewards +1/-1;
    PSR and NSR are its two halves). ``params["lambda"]`` is lambda (0.1 in the paper)."""
    _, has_c, has_w = _exists(N)
    return np.where(has_c, float(params["lambda"]), 0.0), np.where(has_w, -1.0, 0.0)


def psr_table(N: int, r_correct: float, r_incorrect: float) -> tuple[np.ndarray, np.ndarray]:
    """PSR, positive-sample reinforcement (Zhu et al. 2025): +1 for a correct rollout, incorrect
    ones ignored."""
    _, has_c, _ = _exists(N)
    return np.where(has_c, 1.0, 0.0), np.zeros(N + 1)


def nsr_table(N: int, r_correct: float, r_incorrect: float) -> tuple[np.ndarray, np.ndarray]:
    """NSR, negative-sample reinforcement (Zhu et al. 2025): -1 for an incorrect rollout,
    correct ones ignored."""
    _, _, has_w = _exists(N)
    return np.zeros(N + 1), np.where(has_w, -1.0, 0.0)


def _rho(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimate 1 - C(n - c, k) / C(n, k) from c correct of n (k <= n)."""
    if k <= 0:
        return 0.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pkpo_table(
    N: int, r_correct: float, r_incorrect: float, k: int, estimator: str = "loo-1"
) -> tuple[np.ndarray, np.ndarray]:
    """PKPO for binary rewards (Walder and Karkhanis 2025, arXiv 2505.15201, section 2.2): rewards
    transformed so that sum_i s_i grad log p(y_i) is an unbiased estimate of grad pass@k.

    ``estimator = "plain"`` (their s_i):   correct k/N,   incorrect (k/N) rho(N - 1, X, k - 1),
    with rho(n, c, k) = 1 - C(n - c, k) / C(n, k) the unbiased pass@k estimate (their Eq. 3);
    ``estimator = "loo-1"`` (their s^(loo-1), the variant the paper recommends for its lower
    variance): each size-k subset's baseline is the best of its other k - 1 members, which for
    binary rewards leaves correct (k/N) C(N - X, k - 1) / C(N - 1, k - 1) and incorrect 0.
    No group normalization follows. Both are unbiased: with the toolkit's (1/N) surrogate the
    expected update is (1/N) grad pass@k, so c_k = 1/N and every other c_j = 0 (section 15)."""
    k = int(k)
    if k > N:
        fail("scheme pkpo:k", k, f"<= N = {N}")
    a_c = np.zeros(N + 1)
    a_w = np.zeros(N + 1)
    for x in range(N + 1):
        if estimator == "plain":
            if x > 0:
                a_c[x] = k / N
            if x < N:
                a_w[x] = k / N * _rho(N - 1, x, k - 1)
        elif x > 0:  # loo-1: incorrect rollouts get exactly 0
            a_c[x] = k / N * math.comb(N - x, k - 1) / math.comb(N - 1, k - 1)
    return a_c, a_w
