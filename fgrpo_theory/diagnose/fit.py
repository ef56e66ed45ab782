"""Fitting the distribution of per-group success probability with the binomial noise modelled.

theory.md section 13. A group of n rollouts of a prompt whose success probability is mu has
X | mu ~ Binomial(n, mu); the plug-in mu_hat = X/n overstates the spread of mu. Two fits:

- beta-binomial maximum likelihood: mu ~ Beta(a, b), so X is beta-binomial,
  log Pr(X = x) = log C(n, x) + ln B(x + a, n - x + b) - ln B(a, b);
- a nonparametric mixing distribution (NPMLE) on a fixed grid of mu in [0, 1], by EM
  (Laird 1978), for shapes a Beta cannot take (atoms at 0 or 1, several modes).

Both are represented for prediction as a discrete distribution (atoms, weights): the NPMLE
directly, the Beta by Gauss-Jacobi quadrature (exact for polynomials in mu of degree < 2 * 200).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import betaln, digamma, gammaln, polygamma
from scipy.stats import binom

from .._validate import check_int_array, fail

__all__ = [
    "BetaFit",
    "MixtureFit",
    "fit_beta_binomial",
    "fit_beta_counts",
    "fit_npmle",
    "beta_atoms",
    "beta_active_fraction",
]

#: Nodes of the Gauss-Jacobi rule that represents a fitted Beta.
QUAD_NODES = 200


@dataclass(frozen=True)
class BetaFit:
    """Beta(a, b) maximum-likelihood fit: parameters, log-likelihood, convergence."""

    a: float
    b: float
    loglik: float
    converged: bool


@dataclass(frozen=True)
class MixtureFit:
    """Discrete mixing distribution: atoms ``mu`` (grid), ``weights`` (sum 1), log-likelihood."""

    mu: np.ndarray
    weights: np.ndarray
    loglik: float
    iterations: int

    @property
    def support_size(self) -> int:
        """Atoms with weight > 1e-6 (the effective number of free locations)."""
        return int(np.sum(self.weights > 1e-6))


#: Largest number of distinct (n, x) pairs a fit accepts (the grid fit holds pairs x 201 floats).
MAX_PAIRS = 50_000


def check_groups(n: Any, x: Any) -> tuple[np.ndarray, np.ndarray]:
    """``n`` (group sizes >= 1) and ``x`` (correct counts, 0 <= x <= n) as int64 arrays."""
    n = check_int_array("n", n, lo=1, allow_empty=True).ravel()
    x = check_int_array("x", x, lo=0, allow_empty=True).ravel()
    if n.shape != x.shape:
        fail("x", f"{x.size} values", f"one count per group size ({n.size} values in n)")
    bad = x > n
    if bad.any():
        i = int(np.argmax(bad))
        fail("x", int(x[i]), f"<= n (group {i} has n = {int(n[i])})")
    return n, x


def group_pairs(
    n: np.ndarray, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (n, x) pairs, their multiplicities, and each group's pair index.

    The likelihoods depend on the groups through these pairs only; work is per pair, so memory
    is bounded by :data:`MAX_PAIRS`, never by the number of groups.
    """
    pairs, inv, counts = np.unique(
        np.stack([n, x], axis=1), axis=0, return_inverse=True, return_counts=True
    )
    if len(pairs) > MAX_PAIRS:
        fail("LOG", f"{len(pairs)} distinct (n, n_correct) pairs", f"at most {MAX_PAIRS}")
    return (pairs[:, 0].astype(float), pairs[:, 1].astype(float), counts.astype(float),
            inv.ravel())  # fmt: skip


