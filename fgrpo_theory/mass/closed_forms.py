"""Closed-form expectations over the group draw: E[U2], Lemma H.1, Cor. H.2, section-6 drift."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import softmax

from .._validate import check_int_array, check_rewards, fail
from ..advantages import AdvantageConvention, binary_advantages, focal_weight
from ..policy import check_policy
from ._checks import check_logits, check_N, out
from ._engine import chunked, levels, miss_all
from .step import StepSpec

__all__ = [
    "expected_unsampled_square_mass",
    "expected_sampled_mass_given_correct",
    "expected_baseline_given_correct",
    "LogprobDrift",
    "expected_logprob_drift",
]


def expected_unsampled_square_mass(
    logits: ArrayLike, N: ArrayLike, mask: ArrayLike | None = None
) -> float | np.ndarray:
    """Expected unsampled second moment E[U2] = sum_i p_i^2 (1 - p_i)^N (theory.md section 5).

    Parameters
    ----------
    logits : array_like, shape (K,)
    N : int or array_like of int
        Group size(s) >= 1; the result has the shape of ``N`` (cost O(K) per entry, whatever N).
    mask : array_like of bool, shape (K,), optional
        Restrict the sum to these actions (e.g. the correct mask gives E[U_pos2]).

    Returns
    -------
    float or numpy.ndarray
    """
    z = check_logits(logits)
    n_arr = check_int_array("N", N, lo=1)
    sel = np.ones(z.size, dtype=bool)
    if mask is not None:
        sel = check_policy(z, mask, names=("logits", "mask"))[1]
    lv = levels(z, sel, softmax(z))
    keep = lv.correct  # the levels inside the mask
    p, m = lv.p[keep], lv.m[keep]

    def block(ns: np.ndarray) -> np.ndarray:
        return np.sum(m * p**2 * miss_all(p, ns[:, None]), axis=-1)

    return out(chunked(n_arr, p.size, block))


def expected_sampled_mass_given_correct(
    logits: ArrayLike, correct: ArrayLike, N: int, k: ArrayLike
) -> tuple[float | np.ndarray, float | np.ndarray]:
    """Expected sampled correct and incorrect mass given X = k correct draws (Lemma H.1).

    With q_pos = p/mu on correct and q_neg = p/(1-mu) on incorrect actions (P-24, P-25):

        E[P_pos | X=k] = sum_C p (1 - (1 - q_pos)^k),          non-decreasing in k,
        E[P_neg | X=k] = sum_notC p (1 - (1 - q_neg)^(N-k)),   non-increasing in k.

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)
    N : int
        Group size >= 1 (cost independent of N).
    k : int or array_like of int
        Number(s) of correct draws, 0 <= k <= N.

    Returns
    -------
    e_pos, e_neg : float or numpy.ndarray
        Shapes of ``k``.
    """
    z, corr = check_policy(logits, correct)
    N = check_N(N, hi=None)
    k_arr = check_int_array("k", k, lo=0, hi=N)
    p = softmax(z)
    lv = levels(z, corr, p)
    mu, nu = float(np.sum(p[corr])), float(np.sum(p[~corr]))

    def side(mask: np.ndarray, total: float, draws: np.ndarray) -> np.ndarray:
        q = lv.p[mask] / total if total > 0 else lv.p[mask]  # total = 0: no such action
        mp = lv.m[mask] * lv.p[mask]

        def block(ks: np.ndarray) -> np.ndarray:
            return np.sum(mp * (1.0 - miss_all(q, ks[:, None])), axis=-1)

        return chunked(draws, q.size, block)

    e_pos = side(lv.correct, mu, k_arr)
    e_neg = side(~lv.correct, nu, N - k_arr)
    return out(e_pos), out(e_neg)


def expected_baseline_given_correct(
    logits: ArrayLike,
    correct: ArrayLike,
    N: int,
    k: ArrayLike,
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
) -> float | np.ndarray:
    """Expected batch baseline given X = k: E[S_R | X=k] = R_c E[P_pos|k] + R_w E[P_neg|k].

    Corollary H.2: it is non-decreasing in k when R_c >= 0 >= R_w (both reward encodings of the
    paper). theory.md states the condition as R_c > R_w, R_w <= 0; that is not enough: with
    R_c < 0 the term R_c E[P_pos|k] decreases in k and can win (see the tests).

    Parameters
    ----------
    logits, correct, N, k
        As in :func:`expected_sampled_mass_given_correct`.
    r_correct, r_incorrect : float
        Rewards R_c > R_w.

    Returns
    -------
    float or numpy.ndarray
    """
    rc, rw = check_rewards(r_correct, r_incorrect)
    e_pos, e_neg = expected_sampled_mass_given_correct(logits, correct, N, k)
    return out(rc * np.asarray(e_pos) + rw * np.asarray(e_neg))


@dataclass(frozen=True)
class LogprobDrift:
    """Expected first-order step of the log-prob rule (theory.md section 6, our result).

    Attributes
    ----------
    N, lr, gamma : number
        Group size, step size lr (eta in the paper), focal exponent.
    advantage : str
        Name of the advantage convention.
    mu : float
        Success probability.
    h_pos, h_neg : float
        E[g(X/N) X A+(X)] / N and E[g(X/N) (N-X) A-(X)] / N; for advantages that sum to zero in
        the group h_neg = -h_pos, and for "grpo" h_pos = h = E[g sqrt(X(N-X))] / N.
    h : float
        Same as ``h_pos``.
    expected_dz : numpy.ndarray, shape (K,)
        E[dz_c] = lr h_pos p_c / mu on correct, E[dz_w] = lr h_neg p_w / (1 - mu) on incorrect.
    expected_dp : numpy.ndarray, shape (K,)
        First-order E[dp_j] = p_j (E[dz_j] - sum_i p_i E[dz_i]) (P-18 of the expected step).
    expected_dmu : float
        First-order E[d mu] = sum_C E[dp_j].
    threshold_prob : float or None
        A correct action with p_j below this loses mass in expectation (None when h_pos = 0, the
        expected step then being zero). For zero-sum advantages it equals
        sum_C p^2 - mu/(1 - mu) sum_notC p^2.
    threshold_ratio : float or None
        The same threshold on p_j / mu.
    n_correct_losing : int
        Number of correct actions with E[dp_j] < 0.
    mass_correct_losing : float
        Their total probability.
    """

    N: int
    lr: float
    gamma: float
    advantage: str
    mu: float
    h: float
    h_pos: float
    h_neg: float
    expected_dmu: float
    threshold_prob: float | None
    threshold_ratio: float | None
    n_correct_losing: int
    mass_correct_losing: float
    expected_dz: np.ndarray = field(repr=False, compare=False)
    expected_dp: np.ndarray = field(repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """Scalar fields as a dict (the per-action arrays left out)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("expected_dz", "expected_dp")
        }


