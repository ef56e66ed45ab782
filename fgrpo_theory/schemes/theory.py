"""What a binary group scheme does in expectation (docs/theory.md section 15).

A binary group scheme gives a rollout of a group with X correct of N the advantage a_c(X) if it
is correct and a_w(X) if not (:meth:`fgrpo_theory.schemes.Scheme.tables`). With the (1/N)
log-prob surrogate and rollouts i.i.d. from the policy, the expected update is H(mu; N) grad mu
for ANY differentiable parametrization, with Y ~ Binomial(N - 1, mu)::

    H(mu; N) = E[a_c(1 + Y)] - E[a_w(Y)]            (difficulty_profile)
    F(mu)    = int_0^mu H,  F(0) = 0                  (implied_objective)
    H(mu)    = sum_{k=1..N} c_k k (1 - mu)^(k - 1)   (passk_weights; F = sum_k c_k pass@k)

and :func:`scheme_lr_multiplier` matches a scheme's mean step size to a reference's under a
difficulty distribution (the focal multiplier of sections 6 and 13, for any scheme). Every
function broadcasts over ``mu`` like ``scipy.stats`` and refuses what it cannot compute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .._validate import check_array, check_integer, check_scalar, fail
from .base import Scheme, parse_scheme

__all__ = [
    "Beta",
    "difficulty_profile",
    "implied_objective",
    "passk_weights",
    "passk_error_bound",
    "scheme_lr_multiplier",
    "MAX_PROFILE_N",
    "MAX_PROFILE_TERMS",
    "MAX_PASSK_N",
    "PASSK_RTOL",
    "TABLE_ULPS",
]

#: Largest group size the profile functions accept (binomial sums stay exact in float64 far
#: beyond; this bounds the table and the work).
MAX_PROFILE_N = 1_000_000
#: Largest number of (mu, y) terms one call sums (mu.size * N).
MAX_PROFILE_TERMS = 50_000_000
#: Largest N :func:`passk_weights` expands (exact rational arithmetic is O(N^2) big integers).
MAX_PASSK_N = 200
#: Relative accuracy :func:`passk_weights` guarantees: it refuses an N whose error bound
#: (:func:`passk_error_bound`) exceeds PASSK_RTOL * max_k |c_k|.
PASSK_RTOL = 1e-6
#: Relative error assumed for each float64 table entry (the tables take a few correctly rounded
#: operations: a square root, a division, a power; 16 ulp covers them with room).
TABLE_ULPS = 16 * 2.0**-53


@dataclass(frozen=True)
class Beta:
    """A Beta(a, b) distribution of per-prompt pass rates (a difficulty distribution).

    ``Beta(1, 1)`` is the uniform distribution of appendix N's m_gamma.
    """

    a: float = 1.0
    b: float = 1.0

    def __post_init__(self) -> None:
        check_scalar("difficulty Beta a", self.a, lo=0, lo_open=True)
        check_scalar("difficulty Beta b", self.b, lo=0, lo_open=True)


def _scheme(scheme: str | Scheme) -> Scheme:
    return parse_scheme(scheme)


def _increments(
    scheme: str | Scheme, N: Any, r_correct: Any, r_incorrect: Any
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """``N`` and the tables (a_c, a_w) with d_y = a_c(y + 1) - a_w(y), y = 0..N-1."""
    s = _scheme(scheme)
    n = check_integer("N", N, 1, MAX_PROFILE_N)
    a_c, a_w = s.tables(n, r_correct, r_incorrect)
    return n, a_c, a_w, a_c[1:] - a_w[:-1]


def _mu(mu: Any, n_terms: int) -> np.ndarray:
    m = check_array("mu", mu, lo=0, hi=1)
    if m.size * n_terms > MAX_PROFILE_TERMS:
        fail("mu", f"{m.size} values", f"at most {MAX_PROFILE_TERMS // n_terms} values at this N")
    return m


def _out(arr: np.ndarray) -> np.ndarray | float:
    return float(arr) if arr.ndim == 0 else arr


def difficulty_profile(
    scheme: str | Scheme,
    N: int,
    mu: Any,
    r_correct: float = 1.0,
    r_incorrect: float = 0.0,
) -> np.ndarray | float:
    """Difficulty profile H(mu; N) of a binary group scheme: the expected update of the (1/N)
    log-prob surrogate is H(mu; N) grad mu (docs/theory.md section 15).

        H(mu; N) = E[a_c(1 + Y)] - E[a_w(Y)],   Y ~ Binomial(N - 1, mu),

    an exact binomial sum over y = 0..N-1 with ``scipy.stats.binom.pmf`` weights (computed in log
    space, so the sum is accurate to a few ulp of sum_y pmf(y) |d_y| for N up to 1e6).
    For GRPO with focal weight it is h / (mu (1 - mu)) of section 6.

    Parameters
    ----------
    scheme : str or Scheme
        A scheme spec with per-X tables (``"grpo"``, ``"maxrl"``, ``"trl+focal:gamma=1"``, ...).
    N : int
        Group size, 1 <= N <= 1e6; mu.size * N <= 5e7.
    mu : float or array_like
        Success probabilities in [0, 1]; the result has mu's shape.
    r_correct, r_incorrect : float
        Rewards of a correct and an incorrect rollout (they matter for schemes that do not
        normalize, e.g. Dr.GRPO).

    Returns
    -------
    float or numpy.ndarray
    """
    n, _, _, d = _increments(scheme, N, r_correct, r_incorrect)
    m = _mu(mu, n)
    y = np.arange(n)
    from scipy.stats import binom  # on use: importing scipy.stats costs 0.5-2 s

    pmf = binom.pmf(y, n - 1, m.reshape(m.shape + (1,)))
    return _out((pmf * d).sum(axis=-1))


def implied_objective(
    scheme: str | Scheme,
    N: int,
    mu: Any,
    r_correct: float = 1.0,
    r_incorrect: float = 0.0,
) -> np.ndarray | float:
    """Implied objective F(mu) with F' = H (:func:`difficulty_profile`) and F(0) = 0: in
    expectation the scheme ascends sum over prompts of F(mu_p) (docs/theory.md section 15).

    Exact: H is a Bernstein polynomial sum_y d_y C(N-1, y) mu^y (1-mu)^(N-1-y), and each basis
    term integrates to (1/N) Pr(Binomial(N, mu) >= y + 1), so

        F(mu) = (1/N) sum_{y=0..N-1} d_y Pr(Binomial(N, mu) > y),

    with ``scipy.stats.binom.sf`` (the regularized incomplete beta); no quadrature and no
    change to the ill-conditioned pass@k basis. Same parameters as :func:`difficulty_profile`.
    """
    n, _, _, d = _increments(scheme, N, r_correct, r_incorrect)
    m = _mu(mu, n)
    y = np.arange(n)
    from scipy.stats import binom  # on use: importing scipy.stats costs 0.5-2 s

    tail = binom.sf(y, n, m.reshape(m.shape + (1,)))
    return _out((tail * d).sum(axis=-1) / n)


def _magnitudes(a_c: np.ndarray, a_w: np.ndarray, n: int) -> np.ndarray:
    """(1/k) sum of |terms| of each c_k when every table entry moves by its own magnitude:
    sum_y (|a_c(y+1)| + |a_w(y)|) C(N-1, y) C(y, i) over the terms with N-1-y+i = k-1 (sums of
    positive numbers: float64 is accurate here to N ulp)."""
    mag = np.zeros(n)
    size = np.abs(a_c[1:]) + np.abs(a_w[:-1])
    for y in range(n):
        if size[y] == 0:
            continue
        i = np.arange(y + 1)
        w = np.array([float(math.comb(n - 1, y) * math.comb(y, int(j))) for j in i])
        mag[n - 1 - y + i] += size[y] * w
    return mag / np.arange(1, n + 1)


def _expand(a_c: np.ndarray, a_w: np.ndarray, n: int) -> list[Fraction]:
    """c_1..c_N of the float64 tables taken as exact rationals. H(s), s = 1 - mu, is
    sum_y d_y C(N-1, y) (1 - s)^y s^(N-1-y); its coefficient of s^(k-1) is k c_k."""
    coef = [Fraction(0)] * n
    for y in range(n):
        d = Fraction(float(a_c[y + 1])) - Fraction(float(a_w[y]))
        if d == 0:
            continue
        b = math.comb(n - 1, y)
        for i in range(y + 1):
            w = b * math.comb(y, i)
            coef[n - 1 - y + i] += d * w if i % 2 == 0 else -d * w
    return [coef[k - 1] / k for k in range(1, n + 1)]


def passk_error_bound(
    scheme: str | Scheme, N: int, r_correct: float = 1.0, r_incorrect: float = 0.0
) -> np.ndarray:
    """Bound on the error of each pass@k weight c_k that the float64 tables' rounding causes
    (docs/theory.md section 15): TABLE_ULPS times (1/k) sum_y (|a_c(y+1)| + |a_w(y)|)
    C(N-1, y) C(y, i) over the terms of c_k. The change of basis multiplies the tables'
    relative error ~1e-16 by up to ~2^N binomial sums, which is why the weights of large N
    cannot be trusted whatever the arithmetic."""
    n, a_c, a_w, _ = _increments(scheme, N, r_correct, r_incorrect)
    if n > MAX_PASSK_N:
        fail("N", n, f"<= {MAX_PASSK_N} for pass@k weights")
    return _magnitudes(a_c, a_w, n) * TABLE_ULPS


def passk_weights(
    scheme: str | Scheme, N: int, r_correct: float = 1.0, r_incorrect: float = 0.0
) -> np.ndarray:
    """Pass@k weights c_1..c_N of a binary group scheme: H(mu) = sum_k c_k k (1 - mu)^(k-1),
    so in expectation the scheme maximizes sum_k c_k pass@k (docs/theory.md section 15).

    H is a polynomial of degree <= N - 1, so the expansion is exact. It is computed in exact
    rational arithmetic on the float64 tables (each entry is a dyadic rational), so the only
    error left is the tables' own rounding, amplified by the ill-conditioned change of basis.
    :func:`passk_error_bound` bounds that amplification; N is refused when the bound exceeds
    PASSK_RTOL (1e-6) times max_k |c_k|. The bound is a worst case over every rounding of every
    entry; measured against tables computed in 80-digit mpmath (tests/test_scheme_theory.py),
    the actual relative error of GRPO is 2e-15 at N = 8, 5e-11 at N = 32 and 4e-5 at N = 64
    (float64 arithmetic instead of rationals: 4e-4 at N = 64), and focal gamma = 0.5 reaches
    1e-4 at N = 32. With rewards 1/0 the largest N accepted is 42 for GRPO, 32 for focal
    gamma = 1 and 23 for focal gamma = 0.5, MaxRL, RLOO, PSR and Dr.GRPO.

    Returns
    -------
    numpy.ndarray
        float64[N]: c_1..c_N, each the correctly rounded value of the exact expansion, or 0
        where that is within its error bound of 0.

    Raises
    ------
    ValueError
        ``N must be ...`` when the weights at this N cannot be trusted (or N > 200).
    """
    n, a_c, a_w, _ = _increments(scheme, N, r_correct, r_incorrect)
    if n > MAX_PASSK_N:
        fail("N", n, f"<= {MAX_PASSK_N} for pass@k weights")
    bound = _magnitudes(a_c, a_w, n) * TABLE_ULPS
    worst = float(bound.max())
    c = _expand(a_c, a_w, n)
    scale = float(max(abs(x) for x in c))
    if not worst <= PASSK_RTOL * scale:
        fail(
            "N",
            n,
            f"small enough for trustworthy pass@k weights of {_scheme(scheme).spec} (float64 "
            f"table rounding may reach relative error {worst / scale if scale else math.inf:.1e} "
            f"> {PASSK_RTOL:g})",
        )
    out = np.array([float(x) for x in c])
    # a weight within its error bound of 0 is 0 (MaxRL's c_N, PKPO's other k: exactly 0 in
    # exact arithmetic on exact tables, a few 1e-16 from the tables' rounding)
    out[np.abs(out) <= bound] = 0.0
    return out


def _difficulty_pmf(difficulty: Any, n: int) -> np.ndarray:
    """Pr(X = x), x = 0..N, for X ~ Binomial(N, mu) with mu from the difficulty distribution."""
    from scipy.stats import betabinom, binom  # on use: importing scipy.stats costs 0.5-2 s

    X = np.arange(n + 1)
    if isinstance(difficulty, Beta):
        return betabinom.pmf(X, n, difficulty.a, difficulty.b)
    m = check_array("difficulty", difficulty, lo=0, hi=1).ravel()
    if m.size * (n + 1) > MAX_PROFILE_TERMS:
        fail("difficulty", f"{m.size} pass rates", f"at most {MAX_PROFILE_TERMS // (n + 1)}")
    # explicit mean over prompts (BLAS's summation order depends on its thread count)
    return binom.pmf(X[None, :], n, m[:, None]).sum(axis=0) / m.size


def scheme_lr_multiplier(
    scheme: str | Scheme,
    N: int,
    difficulty: Any = Beta(1.0, 1.0),
    reference: str | Scheme = "grpo",
    r_correct: float = 1.0,
    r_incorrect: float = 0.0,
) -> float:
    """Learning-rate multiplier that matches a scheme's mean step size to a reference's
    (docs/theory.md sections 6, 13 and 15):

        m = E[|A|_scheme] / E[|A|_reference],  |A|(X) = (X |a_c(X)| + (N - X) |a_w(X)|) / N,

    X ~ Binomial(N, mu) with mu from ``difficulty``. The reference run at learning rate lr * m
    makes updates of the same mean size as the scheme at lr. For ``"grpo+focal:gamma=G"``
    against ``"grpo"`` this is :func:`fgrpo_theory.advantages.effective_lr_multiplier` (and
    under Beta(1, 1) with large N appendix N's m_gamma). For a scheme whose group advantages sum
    to zero (GRPO, focal, MaxRL, RLOO), E|A| = 2 mu (1 - mu) H(mu) at each mu, so m is also the
    ratio of mu (1 - mu)-weighted difficulty profiles.

    Parameters
    ----------
    scheme, reference : str or Scheme
        Binary group schemes with per-X tables.
    N : int
        Group size.
    difficulty : Beta or array_like
        ``Beta(a, b)`` (exact beta-binomial mixture; default Beta(1, 1) = uniform), or per-prompt
        pass rates in [0, 1] (equal weights).
    r_correct, r_incorrect : float
        Rewards of a correct and an incorrect rollout.

    Raises
    ------
    ValueError
        The reference takes no step under this difficulty (E|A| = 0), or a bad argument.
    """
    n = check_integer("N", N, 1, MAX_PROFILE_N)
    pmf = _difficulty_pmf(difficulty, n)
    X = np.arange(n + 1)

    def mean_abs(s: str | Scheme) -> float:
        a_c, a_w = _scheme(s).tables(n, r_correct, r_incorrect)
        return float((pmf * (X * np.abs(a_c) + (n - X) * np.abs(a_w))).sum() / n)

    den = mean_abs(reference)
    if not den > 0:
        fail("reference", _scheme(reference).spec, "a scheme with E|A| > 0 at this difficulty")
    return mean_abs(scheme) / den
