"""Closed forms of binary groups: A+ / A-, the Fig. 4 magnitudes, and learning-rate multipliers.

These broadcast like ``scipy.stats`` (NumPy only): per-(X, N) tables for N = 131,072 cost O(1)
per entry. :func:`effective_lr_multiplier` is the population version of appendix N's m_gamma
(theory.md section 13).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validate import check_array, check_int_array, check_rewards, fail
from .conventions import AdvantageConvention, get_convention
from .group import _broadcast, _refuse_group_of_one, _zero_divisor, as_real_array, focal_weight

__all__ = [
    "binary_advantages",
    "weighted_magnitudes",
    "lr_multiplier",
    "effective_lr_multiplier",
    "MAX_GAMMA",
    "MAX_ENUMERATION",
]

#: Largest gamma :func:`lr_multiplier` accepts: beyond ~1e205 m_gamma underflows float64.
MAX_GAMMA = 1e200
#: Largest number of (mu, X) terms :func:`effective_lr_multiplier` sums (len(mu) * (N + 1)).
MAX_ENUMERATION = 50_000_000


def _out(arr: np.ndarray) -> np.ndarray | float:
    return float(arr) if arr.ndim == 0 else arr


def _mixed_binary(
    x: np.ndarray, y: np.ndarray, n: np.ndarray | None, conv: AdvantageConvention, d: float
) -> tuple[np.ndarray, np.ndarray]:
    """A+ and A- of a mixed binary group with success fraction x = X/N, y = 1 - x, 0 < x < 1.

    Centred rewards d y and -d x (times N/(N-1) for RLOO), population std d sqrt(x y) (times
    sqrt(N/(N-1)) for Bessel); ``n`` is only used by the RLOO and Bessel conventions.
    """
    loo = conv.baseline == "loo"
    bessel = conv.std == "bessel"
    factor = n / (n - 1.0) if (loo or bessel) else 1.0
    scale = factor if loo else 1.0
    num_pos, num_neg = d * y * scale, -d * x * scale
    if conv.std == "none":
        return num_pos, num_neg
    std = d * np.sqrt(x * y * factor) if bessel else d * np.sqrt(x * y)
    div = conv.divisor(np.asarray(std, dtype=float))
    return num_pos / div, num_neg / div


def binary_advantages(
    X: Any,
    N: Any,
    advantage: str | AdvantageConvention = "grpo",
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
    **overrides: Any,
) -> tuple[np.ndarray | float, np.ndarray | float]:
    """Advantage of a correct and of an incorrect rollout in a binary group, in closed form.

    A group of N rollouts with X correct (reward ``r_correct``) and N - X incorrect (reward
    ``r_incorrect``). With d = r_correct - r_incorrect and x = X/N the centred rewards are
    d (1 - x) and -d x, and the population std is d sqrt(x (1 - x)); so for the population
    convention with eps = 0 (theory.md section 3)

        A+ = sqrt((1 - x) / x),    A- = -sqrt(x / (1 - x)),

    Bessel divides by sqrt(N/(N-1)) more, ``eps``/``var_floor`` enter the divisor, RLOO
    multiplies the centred rewards by N/(N-1). These are the numbers :func:`group_advantages`
    gives the corresponding group (to rounding). A batch-scoped convention (``"trl-batch"``)
    depends on the other groups of the batch and has no per-group closed form: refused.

    Parameters
    ----------
    X : int or array_like of int
        Number of correct rollouts, 0 <= X <= N.
    N : int or array_like of int
        Group size, >= 1; broadcast against ``X``.
    advantage : str or AdvantageConvention
        Preset name or convention (default ``"grpo"``).
    r_correct, r_incorrect : float
        Rewards of a correct and an incorrect rollout (default 1.0, -1.0), ``r_correct >
        r_incorrect``.
    **overrides
        Fields of :class:`AdvantageConvention` to replace.

    Returns
    -------
    adv_correct, adv_incorrect : float or numpy.ndarray
        Advantages of a correct and of an incorrect rollout; 0 where the group has no such
        rollout (X = 0 for ``adv_correct``, X = N for ``adv_incorrect``).
    """
    conv = get_convention(advantage, **overrides)
    if conv.scale_scope == "batch":
        fail("advantage", conv.name, "group-scoped (a batch std has no per-group closed form)")
    x_arr = check_int_array("X", np.asarray(as_real_array("X", X)), lo=0)
    n_arr = check_int_array("N", np.asarray(as_real_array("N", N)), lo=1)
    rc, rw = check_rewards(r_correct, r_incorrect)
    _broadcast("X", x_arr, "N of shape", n_arr.shape)  # refused before any allocation
    x_arr, n_arr = np.broadcast_arrays(x_arr, n_arr)
    if (x_arr > n_arr).any():
        bad = x_arr > n_arr
        fail("X", x_arr[bad].flat[0], f"<= N = {n_arr[bad].flat[0]}")
    d = rc - rw
    xf = x_arr.astype(float)
    nf = n_arr.astype(float)
    pos = np.zeros(x_arr.shape)
    neg = np.zeros(x_arr.shape)

    one = n_arr == 1
    if one.any():
        if conv.group_of_one == "raise":
            _refuse_group_of_one(conv)
        if conv.group_of_one == "raw":
            div1 = conv.divisor(1.0)
            pos = np.where(one & (x_arr == 1), rc / div1, pos)
            neg = np.where(one & (x_arr == 0), rw / div1, neg)

    many = ~one
    mixed = many & (x_arr > 0) & (x_arr < n_arr)
    flat = many & ~mixed
    if flat.any() and conv.zero_variance == "formula" and conv.std != "none":
        if conv.divisor(0.0) == 0:
            _zero_divisor(conv)
    if mixed.any():
        n_m = np.where(mixed, nf, 2.0)  # placeholders keep the arithmetic finite elsewhere
        x_m = np.where(mixed, xf, 1.0)
        num_pos, num_neg = _mixed_binary(x_m / n_m, (n_m - x_m) / n_m, n_m, conv, d)
        pos = np.where(mixed, num_pos, pos)
        neg = np.where(mixed, num_neg, neg)
    return _out(pos), _out(neg)


def weighted_magnitudes(mu: Any, gamma: Any) -> tuple[np.ndarray | float, np.ndarray | float]:
    """Focal-weighted advantage magnitudes g(mu)|A+(mu)| and g(mu)|A-(mu)| (Fig. 4).

    docs/theory.md section 4.

    Population convention, eps = 0, evaluated at mu_hat = mu:
    g|A+| = (1 - mu)^gamma sqrt((1 - mu)/mu) and g|A-| = (1 - mu)^gamma sqrt(mu/(1 - mu)).

    Parameters
    ----------
    mu : float or array_like
        Success rate in (0, 1).
    gamma : float or array_like
        Focusing exponent >= 0, broadcast against ``mu``.

    Returns
    -------
    pos, neg : float or numpy.ndarray
        g|A+| and g|A-|.
    """
    m = check_array("mu", as_real_array("mu", mu), lo=0, hi=1, lo_open=True, hi_open=True)
    gm = as_real_array("gamma", gamma, lo=0)
    if not isinstance(gm, np.ndarray):
        gm = np.asarray(gm)
    _broadcast("gamma", gm, "mu of shape", m.shape)
    g = np.asarray(focal_weight(m, gm))
    pos, neg = _mixed_binary(m, 1.0 - m, None, get_convention("grpo"), 1.0)
    return _out(g * pos), _out(-g * neg)


# Stirling series of ln Gamma(z) - ((z - 1/2) ln z - z + ln(2 pi)/2): B_2k / (2k (2k-1) z^(2k-1)).
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360)


def _stirling_tail(z: np.ndarray) -> np.ndarray:
    zi = 1.0 / z
    zi2 = zi * zi
    acc = np.zeros_like(z)
    for c in reversed(_STIRLING):
        acc = acc * zi2 + c
    return acc * zi


def _log_gamma_ratio(x: np.ndarray, a: float) -> np.ndarray:
    """ln Gamma(x + a) - ln Gamma(x) for x >= 20 without cancellation (a = 3/2 here).

    (x+a-1/2) ln(x+a) - (x-1/2) ln x - a = a ln(x+a) + [(x-1/2) log1p(a/x) - a]; the bracket is
    O(1/x) and is summed from its series when a/x is small, so the absolute error of the result
    is a few ulp of a ln x.
    """
    t = a / x
    # (x - 1/2) log1p(t) - a = -t/2 + (x - 1/2) sum_{k>=2} (-1)^(k+1) t^k / k, since (x-1/2) t =
    # a - t/2; t <= 0.075 for x >= 20, so 24 terms reach 1e-27.
    series = np.zeros_like(x)
    for k in range(24, 1, -1):
        series = series + (-1.0) ** (k + 1) * t**k / k
    series = series * (x - 0.5)
    bracket = -0.5 * t + series
    return a * np.log(x + a) + bracket + _stirling_tail(x + a) - _stirling_tail(x)


def lr_multiplier(gamma: Any) -> np.ndarray | float:
    """Learning-rate multiplier m_gamma = B(3/2, gamma + 3/2) / B(3/2, 3/2) (appendix N).

    The mean absolute population-std advantage of a binary group at success rate mu is
    2 sqrt(mu (1 - mu)); focal weighting multiplies it by (1 - mu)^gamma. Averaged over
    mu ~ Uniform(0, 1) and divided by the vanilla average, this is m_gamma: the factor by which
    F-GRPO shrinks the average update (m_0.5 = 32 / (15 pi) ~ 0.679). Written as
    m_gamma = (4 / sqrt(pi)) Gamma(gamma + 3/2) / Gamma(gamma + 3): ln-gamma differences for
    gamma < 18.5, a cancellation-free Stirling difference beyond, so the relative error is below
    1e-13 up to gamma = 1e6 (and ~1e-13 far beyond); checked against mpmath with::

        import mpmath as mp; mp.mp.dps = 40
        ref = lambda g: mp.beta(1.5, g + 1.5) / mp.beta(1.5, 1.5)

    Parameters
    ----------
    gamma : float or array_like
        Focusing exponent, 0 <= gamma <= 1e200 (:data:`MAX_GAMMA`; beyond ~1e205 m_gamma is below
        the smallest float64 and cannot be returned as a positive number).

    Returns
    -------
    float or numpy.ndarray
        m_gamma in (0, 1]; exactly 1 at gamma = 0.
    """
    g = as_real_array("gamma", gamma)
    g = check_array("gamma", g, lo=0)
    if (g > MAX_GAMMA).any():
        fail(
            "gamma", g[g > MAX_GAMMA].flat[0], "<= 1e200 (beyond ~1e205 m_gamma underflows float64)"
        )
    x = g + 1.5
    small = x < 20.0
    xs = np.where(small, x, 20.0)
    xl = np.where(small, 20.0, x)
    from scipy.special import gammaln  # imported on use: scipy.special costs 0.2-0.6 s

    ln_small = gammaln(xs) - gammaln(xs + 1.5)
    ln_large = -_log_gamma_ratio(xl, 1.5)
    out = np.where(small, ln_small, ln_large)
    res = np.exp(out + math.log(4.0 / math.sqrt(math.pi)))
    res = np.where(g == 0, 1.0, res)
    return _out(res)


def effective_lr_multiplier(
    mu: Any,
    N: int,
    gamma: Any,
    *,
    advantage: str | AdvantageConvention = "grpo",
    weights: Any = None,
) -> np.ndarray | float:
    """Population learning-rate multiplier of focal weighting (theory.md section 13).

        m(gamma) = E[ g(X/N) |A|(X) ] / E[ |A|(X) ],   X ~ sum_j w_j Binomial(N, mu_j),

    g = (1 - X/N)^gamma (P-12) and |A|(X) = (X |A+| + (N - X) |A-|) / N the mean absolute
    advantage of a binary group with X correct under ``advantage``. Exact: the sum over
    X = 0..N. For a single mu and "grpo" it is h_gamma / h_0 of section 6; for mu ~ Uniform(0, 1)
    and large N it tends to appendix N's m_gamma (:func:`lr_multiplier`). The matched vanilla
    control of a focal run at learning rate lr uses lr * m(gamma).

    Parameters
    ----------
    mu : float or array_like
        Per-prompt success probabilities in [0, 1] (a population, or the atoms of a fitted
        mixing distribution).
    N : int
        Group size, 1 <= N; len(mu) * (N + 1) <= 5e7 (:data:`MAX_ENUMERATION`).
    gamma : float or array_like
        Focusing exponent(s) >= 0; the result has gamma's shape.
    advantage : str or AdvantageConvention
        Advantage convention (group-scoped; default ``"grpo"``). The reward pair cancels.
    weights : array_like, optional
        Non-negative weights of the mu values (normalised here); default equal.

    Returns
    -------
    float or numpy.ndarray
        m(gamma) in [0, 1]; 1 at gamma = 0.

    Raises
    ------
    ValueError
        Bad mu, N, gamma or weights; a population with no active group (E|A| = 0).
    """
    m = check_array("mu", as_real_array("mu", mu), lo=0, hi=1).ravel()
    if np.ndim(N) != 0:
        fail("N", N, "a single integer")
    n = int(check_int_array("N", as_real_array("N", N), lo=1))
    if m.size * (n + 1) > MAX_ENUMERATION:
        fail("N", n, f"such that len(mu) * (N + 1) <= {MAX_ENUMERATION} (got len(mu) = {m.size})")
    gm = check_array("gamma", as_real_array("gamma", gamma), lo=0)
    w = prompt_weights(weights, m.size)
    X = np.arange(n + 1)
    # Pr(X = x) of the mixture; explicit sums (BLAS's order depends on its thread count)
    from scipy.stats import binom  # imported on use: scipy.stats costs 0.5-2 s

    pmf = (w[:, None] * binom.pmf(X[None, :], n, m[:, None])).sum(axis=0)
    a_pos, a_neg = binary_advantages(X, n, advantage)
    mean_abs = (X * np.abs(a_pos) + (n - X) * np.abs(a_neg)) / n
    denom = float((pmf * mean_abs).sum())
    if not denom > 0:
        fail("mu", m[0] if m.size == 1 else "population", "giving some active group (E|A| > 0)")
    g = np.asarray(focal_weight(X / n, gm.reshape(gm.shape + (1,))))
    return _out((g * (pmf * mean_abs)).sum(axis=-1) / denom)


def prompt_weights(weights: Any, n: int) -> np.ndarray:
    """Per-prompt weights normalized to sum 1: uniform when ``weights`` is None, else non-negative
    numbers of length ``n`` (one per success rate ``mu``) with a positive sum."""
    if weights is None:
        return np.full(n, 1.0 / n)
    w = check_array("weights", as_real_array("weights", weights), lo=0).ravel()
    if w.size != n:
        fail("weights", f"length {w.size}", f"of the length of mu ({n})")
    if not w.sum() > 0:
        fail("weights", 0.0, "of positive sum")
    return w / w.sum()
