"""Tail-miss probability of a rare correct mode in a group of N rollouts (paper section 3.1).

A group of N i.i.d. rollouts falls in three disjoint regions: the rare correct subset E (mass
``tau``), the rest of the correct set C \\ E (mass ``mu - tau``) and the incorrect outcomes (mass
``1 - mu``). With ``a = 1 - tau``, ``b = mu - tau`` and ``c = 1 - mu`` (so ``a = b + c``):

* active group, ``0 < X < N``: ``Pr(A_N) = 1 - mu^N - (1 - mu)^N``                       (P-7)
* tail miss, active and no rollout in E: ``Pr(B) = a^N - b^N - c^N``                (Lemma 3.1)
* at least one rollout in E: ``1 - (1 - tau)^N``;
* tail miss among active groups (dynamic sampling): ``Pr(B | A_N) = Pr(B) / Pr(A_N)``
  (docs/theory.md section 12).

"(P-n)" is equation n of arXiv 2602.06717 v2; docs/theory.md restates the science.

Numerics
--------
The direct formulas cancel catastrophically (``N tau`` tiny, ``mu`` near 1, ``N`` near 1) and
overflow/underflow in intermediate powers. Every probability here is computed from one kernel,
:func:`_mixed`, for ``g(u, N) = 1 - (1 - u)^N - u^N`` with ``0 < u <= 1/2``:

    g = -(1 - u) expm1((N - 1) log1p(-u)) - u expm1((N - 1) log u),

a sum of two NON-NEGATIVE terms for every real ``N >= 1`` (both ``expm1`` arguments are <= 0), so
it never cancels. Then ``Pr(A_N) = g(min(mu, 1 - mu), N)`` and
``Pr(B) = exp(N log1p(-tau)) * g(min(b, c) / a, N)``: factoring ``a^N`` out makes
``(b/a) + (c/a) = 1``. The result is accurate to a few units of ``1e-16 * (1 + |N log a|)`` in
relative terms; in practice within 1e-13 for ``tau >= 1e-12``, ``N <= 1e7``, ``mu <= 1 - 1e-12``
(checked against 50-digit mpmath references in the tests), and to 1e-300 absolute where the
result underflows.

Group size ``N`` may be any real number ``>= 1`` (the formulas are analytic in ``N``; the
continuous peak of :func:`peak_group_size` needs real ``N``); integer ``N`` is the physical case.
Inputs broadcast like ``scipy.stats``: Python floats out for scalar inputs, arrays otherwise, and a
pandas Series out (with its index, named like the CLI column) when a Series goes in and the
result has its shape.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ._validate import (
    check_array,
    check_broadcast_size,
    check_broadcastable,
    fail,
    format_value,
)

if TYPE_CHECKING:  # pandas is imported only if the caller passes a Series
    import pandas as pd

__all__ = [
    "active_probability",
    "hit_probability",
    "tail_miss_probability",
    "tail_miss_probability_given_active",
    "expected_missed_modes",
    "all_modes_missed_probability",
    "peak_group_size",
    "PeakResult",
]


# --------------------------------------------------------------------------------------------
# validation and output helpers
# --------------------------------------------------------------------------------------------


def _check_N(N: Any) -> np.ndarray:
    arr = check_array("N", N)
    if (arr < 1).any():
        fail("N", arr[arr < 1].flat[0], ">= 1 (a group size)")
    return arr


def _check_mu(mu: Any) -> np.ndarray:
    return check_array("mu", mu, lo=0, hi=1, lo_open=True, hi_open=True)


def _check_tau_below_mu(tau: Any, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Check ``0 < tau < mu`` elementwise; return ``tau`` and ``mu`` broadcast together."""
    tau = check_array("tau", tau, lo=0, lo_open=True)
    check_broadcastable("tau", tau.shape, "mu", mu.shape)
    tau_b, mu_b = np.broadcast_arrays(tau, mu)
    bad = tau_b >= mu_b
    if bad.any():
        i = np.flatnonzero(bad.ravel())[0]
        mu_i = format_value(mu_b.flat[i])
        fail(
            "tau", tau_b.flat[i], f"< mu (the rare subset lies inside the correct mass mu = {mu_i})"
        )
    return tau_b, mu_b