def expected_logprob_drift(
    logits: ArrayLike,
    correct: ArrayLike,
    N: int,
    lr: float = 1.0,
    gamma: float = 0.0,
    advantage: str | AdvantageConvention = "grpo",
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
) -> LogprobDrift:
    """Expected first-order drift of the log-prob (policy-gradient) update (theory.md section 6).

    The logit step is dz_k = (lr/N) g(X/N) n_k A(k); given X, E[n_c] = X p_c/mu, so

        E[dz_c] = lr h_pos p_c / mu,    E[dz_w] = lr h_neg p_w / (1 - mu),
        h_pos = E[g(X/N) X A+(X)] / N,  h_neg = E[g(X/N) (N-X) A-(X)] / N,  X ~ Bin(N, mu),

    summed over the binomial pmf (scipy.stats.binom). With GRPO population-std advantages
    X A+ = sqrt(X (N-X)) = -(N-X) A-, so h_pos = -h_neg = h = E[g sqrt(X(N-X))]/N and the expected
    step is the gradient of mu scaled by h/(mu(1-mu)), whatever gamma: focal weighting changes
    only its size. A correct action loses mass in expectation when p_j/mu is below
    sum_C p^2/mu - sum_notC p^2/(1-mu) ("rich get richer").

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)
        At least one correct and one incorrect action.
    N : int
        Group size in [1, 2**20] (:data:`~fgrpo_theory.mass.MAX_GROUP_SIZE`; the binomial sum
        holds a few arrays of N + 1 floats, about 80 MB at the bound).
    lr : float
        Step size lr (eta in the paper), > 0 (everything is linear in it).
    gamma : float
        Focal exponent >= 0.
    advantage : str or AdvantageConvention
        Advantage convention (default "grpo").
    r_correct, r_incorrect : float
        Rewards R_c > R_w (they matter only for conventions without std normalization).

    Returns
    -------
    LogprobDrift
    """
    from scipy.stats import binom

    z, corr = check_policy(logits, correct)
    if corr.all():
        fail(
            "correct", int(corr.sum()), f"a mask leaving at least one incorrect action of {z.size}"
        )
    N = check_N(N)
    if advantage is None:
        fail("advantage", None, "a preset name or an AdvantageConvention")
    spec = StepSpec("logprob", lr, gamma, r_correct, r_incorrect, advantage)
    lr, conv = spec.lr, spec.advantage
    p = softmax(z)
    mu, nu = float(np.sum(p[corr])), float(np.sum(p[~corr]))
    x = np.arange(N + 1)
    pmf = binom.pmf(x, N, mu)
    g = np.asarray(focal_weight(x / N, spec.gamma))
    adv_c, adv_w = binary_advantages(x, N, conv, spec.r_correct, spec.r_incorrect)
    h_pos = float(np.sum(pmf * g * x * np.asarray(adv_c)) / N)
    h_neg = float(np.sum(pmf * g * (N - x) * np.asarray(adv_w)) / N)
    s_p, s_n = float(np.sum(p[corr] ** 2)), float(np.sum(p[~corr] ** 2))
    e_dz = np.where(corr, lr * h_pos * p / mu, lr * h_neg * p / nu)
    mean_dz = lr * (h_pos * s_p / mu + h_neg * s_n / nu)  # sum_i p_i E[dz_i]
    e_dp = p * (e_dz - mean_dz)
    e_dmu = lr * (h_pos * s_p * nu / mu - h_neg * s_n * mu / nu)
    if h_pos > 0:
        thr = mean_dz / lr * mu / h_pos
        thr_ratio: float | None = thr / mu
    else:
        thr, thr_ratio = None, None
    losing = corr & (e_dp < 0)
    return LogprobDrift(
        N=N,
        lr=lr,
        gamma=spec.gamma,
        advantage=conv.name,
        mu=mu,
        h=h_pos,
        h_pos=h_pos,
        h_neg=h_neg,
        expected_dmu=e_dmu,
        threshold_prob=thr,
        threshold_ratio=thr_ratio,
        n_correct_losing=int(losing.sum()),
        mass_correct_losing=float(np.sum(p[losing])),
        expected_dz=e_dz,
        expected_dp=e_dp,
    )
