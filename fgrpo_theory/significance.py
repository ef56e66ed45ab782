"""Significance of a pass@k difference by paired m-out-of-n subsampling (appendix Q).

theory.md section 14. Two models were evaluated on the same P problems: problem p has n_A[p]
generations of model A with c_A[p] correct, and n_B[p], c_B[p] for model B (the paper: n = 1024).
One iteration draws m of the generations per problem and model without replacement (the paper:
m = 256), recomputes both models' pass@k on the subsample with the unbiased estimator and records
the difference of the means over problems. Given c correct of n, the number correct in a
subsample of m is hypergeometric, so an iteration costs one hypergeometric draw per problem and
model: drawn by inversion of the exact hypergeometric CDF from uniforms of NumPy's Generator,
vectorised over iterations (one searchsorted per problem and model), then one table look-up of
pass@k per draw. "Paired": every iteration uses the same problems for both models.

Two intervals are reported per k:

- ``paper_ci_low`` / ``paper_ci_high``: the central 1 - alpha interval of the subsample
  differences, as the paper reads it. Subsamples of m < n vary more than the full-sample
  estimate (for pass@1 by a factor sqrt((n - m)/m) in standard deviation, sqrt(3) at
  n = 1024, m = 256), so this interval is conservative.
- ``ci_low`` / ``ci_high`` (the default reading, and ``p_value``): the m-out-of-n interval of
  Politis, Romano and Wolf, centred at the full-sample difference D_n and rescaled by the
  finite-population rate, D_n + s (q - mean D*) with s = sqrt(m / (n - m)) (n the mean number of
  generations), which has the nominal coverage for smooth statistics (pass@k with k << m; checked
  by Monte Carlo in the tests at k = 1 and 4). ``p_value`` is the smallest alpha at which that
  interval excludes 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._validate import check_int_array, check_scalar, check_seed, fail
from .passk import pass_at_k

__all__ = ["compare_passk", "MAX_DRAWS", "MAX_STORED", "MAX_TABLE"]

#: Largest number of hypergeometric draws (2 * iterations * problems) one call may make.
MAX_DRAWS = 2_000_000_000
#: Largest len(k) * iterations (the stored subsample differences, 8 bytes each, twice).
MAX_STORED = 20_000_000
#: Largest number of floats held in hypergeometric CDF tables (one of m per distinct (n, c)).
MAX_TABLE = 200_000_000


#: Largest n whose hypergeometric pmf comes from SciPy (whose cost grows linearly with n: 30 s at
#: n = 1e10, hours near 2**53); above it, :func:`_hypergeom_pmf_ratios` costs O(m) for any n.
_SCIPY_MAX_N = 1_000_000


def _hypergeom_pmf_ratios(n: int, c: int, m: int) -> np.ndarray:
    """pmf(j), j = 0..m, of the hypergeometric (n, c, m) from the ratios of neighbours,
    ``pmf(j+1) / pmf(j) = (c-j)(m-j) / ((j+1)(n-c-m+j+1))``, summed in logs over the support
    ``max(0, m-(n-c)) <= j <= min(c, m)`` and normalised: O(m) work for any n (each ratio is
    exact to an ulp, so the pmf is accurate to about m ulps)."""
    lo, hi = max(0, m - (n - c)), min(c, m)
    j = np.arange(lo, hi, dtype=np.float64)
    steps = np.log(c - j) + np.log(m - j) - np.log(j + 1) - np.log(float(n - c - m) + j + 1)
    logw = np.concatenate(([0.0], np.cumsum(steps)))
    w = np.exp(logw - logw.max())
    pmf = np.zeros(m + 1)
    pmf[lo : hi + 1] = w / w.sum()
    return pmf


def _hypergeom_cdf(n: int, c: int, m: int) -> np.ndarray:
    """CDF of the number of correct generations in a subsample of m from n with c correct.

    Indexed j = 0..m-1 (the last value, 1, is implied), so that a uniform u in [0, 1) maps to
    the draw j = searchsorted(cdf, u, "right") (inversion, exact up to the pmf's rounding).
    """
    if n <= _SCIPY_MAX_N:
        from scipy.stats import hypergeom

        pmf = hypergeom.pmf(np.arange(m + 1), n, c, m)
    else:
        pmf = _hypergeom_pmf_ratios(n, c, m)
    cdf = np.cumsum(pmf)
    return cdf[:-1] / cdf[-1]


def _pass_table(m: int, k: int) -> np.ndarray:
    """pass@k of a subsample of m generations with j correct, for j = 0..m."""
    return np.asarray(pass_at_k(m, np.arange(m + 1), k), dtype=float)


def compare_passk(
    n_a: Any,
    c_a: Any,
    n_b: Any,
    c_b: Any,
    k: Any,
    *,
    m: int = 256,
    iterations: int = 50_000,
    alpha: float = 0.05,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Paired m-out-of-n subsampling test of mean pass@k of model B minus model A, per k.

    The paper's appendix-Q test (docs/theory.md section 14), described in the module docstring.

    Parameters
    ----------
    n_a, c_a : array_like of int, shape (P,)
        Generations and correct generations of model A per problem, 0 <= c_a <= n_a.
    n_b, c_b : array_like of int, shape (P,)
        The same for model B, on the same problems in the same order.
    k : int or array_like of int
        Attempt budgets, 1 <= k <= m.
    m : int
        Subsample size, 1 <= m <= min(n_a, n_b) and m < mean n (default 256, the paper's).
    iterations : int
        Subsampling iterations, >= 100 (default 50,000).
    alpha : float
        Level of the intervals, in (0, 1) (default 0.05: central 95 %).
    seed : int
        Seed of ``numpy.random.default_rng``; the same seed gives bit-identical results.

    Returns
    -------
    dict of numpy.ndarray, one entry per k
        ``k``; ``pass_a``, ``pass_b`` (mean unbiased pass@k over problems from all n
        generations); ``difference`` (pass_b - pass_a); ``ci_low``, ``ci_high`` (rescaled
        m-out-of-n interval), ``p_value``; ``paper_ci_low``, ``paper_ci_high`` (raw percentile
        interval of the subsample differences); ``subsample_sd`` (their standard deviation);
        ``significant`` (``p_value <= alpha``: derived from the reported p-value, so the two never
        disagree; with few iterations the +1 correction of the p-value can leave an interval
        that just excludes 0 not significant).

    Raises
    ------
    ValueError
        Arrays of different lengths or empty, counts out of range, k > m, m > some n, or more
        than :data:`MAX_DRAWS` draws.
    """
    na = check_int_array("n_a", n_a, lo=1).ravel()
    ca = check_int_array("c_a", c_a, lo=0).ravel()
    nb = check_int_array("n_b", n_b, lo=1).ravel()
    cb = check_int_array("c_b", c_b, lo=0).ravel()
    P = na.size
    for name, arr in (("c_a", ca), ("n_b", nb), ("c_b", cb)):
        if arr.size != P:
            fail(name, f"length {arr.size}", f"of the length of n_a ({P})")
    for cname, c, n in (("c_a", ca, na), ("c_b", cb, nb)):
        if (c > n).any():
            i = int(np.argmax(c > n))
            fail(cname, int(c[i]), f"<= n = {int(n[i])} (problem {i})")
    m = int(check_int_array("m", m, lo=1))
    n_min = int(min(na.min(), nb.min()))
    if m > n_min:
        fail("m", m, f"<= the smallest number of generations ({n_min})")
    n_mean = float(np.concatenate([na, nb]).mean())
    if not m < n_mean:
        fail("m", m, f"< the mean number of generations ({n_mean:g}) for a subsample")
    ks = check_int_array("k", k, lo=1).ravel()
    if (ks > m).any():
        fail("k", int(ks[ks > m][0]), f"<= m = {m}")
    iters = int(check_int_array("iterations", iterations, lo=100))
    if 2 * iters * P > MAX_DRAWS:
        fail("iterations", iters, f"such that 2 * iterations * problems <= {MAX_DRAWS:.0e}")
    if ks.size * iters > MAX_STORED:
        fail("k", f"{ks.size} values", f"at most {MAX_STORED} / iterations values (memory)")
    alpha = check_scalar("alpha", alpha, lo=0, hi=1, lo_open=True, hi_open=True)
    seed = int(check_int_array("seed", seed, lo=0))
    n_tables = np.unique(np.stack([np.concatenate([na, nb]), np.concatenate([ca, cb])]), axis=1)
    if (n_tables.shape[1] + ks.size) * (m + 1) > MAX_TABLE:
        fail("m", m, f"such that (distinct (n, c) pairs + len(k)) * (m + 1) <= {MAX_TABLE:.0e}")

    rng = np.random.default_rng(check_seed(seed))
    tables = np.stack([_pass_table(m, int(kk)) for kk in ks])  # (len(k), m + 1)
    sums = np.zeros((2, ks.size, iters))
    cdfs: dict[tuple[int, int], np.ndarray] = {}
    for p in range(P):
        for side, (n, c) in enumerate(((na[p], ca[p]), (nb[p], cb[p]))):
            key = (int(n), int(c))
            if key not in cdfs:
                cdfs[key] = _hypergeom_cdf(key[0], key[1], m)
            j = np.searchsorted(cdfs[key], rng.random(iters), side="right")
            sums[side] += tables[:, j]
    diffs = (sums[1] - sums[0]) / P

    full_a = np.array([np.mean(pass_at_k(na, ca, int(kk))) for kk in ks])
    full_b = np.array([np.mean(pass_at_k(nb, cb, int(kk))) for kk in ks])
    d_n = full_b - full_a
    s = np.sqrt(m / (n_mean - m))
    centre = diffs.mean(axis=1)
    q_lo, q_hi = np.quantile(diffs, [alpha / 2, 1 - alpha / 2], axis=1)
    ci_low = d_n + s * (q_lo - centre)
    ci_high = d_n + s * (q_hi - centre)
    # p-value: the smallest alpha whose rescaled interval excludes 0 (with the +1 correction).
    resc = d_n[:, None] + s * (diffs - centre[:, None])
    below = (np.sum(resc <= 0, axis=1) + 1) / (iters + 1)
    above = (np.sum(resc >= 0, axis=1) + 1) / (iters + 1)
    p_value = np.minimum(1.0, 2 * np.minimum(below, above))
    return {
        "k": ks,
        "pass_a": full_a,
        "pass_b": full_b,
        "difference": d_n,
        "ci_low": ci_low,
        "ci_high": ci_high,
        "p_value": p_value,
        "paper_ci_low": q_lo,
        "paper_ci_high": q_hi,
        "subsample_sd": diffs.std(axis=1, ddof=1),
        "significant": p_value <= alpha,
    }