def _scalar_or_array(x: np.ndarray, *inputs: np.ndarray) -> float | np.ndarray:
    """Python float when every input was 0-d, the array otherwise."""
    if all(np.ndim(v) == 0 for v in inputs):
        return float(x)
    return x


def _series_index(**inputs: Any) -> Any:
    """The index shared by the pandas Series among ``inputs``, or None if none is a Series.

    pandas is looked up in ``sys.modules`` only: if it was never imported, no input can be a
    Series, and this module stays free of the pandas import.
    """
    pd_mod = sys.modules.get("pandas")
    if pd_mod is None:
        return None
    index, first = None, None
    for name, x in inputs.items():
        if isinstance(x, pd_mod.Series):
            if index is None:
                index, first = x.index, name
            elif not x.index.equals(index):
                fail(name, "a Series with another index", f"a Series with the index of {first}")
    return index


def _keep_index(out: Any, index: Any, name: str) -> Any:
    """Wrap a 1-d result in a Series with the callers' ``index`` (when it fits), else return it.

    A Series input keeps its index when the broadcast result has the Series' shape; when other
    inputs add dimensions (e.g. a column of N against a Series of mu) the result is an ndarray.
    """
    if index is None or np.ndim(out) != 1 or np.shape(out)[0] != len(index):
        return out
    import pandas as pd

    return pd.Series(out, index=index, name=name)


# --------------------------------------------------------------------------------------------
# kernel
# --------------------------------------------------------------------------------------------


def _mixed(u: np.ndarray, N: np.ndarray) -> np.ndarray:
    """``1 - (1 - u)^N - u^N`` for ``0 < u <= 1/2`` and real ``N >= 1``, without cancellation.

    Writes ``(1-u)^N = (1-u)(1 + E1)`` and ``u^N = u(1 + E2)`` with
    ``E1 = expm1((N-1) log1p(-u))`` and ``E2 = expm1((N-1) log u)``, both in ``[-1, 0]``, so the
    result ``-(1-u) E1 - u E2`` adds two non-negative numbers.
    """
    m = N - 1.0
    with np.errstate(under="ignore"):
        e1 = np.expm1(m * np.log1p(-u))
        e2 = np.expm1(m * np.log(u))
        return -(1.0 - u) * e1 - u * e2


# --------------------------------------------------------------------------------------------
# closed forms
# --------------------------------------------------------------------------------------------


def active_probability(N: ArrayLike, mu: ArrayLike) -> float | np.ndarray | pd.Series:
    """Probability that a group of ``N`` rollouts is active (mixed rewards), eq. (P-7).

    ``Pr(A_N) = Pr(0 < X < N) = 1 - mu^N - (1 - mu)^N`` with ``X ~ Binomial(N, mu)``; only active
    groups carry a non-zero GRPO advantage.

    Parameters
    ----------
    N : array_like
        Group size, real ``>= 1`` (integer in practice).
    mu : array_like
        Success probability ``pi(C)``, in ``(0, 1)``. Broadcast against ``N``.

    Returns
    -------
    float or ndarray
        ``Pr(A_N)`` in ``[0, 1)``; a Python float when both inputs are scalars.

    Examples
    --------
    >>> active_probability(2, 0.5)
    0.5
    """
    index = _series_index(N=N, mu=mu)
    N_arr, mu_arr = _check_N(N), _check_mu(mu)
    check_broadcastable("N", N_arr.shape, "mu", mu_arr.shape)
    u = np.minimum(mu_arr, 1.0 - mu_arr)  # exact: 1 - mu is exact for mu >= 1/2 (Sterbenz)
    return _keep_index(_scalar_or_array(_mixed(u, N_arr), N_arr, mu_arr), index, "p_active")


