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

import numpy as np
from scipy.optimize import minimize
from scipy.special import betaln, digamma, gammaln, polygamma, roots_jacobi
from scipy.stats import binom

from .._validate import fail

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


def _counts(n: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique (n, x) pairs and their multiplicities (the likelihood depends on nothing else)."""
    pairs, counts = np.unique(np.stack([n, x], axis=1), axis=0, return_counts=True)
    return pairs[:, 0].astype(float), pairs[:, 1].astype(float), counts.astype(float)


def _check_spread(n: np.ndarray, x: np.ndarray, prompts: np.ndarray | None) -> None:
    if prompts is not None and np.unique(prompts).size < 2:
        fail("LOG", "a single prompt", "at least 2 prompts: the spread of mu cannot be fitted")
    if n.size < 2:
        fail("LOG", f"{n.size} group", "at least 2 groups: the spread of mu cannot be fitted")


def beta_binomial_loglik(a: float, b: float, n: np.ndarray, x: np.ndarray, w: np.ndarray) -> float:
    """Sum of w * log Pr(X = x | n, a, b) under the beta-binomial."""
    logc = gammaln(n + 1) - gammaln(x + 1) - gammaln(n - x + 1)
    return float(np.sum(w * (logc + betaln(x + a, n - x + b) - betaln(a, b))))


def fit_beta_binomial(n: np.ndarray, x: np.ndarray, prompts: np.ndarray | None = None) -> BetaFit:
    """Beta-binomial maximum likelihood of (a, b) from groups (n_i, x_i).

    Optimised over (ln a, ln b) by L-BFGS-B from the method-of-moments start, a and b kept in
    [1e-4, 1e6]. All groups all-correct or all-wrong give an unbounded likelihood: refused.
    """
    _check_spread(n, x, prompts)
    nn, xx, w = _counts(np.asarray(n), np.asarray(x))
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
    _check_spread(n, x, prompts)
    nn, xx, cnt = _counts(np.asarray(n), np.asarray(x))
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
        mix = lik @ w
        ll = float(np.sum(cnt * np.log(mix)))
        w = w * ((cnt / mix) @ lik) / total
        if ll - prev < tol * max(1.0, abs(ll)):
            break
        prev = ll
    w = w / w.sum()
    ll = float(np.sum(cnt * np.log(lik @ w)))
    return MixtureFit(mu, w, ll, it)


def beta_atoms(a: float, b: float, nodes: int = QUAD_NODES) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Jacobi atoms and weights representing Beta(a, b) on [0, 1].

    With t in [-1, 1] and weight (1 - t)^(b-1) (1 + t)^(a-1), mu = (1 + t)/2; exact for
    polynomials of degree < 2 * nodes, so E[mu^N] and E[(1-mu)^N] are exact for N < 400.
    """
    t, wt = roots_jacobi(nodes, b - 1.0, a - 1.0)
    return (1.0 + t) / 2.0, wt / wt.sum()


def beta_active_fraction(a: float, b: float, n: np.ndarray) -> np.ndarray:
    """Pr(0 < X < n) = 1 - B(a + n, b)/B(a, b) - B(a, b + n)/B(a, b) (theory.md section 13)."""
    n = np.asarray(n, dtype=float)
    return 1.0 - np.exp(betaln(a + n, b) - betaln(a, b)) - np.exp(betaln(a, b + n) - betaln(a, b))
