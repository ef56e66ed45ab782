"""pass@k: the exact value for a categorical policy and the unbiased estimator from n samples.

theory.md section 7. A policy that solves a prompt with probability mu solves it at least once in k
independent attempts with probability 1 - (1 - mu)^k. From n samples of which c are correct, the
unbiased estimator of pass@k is 1 - C(n - c, k) / C(n, k) (the probability that a random k-subset
of the n samples contains a correct one); the paper evaluates n = 1024 and reports pass@1 and
pass@256.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._validate import check_array, check_broadcastable, check_int_array, fail

__all__ = ["pass_at_k", "pass_at_k_exact"]


#: Largest number of log1p factors summed directly; beyond it mpmath's loggamma is used (O(1)).
_DIRECT_TERMS = 100_000
#: When c k / n exceeds this, C(n-c, k)/C(n, k) <= exp(-c k / n) < 2e-22 and pass@k rounds to 1.
_SATURATION = 50.0


def _log_miss_ratio(n: int, c: int, k: int) -> float:
    """log C(n-c, k) / C(n, k) for 0 < c, 0 < k, n - c >= k, in O(1) memory.

    C(n-c, k)/C(n, k) = prod_{i<k} (1 - c/(n-i)) = prod_{j<c} (1 - k/(n-j)) = C(n-k, c)/C(n, c);
    the shorter product has m = min(c, k) factors. Up to :data:`_DIRECT_TERMS` factors each is
    taken as log1p (1 ulp) and summed with fsum; beyond, the log-gamma difference
    lgamma(n-o+1) - lgamma(n-o-m+1) - lgamma(n+1) + lgamma(n-m+1) (o = max(c, k)) is evaluated
    by mpmath with enough digits that the cancellation of its ~1e17-sized terms costs nothing.
    Callers handle ``m * o / n > _SATURATION`` (the ratio is then below 2e-22) without calling.
    """
    m, other = (c, k) if c <= k else (k, c)
    if m <= _DIRECT_TERMS:
        denom = n - np.arange(m, dtype=float)
        return math.fsum(np.log1p(-other / denom).tolist())
    import mpmath

    with mpmath.workdps(60):
        lg = mpmath.loggamma
        value = lg(n - other + 1) - lg(n - other - m + 1) - lg(n + 1) + lg(n - m + 1)
        return float(value)


def pass_at_k(n: Any, c: Any, k: Any) -> np.ndarray | float:
    """Unbiased pass@k estimator 1 - C(n-c, k) / C(n, k) from n samples with c correct.

    docs/theory.md section 7.

    Computed as -expm1 of the log of C(n-c, k)/C(n, k) (a sum of min(c, k) log1p terms, or a
    high-precision log-gamma difference when there are more than 100,000), so it neither
    overflows nor loses relative accuracy when pass@k is tiny, and needs O(1) memory for any
    n <= 2**53. It is exactly 1 when n - c < k, exactly 0 when c = 0, and rounds to 1 when
    c k / n > 50 (the miss ratio is then below exp(-50)).

    Parameters
    ----------
    n : int or array_like of int
        Number of samples, >= 1.
    c : int or array_like of int
        Number of correct samples, 0 <= c <= n.
    k : int or array_like of int
        Attempt budget, 1 <= k <= n. ``n``, ``c`` and ``k`` broadcast together.

    Returns
    -------
    float or numpy.ndarray
        The estimate, in [0, 1].

    Examples
    --------
    >>> pass_at_k(4, 1, 2)  # 1 - C(3, 2)/C(4, 2) = 1 - 3/6
    0.5
    """
    n_arr = check_int_array("n", n, lo=1)
    c_arr = check_int_array("c", c, lo=0)
    k_arr = check_int_array("k", k, lo=1)
    nc_shape = check_broadcastable("c", c_arr.shape, "n", n_arr.shape)
    check_broadcastable("k", k_arr.shape, "n and c", nc_shape)
    n_arr, c_arr, k_arr = np.broadcast_arrays(n_arr, c_arr, k_arr)
    for name, arr in (("c", c_arr), ("k", k_arr)):
        bad = arr > n_arr
        if bad.any():
            fail(name, arr[bad].flat[0], f"<= n = {n_arr[bad].flat[0]}")
    out = np.zeros(n_arr.shape)
    out[n_arr - c_arr < k_arr] = 1.0
    todo = (c_arr > 0) & (n_arr - c_arr >= k_arr)
    if todo.any():
        triples = np.stack([n_arr[todo], c_arr[todo], k_arr[todo]], axis=1)
        uniq, inverse = np.unique(triples, axis=0, return_inverse=True)
        vals = np.array([_pass_from_triple(*map(int, t)) for t in uniq])
        out[todo] = vals[inverse.reshape(-1)]
    return float(out) if out.ndim == 0 else out


def _pass_from_triple(n: int, c: int, k: int) -> float:
    if c * k > _SATURATION * n:  # exact integer test: the miss ratio is < exp(-50)
        return 1.0
    return -math.expm1(_log_miss_ratio(n, c, k))


def pass_at_k_exact(mu: Any, k: Any) -> np.ndarray | float:
    """Exact pass@k = 1 - (1 - mu)^k at success probability mu (docs/theory.md section 7).

    Evaluated as -expm1(k log1p(-mu)), accurate to a few ulps even for mu = 1e-300; pass@1 is mu
    exactly.

    Parameters
    ----------
    mu : float or array_like
        Success probability in [0, 1].
    k : int or array_like of int
        Number of attempts, >= 1; broadcast against ``mu``.

    Returns
    -------
    float or numpy.ndarray
        pass@k in [0, 1].
    """
    m = check_array("mu", mu, lo=0, hi=1)
    kk = check_int_array("k", k, lo=1).astype(float)
    check_broadcastable("k", kk.shape, "mu", m.shape)
    with np.errstate(divide="ignore"):
        out = -np.expm1(kk * np.log1p(-m)) + 0.0
    out = np.where(kk == 1, m, out)  # pass@1 = mu exactly
    return float(out) if out.ndim == 0 else out