def _counts(n: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique (n, x) pairs and their multiplicities (the likelihood depends on nothing else)."""
    return group_pairs(n, x)[:3]


def _check_spread(n: np.ndarray, x: np.ndarray, prompts: np.ndarray | None) -> None:
    if prompts is not None and np.unique(prompts).size < 2:
        fail("LOG", "a single prompt", "at least 2 prompts: the spread of mu cannot be fitted")
    if n.size < 2:
        fail("LOG", f"{n.size} group", "at least 2 groups: the spread of mu cannot be fitted")


def _check_ab(a: Any, b: Any) -> tuple[float, float]:
    """Beta parameters a, b: finite numbers > 0 (NaN is refused, never propagated)."""
    from .._validate import check_scalar

    return (
        check_scalar("a", a, lo=0, lo_open=True),
        check_scalar("b", b, lo=0, lo_open=True),
    )


def beta_binomial_loglik(a: float, b: float, n: np.ndarray, x: np.ndarray, w: np.ndarray) -> float:
    """Sum of w * log Pr(X = x | n, a, b) under the beta-binomial."""
    a, b = _check_ab(a, b)
    logc = gammaln(n + 1) - gammaln(x + 1) - gammaln(n - x + 1)
    return float(np.sum(w * (logc + betaln(x + a, n - x + b) - betaln(a, b))))


def fit_beta_binomial(n: np.ndarray, x: np.ndarray, prompts: np.ndarray | None = None) -> BetaFit:
    """Beta-binomial maximum likelihood of (a, b) from groups (n_i, x_i).

    Optimised over (ln a, ln b) by L-BFGS-B from the method-of-moments start, a and b kept in
    [1e-4, 1e6]. All groups all-correct or all-wrong give an unbounded likelihood: refused.
    """
    n, x = check_groups(n, x)
    _check_spread(n, x, prompts)
    nn, xx, w = _counts(n, x)
    frac = xx / nn
    if np.all(frac == 0) or np.all(frac == 1):
        fail(
            "LOG",
            "every group all-wrong" if frac[0] == 0 else "every group all-correct",
            "some groups with correct and some with wrong rollouts to fit a spread",
        )
    return fit_beta_counts(nn, xx, w)


def fit_beta_counts(
    nn: np.ndarray, xx: np.ndarray, w: np.ndarray, start: tuple[float, float] | None = None
) -> BetaFit:
    """:func:`fit_beta_binomial` on aggregated (n, x) pairs with multiplicities ``w``."""
    if start is None:
        frac = xx / nn
        m = np.average(frac, weights=w)
        v = max(np.average((frac - m) ** 2, weights=w), 1e-6)
        s = max(m * (1 - m) / v - 1, 0.1)
        t0 = np.log([max(m * s, 1e-3), max((1 - m) * s, 1e-3)])
    else:
        t0 = np.log(np.asarray(start, dtype=float))
    logc = gammaln(nn + 1) - gammaln(xx + 1) - gammaln(nn - xx + 1)
    const = float(np.sum(w * logc))
    W = float(w.sum())

    def ll(a: float, b: float) -> float:
        return const + float(np.sum(w * (betaln(xx + a, nn - xx + b) - betaln(a, b))))

    # Newton's method on (a, b) with the exact gradient and Hessian (digamma / trigamma), with
    # step halving to stay positive and ascending; L-BFGS-B on (ln a, ln b) as the fallback.
    a, b = np.exp(t0)
    cur = ll(a, b)
    converged = False
    for _ in range(200):
        s_ab = a + b
        g_a = float(np.sum(w * (digamma(xx + a) - digamma(nn + s_ab)))) - W * (
            digamma(a) - digamma(s_ab)
        )
        g_b = float(np.sum(w * (digamma(nn - xx + b) - digamma(nn + s_ab)))) - W * (
            digamma(b) - digamma(s_ab)
        )
        t_n = float(np.sum(w * polygamma(1, nn + s_ab)))
        h_aa = (
            float(np.sum(w * polygamma(1, xx + a)))
            - t_n
            - W * (polygamma(1, a) - polygamma(1, s_ab))
        )
        h_bb = (
            float(np.sum(w * polygamma(1, nn - xx + b)))
            - t_n
            - W * (polygamma(1, b) - polygamma(1, s_ab))
        )
        h_ab = -t_n + W * polygamma(1, s_ab)
        det = h_aa * h_bb - h_ab * h_ab
        if not (h_aa < 0 and det > 0):
            break  # not locally concave: leave it to the fallback
        da = -(h_bb * g_a - h_ab * g_b) / det
        db = -(-h_ab * g_a + h_aa * g_b) / det
        step = 1.0
        while step > 1e-8:
            na_, nb_ = a + step * da, b + step * db
            if na_ > 0 and nb_ > 0:
                new = ll(na_, nb_)
                if new >= cur - 1e-12 * abs(cur):
                    break
            step /= 2
        else:
            break
        a, b, cur = na_, nb_, new
        if abs(step * da) <= 1e-10 * a and abs(step * db) <= 1e-10 * b:
            converged = True
            break
    if converged and 1e-4 <= a <= 1e6 and 1e-4 <= b <= 1e6:
        return BetaFit(float(a), float(b), float(cur), True)

    def nll(t: np.ndarray) -> float:
        return -ll(*np.exp(t))

    bounds = [(np.log(1e-4), np.log(1e6))] * 2
    res = minimize(nll, t0, method="L-BFGS-B", bounds=bounds)
    a, b = np.exp(res.x)
    return BetaFit(float(a), float(b), float(-res.fun), bool(res.success))


def fit_npmle(
    n: np.ndarray,
    x: np.ndarray,
    prompts: np.ndarray | None = None,
    *,
    grid: int = 201,
    max_iter: int = 5000,
    tol: float = 1e-10,
) -> MixtureFit:
    """Nonparametric maximum-likelihood mixing distribution on a grid of mu (EM).

    The grid is ``grid`` points in [0, 1] (denser near 0 and 1: mu = sin^2(pi t / 2)), including
    0 and 1 exactly. EM updates w_j <- mean_i posterior(j | x_i) until the log-likelihood gains
    less than ``tol`` (relative) or ``max_iter`` iterations.
    """
    n, x = check_groups(n, x)
    _check_spread(n, x, prompts)
    nn, xx, cnt = _counts(n, x)
    t = np.linspace(0.0, 1.0, grid)
    mu = np.sin(np.pi * t / 2) ** 2
    mu[0], mu[-1] = 0.0, 1.0
    lik = binom.pmf(xx[:, None], nn[:, None], mu[None, :])  # (pairs, grid)
    w = np.full(grid, 1.0 / grid)
    total = cnt.sum()
    prev = -np.inf
    it = 0
    while it < max_iter:
        it += 1
        mix = (lik * w).sum(axis=1)  # not lik @ w: BLAS sums in a thread-dependent order
        ll = float(np.sum(cnt * np.log(mix)))
        w = w * ((cnt / mix)[:, None] * lik).sum(axis=0) / total
        if ll - prev < tol * max(1.0, abs(ll)):
            break
        prev = ll
    w = w / w.sum()
    ll = float(np.sum(cnt * np.log((lik * w).sum(axis=1))))
    return MixtureFit(mu, w, ll, it)


def beta_atoms(a: float, b: float, nodes: int = QUAD_NODES) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Jacobi atoms and weights representing Beta(a, b) on [0, 1].

    With t in [-1, 1] and weight (1 - t)^(b-1) (1 + t)^(a-1), mu = (1 + t)/2; exact for
    polynomials of degree < 2 * nodes, so E[mu^N] and E[(1-mu)^N] are exact for N < 400.
    Computed by Golub-Welsch: the eigenvalues of the symmetric tridiagonal Jacobi matrix of the
    monic Jacobi recurrence are the nodes, the squared first components of its eigenvectors the
    weights. This stays finite for a near point mass (a + b in the thousands, as the fit of a
    log whose prompts all have the same success rate gives), where the Newton-refined rule of
    ``scipy.special.roots_jacobi`` returns NaN once a + b exceeds about 3,000.
    """
    from scipy.linalg import eigh_tridiagonal

    a, b = _check_ab(a, b)
    if isinstance(nodes, bool) or not isinstance(nodes, int | np.integer) or not 1 <= nodes <= 2000:
        fail("nodes", nodes, "an integer in [1, 2000]")
    al, be = b - 1.0, a - 1.0  # the Jacobi exponents of (1 - t) and (1 + t)
    k = np.arange(nodes, dtype=float)
    s2 = 2.0 * k + al + be
    diag = np.empty(nodes)
    diag[0] = (be - al) / (al + be + 2.0)
    diag[1:] = (be * be - al * al) / (s2[1:] * (s2[1:] + 2.0))
    k1 = k[1:]
    s1 = s2[1:]
    off = np.empty(nodes - 1)
    if nodes > 1:  # b_1 with the factor (1 + al + be) cancelled (0/0 when al + be = -1)
        off[0] = 4.0 * (1.0 + al) * (1.0 + be) / ((2.0 + al + be) ** 2 * (3.0 + al + be))
        k2, q2 = k1[1:], s1[1:]
        off[1:] = (4.0 * k2 * (k2 + al) * (k2 + be) * (k2 + al + be)
                   / (q2 * q2 * (q2 + 1.0) * (q2 - 1.0)))  # fmt: skip
    t, vec = eigh_tridiagonal(diag, np.sqrt(off))
    w = vec[0] ** 2
    mu = np.clip((1.0 + t) / 2.0, 0.0, 1.0)
    return mu, w / w.sum()


def beta_active_fraction(a: float, b: float, n: np.ndarray) -> np.ndarray:
    """Pr(0 < X < n) = 1 - B(a + n, b)/B(a, b) - B(a, b + n)/B(a, b) (theory.md section 13)."""
    a, b = _check_ab(a, b)
    n = np.asarray(n, dtype=float)
    return 1.0 - np.exp(betaln(a + n, b) - betaln(a, b)) - np.exp(betaln(a, b + n) - betaln(a, b))