def hit_probability(N: ArrayLike, tau: ArrayLike) -> float | np.ndarray | pd.Series:
    """Probability that at least one of ``N`` rollouts lands in a subset of mass ``tau``.

    ``1 - (1 - tau)^N``, computed as ``-expm1(N log1p(-tau))`` (section 3.1).

    Parameters
    ----------
    N : array_like
        Group size, real ``>= 1``.
    tau : array_like
        Mass of the subset, in ``(0, 1)``. Broadcast against ``N``.

    Returns
    -------
    float or ndarray
        Hit probability; a Python float when both inputs are scalars.

    Examples
    --------
    >>> hit_probability(2, 0.5)
    0.75
    """
    index = _series_index(N=N, tau=tau)
    N_arr = _check_N(N)
    tau_arr = check_array("tau", tau, lo=0, hi=1, lo_open=True, hi_open=True)
    check_broadcastable("N", N_arr.shape, "tau", tau_arr.shape)
    with np.errstate(under="ignore"):
        p = -np.expm1(N_arr * np.log1p(-tau_arr))
    return _keep_index(_scalar_or_array(p, N_arr, tau_arr), index, "p_hit")


def _tail_miss(N: np.ndarray, mu: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Lemma 3.1 on validated, broadcastable arrays (see the module docstring)."""
    b = mu - tau
    c = 1.0 - mu
    lo = np.minimum(b, c)
    u = lo / (1.0 - tau)  # = min(b, c) / a, in (0, 1/2]
    u = np.minimum(u, 0.5)  # guard the rounding of b/a when b == c
    with np.errstate(under="ignore"):
        return np.exp(N * np.log1p(-tau)) * _mixed(u, N)


def tail_miss_probability(
    N: ArrayLike, mu: ArrayLike, tau: ArrayLike
) -> float | np.ndarray | pd.Series:
    """Probability that a group is active yet misses a rare correct subset (Lemma 3.1).

    ``Pr(B) = (1 - tau)^N - (mu - tau)^N - (1 - mu)^N``: no rollout falls in the subset E of
    mass ``tau`` (``(1 - tau)^N``), minus the two ways the group is then inactive (all in
    C \\ E, or all incorrect). ``Pr(B) = 0`` at ``N = 1`` and tends to 0 as ``N`` grows; see
    :func:`peak_group_size` for its maximum. Computed without cancellation (module docstring).

    Parameters
    ----------
    N : array_like
        Group size, real ``>= 1`` (integer in practice).
    mu : array_like
        Success probability ``pi(C)``, in ``(0, 1)``.
    tau : array_like
        Mass of the rare correct subset E, in ``(0, mu)``; ``rho = tau / mu``.
        ``N``, ``mu`` and ``tau`` broadcast together.

    Returns
    -------
    float or ndarray
        ``Pr(B)``, with ``0 <= Pr(B) <= Pr(A_N)``; a Python float when all inputs are scalars.

    Raises
    ------
    ValueError
        If ``N < 1``, ``mu`` is outside ``(0, 1)`` or ``tau`` outside ``(0, mu)``.

    Examples
    --------
    >>> round(tail_miss_probability(8, 0.3, 0.015), 6)
    0.828423
    """
    index = _series_index(N=N, mu=mu, tau=tau)
    N_arr, mu_arr = _check_N(N), _check_mu(mu)
    tau_b, mu_b = _check_tau_below_mu(tau, mu_arr)
    check_broadcastable("N", N_arr.shape, "mu and tau", tau_b.shape)
    p = _tail_miss(N_arr, mu_b, tau_b)
    return _keep_index(_scalar_or_array(p, N_arr, mu_arr, tau_b), index, "p_tail_miss")


def tail_miss_probability_given_active(
    N: ArrayLike, mu: ArrayLike, tau: ArrayLike
) -> float | np.ndarray | pd.Series:
    """Probability that an active group misses a rare correct subset, ``Pr(B | A_N)``.

    ``Pr(B | A_N) = Pr(B) / Pr(A_N)`` (docs/theory.md section 12): what a trainer that keeps only
    active groups (DAPO's dynamic sampling) sees. Unlike ``Pr(B)`` it falls monotonically in
    ``N`` (``mu = 0.3``, ``rho = 0.05``: 0.95 at ``N = 2``, 0.38 at ``N = 64``), because dynamic
    sampling removes the protection small groups get from being inactive. Computed as
    ``(1 - tau)^N g(min(b, c) / a, N) / g(min(mu, 1 - mu), N)`` with the cancellation-free kernel
    ``g(u, N) = 1 - (1 - u)^N - u^N`` of the module docstring, so it keeps full relative accuracy
    where both probabilities are tiny (``N`` near 1, ``mu`` near 0 or 1).

    Parameters
    ----------
    N : array_like
        Group size, real ``> 1`` (integer in practice).
    mu : array_like
        Success probability ``pi(C)``, in ``(0, 1)``.
    tau : array_like
        Mass of the rare correct subset E, in ``(0, mu)``. ``N``, ``mu`` and ``tau`` broadcast
        together.

    Returns
    -------
    float or ndarray or pandas.Series
        ``Pr(B | A_N)`` in ``[0, 1)``; a Python float when all inputs are scalars, a Series with
        the input's index when a pandas Series is passed.

    Raises
    ------
    ValueError
        If ``N <= 1``: at ``N = 1`` no group is active (``A_1`` is empty), so the conditional
        probability is undefined; 0 would be wrong (its limit as real ``N -> 1`` is a ratio of two
        entropies, not 0). Also as :func:`tail_miss_probability` for ``mu`` and ``tau``.

    Examples
    --------
    >>> round(tail_miss_probability_given_active(2, 0.3, 0.015), 6)  # 2 b c / (2 mu (1 - mu))
    0.95
    """
    index = _series_index(N=N, mu=mu, tau=tau)
    N_arr = check_array("N", N)
    if (N_arr <= 1).any():
        fail(
            "N",
            N_arr[N_arr <= 1].flat[0],
            "> 1 (no group of one is active, so Pr(B | A_N) is undefined at N = 1)",
        )
    mu_arr = _check_mu(mu)
    tau_b, mu_b = _check_tau_below_mu(tau, mu_arr)
    check_broadcastable("N", N_arr.shape, "mu and tau", tau_b.shape)
    u_active = np.minimum(mu_b, 1.0 - mu_b)
    with np.errstate(under="ignore"):
        p = _tail_miss(N_arr, mu_b, tau_b) / _mixed(u_active, N_arr)
    out = _scalar_or_array(p, N_arr, mu_arr, tau_b)
    return _keep_index(out, index, "p_tail_miss_given_active")


def _check_modes(
    N: Any, mu: Any, taus: Any, *, strict_sum: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    N_arr, mu_arr = _check_N(N), _check_mu(mu)
    t = check_array("taus", taus, lo=0, lo_open=True)
    if t.ndim == 0:
        fail("taus", t, "a 1-d array of mode masses (modes along the last axis)")
    total = t.sum(axis=-1)
    try:
        np.broadcast_shapes(N_arr.shape, mu_arr.shape, total.shape)
    except ValueError:
        fail("taus", f"shape {t.shape}", "broadcastable with N and mu over all but its last axis")
    # the per-mode terms of expected_missed_modes hold every mode of every broadcast (N, mu)
    last = t.shape[-1:] if not strict_sum else (1,)
    check_broadcast_size("taus", (*N_arr.shape, 1), (*mu_arr.shape, 1), (*total.shape, *last))
    total_b, mu_b = np.broadcast_arrays(total, mu_arr)
    bad = (total_b >= mu_b) if strict_sum else (total_b > mu_b)
    if bad.any():
        i = np.flatnonzero(bad.ravel())[0]
        rel = "<" if strict_sum else "<="
        fail(
            "sum(taus)",
            total_b.flat[i],
            f"{rel} mu = {format_value(mu_b.flat[i])} (disjoint modes inside the correct set)",
        )
    return N_arr, mu_arr, t


def expected_missed_modes(
    N: ArrayLike, mu: ArrayLike, taus: ArrayLike
) -> float | np.ndarray | pd.Series:
    """Expected number of rare modes missed by an active group (docs/theory.md section 2).

    With ``M`` disjoint rare correct modes of masses ``tau_m``, the number of modes an active group
    misses is ``sum_m 1[B_m]``, so its expectation is ``sum_m Pr(B for tau_m)`` (Lemma 3.1 per
    mode, summed over the last axis of ``taus``). The probability that an active group misses
    *all* modes is Lemma 3.1 with ``tau = sum_m tau_m``: :func:`all_modes_missed_probability`.

    Parameters
    ----------
    N : array_like
        Group size, real ``>= 1``.
    mu : array_like
        Success probability, in ``(0, 1)``.
    taus : array_like
        Mode masses, modes along the LAST axis (a 1-d array for one set of modes); each
        ``tau_m > 0`` and ``sum_m tau_m <= mu`` (modes are disjoint subsets of C). The leading axes
        broadcast against ``N`` and ``mu``.

    Returns
    -------
    float or ndarray
        Expected number of missed modes, in ``[0, M]``; a float when ``N``, ``mu`` are scalars
        and ``taus`` is 1-d.

    Examples
    --------
    >>> round(expected_missed_modes(8, 0.3, [0.01, 0.02]), 6)
    1.658124
    """
    index = _series_index(N=N, mu=mu)
    N_arr, mu_arr, t = _check_modes(N, mu, taus, strict_sum=False)
    p = _tail_miss(N_arr[..., None], mu_arr[..., None], t)
    out = _scalar_or_array(p.sum(axis=-1), N_arr, mu_arr, t[..., 0])
    return _keep_index(out, index, "expected_missed_modes")


def all_modes_missed_probability(
    N: ArrayLike, mu: ArrayLike, taus: ArrayLike
) -> float | np.ndarray | pd.Series:
    """Probability that an active group misses every one of several disjoint rare modes.

    The union of the modes is itself a correct subset of mass ``tau = sum_m tau_m``, so this is
    Lemma 3.1 (:func:`tail_miss_probability`) with the summed mass (docs/theory.md
    section 2).

    Parameters
    ----------
    N, mu, taus : array_like
        As in :func:`expected_missed_modes`, but with ``sum_m tau_m < mu`` strictly (Lemma 3.1
        needs correct mass outside the union of the modes).

    Returns
    -------
    float or ndarray
        ``Pr(active and no rollout in any mode)``.

    Examples
    --------
    >>> all_modes_missed_probability(8, 0.3, [0.01, 0.02]) == tail_miss_probability(8, 0.3, 0.03)
    True
    """
    index = _series_index(N=N, mu=mu)
    N_arr, mu_arr, t = _check_modes(N, mu, taus, strict_sum=True)
    total = t.sum(axis=-1)
    p = _tail_miss(N_arr, mu_arr, total)
    return _keep_index(_scalar_or_array(p, N_arr, mu_arr, total), index, "p_all_modes_missed")


# --------------------------------------------------------------------------------------------
# peak over N
# --------------------------------------------------------------------------------------------


class PeakResult(NamedTuple):
    """Maximum of ``Pr(B)`` over the group size (see :func:`peak_group_size`)."""

    #: Integer argmax N* of Pr(B) over N = 1, 2, ... (ties go to the smaller N).
    n_star: int | np.ndarray
    #: Root of d/dN Pr(B) = 0 over real N >= 1 (the continuous argmax).
    n_star_continuous: float | np.ndarray
    #: Pr(B) at the integer argmax.
    p_peak: float | np.ndarray


def _log1p_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``log1p(num / den)`` for negative ``num`` and ``den``, also when the ratio overflows (a
    subnormal ``tau`` makes ``den = log1p(-tau)`` subnormal): beyond 1e300 it is
    ``log(-num) - log(-den)`` (the dropped ``log1p(den / num)`` is below 1e-300)."""
    with np.errstate(over="ignore"):
        r = num / den
    big = ~(r < 1e300)
    return np.where(big, np.log(-num) - np.log(-den), np.log1p(np.where(big, 0.0, r)))


#: Bisection steps on log N; 200 halvings of an interval of width <= 750 reach float resolution.
_BISECT_STEPS = 200


def peak_group_size(mu: ArrayLike, tau: ArrayLike) -> PeakResult:
    """Group size that maximizes the tail-miss probability of Lemma 3.1 (no closed form).

    The paper gives no formula for the maximizer (docs/theory.md section 2). With
    ``a = 1 - tau``, ``hi = max(b, c)``, ``lo = min(b, c)`` (``b = mu - tau``, ``c = 1 - mu``),
    ``v = hi / a`` and ``u = lo / a`` (``u + v = 1``):

        d/dN Pr(B) = a^N k(N),   k(N) = ln a - v^N ln hi - u^N ln lo.

    All logarithms are negative, so ``k`` is strictly decreasing in ``N``
    (``k'(N) = -v^N ln v ln hi - u^N ln u ln lo < 0``), with ``k(1) > 0`` (an entropy-like sum:
    ``a k(1) = -hi ln(hi/a) - lo ln(lo/a)``) and ``k(inf) = ln a < 0``. Hence ``Pr(B)`` is
    unimodal over real ``N >= 1``: it rises up to the unique root ``N_c`` of ``k`` and falls after
    it, and the integer argmax is ``floor(N_c)`` or ``ceil(N_c)``.

    Root. Dividing ``k = 0`` by ``ln a`` and using ``ln hi = ln v + ln a``,
    ``ln lo = ln u + ln a``, the root solves the strictly decreasing, cancellation-free

        F(N) = log(v^N (1 + ln v / ln a) + u^N (1 + ln u / ln a)) = 0,

    written as ``logaddexp(N ln v + d_hi, N ln u + d_lo)`` with
    ``d = log1p(ln v / ln a) >= 0`` (a ratio of two negative logarithms, each accurate to an ulp:
    ``ln v = log1p(-u)``, ``ln a = log1p(-tau)``). The naive ``log|ln hi| - log|ln a|`` cancels
    catastrophically when ``tau`` is close to ``mu`` (``tau / mu = 1 - 1e-10`` lost five digits
    of ``N_c``). ``F`` is solved by vectorized bisection on ``log N`` (no overflow for
    ``tau = 1e-12`` and ``N_c`` of order ``1e12``), bracketed by ``N = 1`` and the ``N`` at which
    each of the two terms has dropped to ``1/2``.

    Integer argmax. Near a flat peak ``Pr(B)`` at ``floor(N_c)`` and ``ceil(N_c)`` can agree to
    all 16 digits, so they are compared through the exact log ratio of neighbours,
    ``log Pr(B)(n+1) - log Pr(B)(n) = ln a + log1p((u v^n + v u^n) / g(u, n))`` with
    ``g(u, n) = 1 - v^n - u^n`` (from ``g(u, n+1) - g(u, n) = u v^n + v u^n``); ``n_star`` is the
    smallest ``n`` at which this is ``<= 0`` (ties go to the smaller ``N``).

    Parameters
    ----------
    mu : array_like
        Success probability, in ``(0, 1)``.
    tau : array_like
        Rare mass, in ``(0, mu)``; broadcast against ``mu``.

    Returns
    -------
    PeakResult
        ``n_star`` (int / int64 array, always >= 2), ``n_star_continuous`` (float) and
        ``p_peak = Pr(B)`` at ``n_star``; Python scalars when both inputs are scalars, Series
        with the input's index when a pandas Series is passed.

    Raises
    ------
    ValueError
        On invalid ``mu`` or ``tau``, or if the peak lies beyond ``2**62`` (unrepresentable).

    Examples
    --------
    >>> r = peak_group_size(0.3, 0.015)
    >>> r.n_star, round(r.n_star_continuous, 4), round(r.p_peak, 6)
    (9, 9.2577, 0.832457)
    """
    index = _series_index(mu=mu, tau=tau)
    mu_arr = _check_mu(mu)
    tau_b, mu_b = _check_tau_below_mu(tau, mu_arr)
    b = mu_b - tau_b  # exact when tau is within a factor 2 of mu (Sterbenz)
    c = 1.0 - mu_b
    lo = np.minimum(b, c)
    ln_a = np.log1p(-tau_b)
    u = np.minimum(lo / (1.0 - tau_b), 0.5)
    ln_u = np.log(u)
    ln_v = np.log1p(-u)
    d_hi = _log1p_ratio(ln_v, ln_a)
    d_lo = _log1p_ratio(ln_u, ln_a)

    def F(n: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):  # n * ln_u beyond -1e308 is -inf: that term is 0
            return np.logaddexp(n * ln_v + d_hi, n * ln_u + d_lo)

    # Upper bracket: each term <= 1/2 there, so F <= 0. A tiny u (tau and mu below ~1e-289)
    # puts it beyond the largest float: the largest float then (the peak is refused below).
    log_half = -np.log(2.0)
    with np.errstate(over="ignore"):
        n_hi = np.maximum((log_half - d_hi) / ln_v, (log_half - d_lo) / ln_u)
    n_hi = np.minimum(np.maximum(n_hi, 2.0), np.finfo(float).max)
    t_lo = np.zeros_like(n_hi)
    t_hi = np.log(n_hi)
    for _ in range(_BISECT_STEPS):
        t_mid = 0.5 * (t_lo + t_hi)
        pos = F(np.exp(t_mid)) > 0
        t_lo = np.where(pos, t_mid, t_lo)
        t_hi = np.where(pos, t_hi, t_mid)
    n_cont = np.exp(0.5 * (t_lo + t_hi))
    n_cont = np.where(F(np.ones_like(n_cont)) <= 0, 1.0, n_cont)

    # Beyond 2**53 neighbouring integers are no longer distinct floats: the integer argmax
    # cannot be decided there, so it is refused rather than returned wrong.
    beyond = ~(n_cont < 2.0**53)
    if beyond.any():
        i = np.flatnonzero(beyond.ravel())[0]
        mu_i = format_value(mu_b.flat[i])
        fail(
            "tau",
            tau_b.flat[i],
            f"such that the peak group size is below 2**53 (mu = {mu_i}; trusted range)",
        )

    def rises(n: np.ndarray) -> np.ndarray:
        """Whether Pr(B)(n + 1) > Pr(B)(n), decided without cancellation (docstring)."""
        with np.errstate(under="ignore", divide="ignore"):
            step = u * np.exp(n * ln_v) + (1.0 - u) * np.exp(n * ln_u)
            return ln_a + np.log1p(step / _mixed(u, n)) > 0

    # Pr(B) is unimodal, so n_star is floor(N_c) or floor(N_c) + 1; the two corrective steps
    # below also absorb a bisection root that lands a hair on the wrong side of an integer.
    n = np.maximum(np.floor(n_cont), 1.0)
    n = np.where(rises(n), n + 1.0, n)
    n = np.where(rises(n), n + 1.0, n)
    down = (n > 2.0) & ~rises(np.maximum(n - 1.0, 1.0))
    n = np.where(down, n - 1.0, n)
    n_star = n.astype(np.int64)
    p_peak = _tail_miss(n, mu_b, tau_b)
    if np.ndim(mu_arr) == 0 and np.ndim(np.asarray(tau)) == 0:
        return PeakResult(int(n_star), float(n_cont), float(p_peak))
    return PeakResult(
        _keep_index(n_star, index, "n_star"),
        _keep_index(n_cont, index, "n_star_continuous"),
        _keep_index(p_peak, index, "p_peak"),
    )
