"""Mass redistribution inside the correct set of a softmax policy (theory.md sections 5 and 6).

A policy is a vector of logits ``z`` over K actions with ``p = softmax(z)`` and a mask of the
correct actions C (see :mod:`fgrpo_theory.policy`). A group of N i.i.d. draws is given sparsely, as
the DISTINCT sampled actions with their counts (:class:`Group`; never a K x N array). It splits
the actions into A (sampled correct), B (sampled incorrect) and U (never sampled), and defines the
statistics of section 5 (:class:`GroupStatistics`):

    Q_pos = sum_C p, Q_neg = 1 - Q_pos, P_pos = sum_A p, P_neg = sum_B p, Q_u = Q_pos - P_pos (P-9),
    A2 = sum_A p^2, B2 = sum_B p^2, U_pos2, U_neg2, U2 = sums of p^2 over unsampled correct,
    unsampled incorrect, all unsampled actions, and the batch baseline S_R = R_c P_pos + R_w P_neg.

Update rules
------------
:func:`logit_step` gives the logit change ``dz`` of one step of size ``eta`` under three rules,
each optionally multiplied by the focal weight ``g = (1 - X/N)^gamma`` of the group (P-12), X the
number of correct draws:

``"theory"``
    The linear surrogate of section 2.3 on the DISTINCT sampled actions (P-5), unsampled actions
    having reward 0: ``dz_i = (eta/N) p_i (R_i - S_R)``. The first-order formulas P-17 (total
    correct mass) and P-10 (Proposition 3.2, unsampled correct mass) describe THIS rule only.
``"paper-sim"``
    The paper's simulation (appendix J): every draw j gets the mean-centred advantage
    ``adv_j = R_j - mean R`` (convention ``"paper-sim"`` of :mod:`fgrpo_theory.advantages`,
    or any other convention) and the objective is ``(1/N) sum_j adv_j p(a_j)``, whose gradient is
    ``dz_k = (eta/N) p_k (n_k adv(k) - sum_i n_i adv(i) p_i)`` (n_k = count of action k).
``"logprob"``
    The policy gradient of ``(1/N) sum_j A_j log p(a_j)`` with any advantage convention (default
    ``"grpo"``, P-3): ``dz_k = (eta/N) n_k A(k)``; unsampled logits do not move.

For every rule the first-order change of any probability is P-18 and of any subset P-19, applied
to that rule's ``dz``; the EXACT change recomputes the softmax (:func:`exact_prob_change`,
:func:`exact_subset_change`, free of cancellation through ``expm1``). :func:`one_step` reports the
decomposition of dQ_pos and of dQ_u (direct drift and normalization coupling) for one group, first
order and exact.

Expectations over the group draw
--------------------------------
Closed forms: E[U2] (:func:`expected_unsampled_square_mass`), Lemma H.1 (P-24, P-25) and
Corollary H.2 (:func:`expected_sampled_mass_given_correct`,
:func:`expected_baseline_given_correct`), and our expected drift of the log-prob rule
(section 6, :func:`expected_logprob_drift`). :func:`expected_change` gives the expectation of any
one-step quantity (first order or exact) by exact enumeration of all multinomial group outcomes
when there are few, or by Monte Carlo with a standard error otherwise.

Conventions: rewards default to the categorical simulation's R_c = +1, R_w = -1 (theory.md
section 1); pass ``r_correct=1, r_incorrect=0`` for the LLM encoding. Internally every quantity
is a weighted sum over "atoms" (a probability, the number of actions it stands for, their draw
count and correctness), vectorized over leading axes: a dense policy has one atom per action; the
Monte Carlo path merges the unsampled actions of equal logit into one atom per logit level, so a
group from the paper's 128,000-action policy costs O(N + number of distinct logits).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from scipy.special import expm1, gammaln, log1p, log_softmax, softmax

from .._validate import check_array, check_int_array, check_scalar, fail
from ..advantages import AdvantageConvention, binary_advantages, focal_weight, get_convention
from ..policy import check_policy

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "RULES",
    "QUANTITIES",
    "REFERENCES",
    "Group",
    "make_group",
    "sample_group",
    "GroupStatistics",
    "group_statistics",
    "P17Terms",
    "P10Terms",
    "total_correct_change_p17",
    "unsampled_correct_change_p10",
    "logit_step",
    "prob_change_first_order",
    "subset_change_first_order",
    "exact_prob_change",
    "exact_subset_change",
    "OneStepResult",
    "one_step",
    "expected_unsampled_square_mass",
    "expected_sampled_mass_given_correct",
    "expected_baseline_given_correct",
    "LogprobDrift",
    "expected_logprob_drift",
    "count_outcomes",
    "ExpectationResult",
    "expected_change",
]

#: Names of the update rules of :func:`logit_step`.
RULES = ("theory", "paper-sim", "logprob")

#: Per-group quantities that :func:`expected_change` can average (fields of
#: :class:`GroupStatistics` and :class:`OneStepResult`).
QUANTITIES = (
    "X",
    "n_distinct",
    "g",
    "Q_pos",
    "Q_neg",
    "P_pos",
    "P_neg",
    "Q_u",
    "A2",
    "B2",
    "U_pos2",
    "U_neg2",
    "U2",
    "S_R",
    "dq_pos_first_order",
    "dq_pos_sampled_correct",
    "dq_pos_sampled_incorrect",
    "dq_pos_unsampled",
    "dq_pos_exact",
    "dq_unsampled_correct_first_order",
    "direct_drift",
    "coupling",
    "dq_unsampled_correct_exact",
    "dq_sampled_correct_first_order",
    "dq_sampled_correct_exact",
)

#: Where each quantity comes from: equation and meaning (for tables).
REFERENCES: dict[str, str] = {
    "X": "number of correct draws",
    "n_distinct": "number of distinct sampled actions",
    "g": "focal weight (1 - X/N)^gamma (P-12)",
    "Q_pos": "correct mass sum_C p (P-2)",
    "Q_neg": "incorrect mass 1 - Q_pos",
    "P_pos": "sampled correct mass sum_A p",
    "P_neg": "sampled incorrect mass sum_B p",
    "Q_u": "unsampled correct mass Q_pos - P_pos (P-9)",
    "A2": "sum_A p^2",
    "B2": "sum_B p^2",
    "U_pos2": "sum of p^2 over unsampled correct",
    "U_neg2": "sum of p^2 over unsampled incorrect",
    "U2": "sum of p^2 over unsampled",
    "S_R": "batch baseline R_c P_pos + R_w P_neg",
    "dq_pos_first_order": "first-order dQ_pos (theory: P-17; other rules: P-19 on C)",
    "dq_pos_sampled_correct": "dQ_pos term from A: Q_neg sum_A p dz = (eta/N)(R_c-S_R) Q_neg A2",
    "dq_pos_sampled_incorrect": "dQ_pos term from B: -Q_pos sum_B p dz = (eta/N)(S_R-R_w) Q_pos B2",
    "dq_pos_unsampled": "dQ_pos term from U: (eta/N) S_R (Q_pos U_neg2 - Q_neg U_pos2)",
    "dq_pos_exact": "exact dQ_pos after the softmax is recomputed",
    "dq_unsampled_correct_first_order": "first-order dQ_u (theory: P-10; other rules: P-19)",
    "direct_drift": "dQ_u direct drift sum_U+ p dz = -(eta/N) S_R U_pos2 (P-10)",
    "coupling": "dQ_u normalization coupling -Q_u sum p dz (P-10)",
    "dq_unsampled_correct_exact": "exact dQ_u after the softmax is recomputed",
    "dq_sampled_correct_first_order": "first-order dP_pos (P-19 on A)",
    "dq_sampled_correct_exact": "exact dP_pos after the softmax is recomputed",
}

#: Largest number of outcomes ``method="enumerate"`` accepts.
MAX_ENUMERATION = 5_000_000
_BLOCK = 1_000_000  # array elements per vectorized block


# --------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------


def _out(x: Any) -> Any:
    arr = np.asarray(x)
    return arr.item() if arr.ndim == 0 else arr


def _check_N(N: Any, name: str = "N") -> int:
    arr = check_int_array(name, N, lo=1)
    if arr.ndim != 0:
        fail(name, N, "a single integer >= 1")
    return int(arr)


def _check_eta(eta: Any) -> float:
    return check_scalar("eta", eta, lo=0.0, lo_open=True)


def _check_rewards(r_correct: Any, r_incorrect: Any) -> tuple[float, float]:
    rc = check_scalar("r_correct", r_correct)
    rw = check_scalar("r_incorrect", r_incorrect)
    if not rc > rw:
        fail("r_correct", rc, f"> r_incorrect = {rw!r}")
    return rc, rw


def _resolve_rule(
    rule: str, convention: str | AdvantageConvention | None
) -> tuple[str, AdvantageConvention | None]:
    if rule not in RULES:
        fail("rule", rule, "one of " + ", ".join(repr(r) for r in RULES))
    if rule == "theory":
        if convention is not None:
            fail(
                "convention",
                convention if isinstance(convention, str) else convention.name,
                "None for rule 'theory' (it uses raw rewards and the batch baseline S_R)",
            )
        return rule, None
    default = "paper-sim" if rule == "paper-sim" else "grpo"
    return rule, get_convention(default if convention is None else convention)


# --------------------------------------------------------------------------------------------
# groups
# --------------------------------------------------------------------------------------------


class Group(NamedTuple):
    """A sampled group, sparse: the distinct sampled actions and how often each was drawn.

    Attributes
    ----------
    actions : numpy.ndarray of int64
        Distinct action indices, sorted.
    counts : numpy.ndarray of int64
        Number of draws of each action (>= 1); ``N = counts.sum()``.
    """

    actions: np.ndarray
    counts: np.ndarray

    @property
    def N(self) -> int:
        """Group size (number of draws)."""
        return int(self.counts.sum())


def make_group(actions: Any, counts: Any = None, *, n_actions: int, name: str = "group") -> Group:
    """Build a :class:`Group` from action indices and counts, or from a list of draws.

    Parameters
    ----------
    actions : array_like of int
        Action indices in ``[0, n_actions)``. Without ``counts`` this is the list of the N draws
        (repeats allowed); with ``counts`` the indices must be distinct.
    counts : array_like of int, optional
        Number of draws of each listed action, each >= 1.
    n_actions : int
        Number of actions K of the policy.
    name : str
        Parameter name for error messages.

    Returns
    -------
    Group

    Examples
    --------
    >>> make_group([3, 0, 3], n_actions=5)
    Group(actions=array([0, 3]), counts=array([1, 2]))
    """
    a = check_int_array(name, actions, lo=0, hi=int(n_actions) - 1).ravel()
    if counts is None:
        uniq, cnt = np.unique(a, return_counts=True)
        return Group(uniq.astype(np.int64), cnt.astype(np.int64))
    c = check_int_array(f"{name} counts", counts, lo=1).ravel()
    if c.shape != a.shape:
        fail(f"{name} counts", f"{c.size} counts", f"one count per action ({a.size})")
    order = np.argsort(a, kind="stable")
    a, c = a[order], c[order]
    dup = a[1:] == a[:-1]
    if dup.any():
        fail(name, int(a[1:][dup][0]), "a list of distinct actions when counts are given")
    return Group(a, c)


def sample_group(logits: Any, N: int, seed: Any = None) -> Group:
    """Draw a group of N i.i.d. actions from ``softmax(logits)``, returned sparsely.

    Uses inverse-CDF sampling (O(K) setup, O(N log K) draws), so N = 131,072 draws from the
    paper's 128,000-action policy never build a K x N array.

    Parameters
    ----------
    logits : array_like, shape (K,)
    N : int
        Group size, >= 1.
    seed : int, numpy.random.Generator or None
        Seed or generator (``numpy.random.default_rng(seed)``).

    Returns
    -------
    Group
    """
    z = check_array("logits", logits)
    N = _check_N(N)
    p = softmax(z)
    rng = np.random.default_rng(seed)
    draws = _draw(np.cumsum(p), rng, (N,))
    return make_group(draws, n_actions=z.size)


def _draw(cdf: np.ndarray, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    u = rng.random(shape) * cdf[-1]
    idx = np.searchsorted(cdf, u, side="right")
    return np.minimum(idx, cdf.size - 1)


# --------------------------------------------------------------------------------------------
# statistics and the closed forms P-17, P-10
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupStatistics:
    """The statistics of theory.md section 5 for one group (fields may be arrays, vectorized).

    Attributes
    ----------
    N : int
        Group size.
    X : int
        Number of correct draws (with multiplicity).
    n_distinct : int
        Number of distinct sampled actions |A| + |B|.
    r_correct, r_incorrect : float
        Rewards R_c > R_w.
    Q_pos, Q_neg : float
        Correct and incorrect mass.
    P_pos, P_neg : float
        Mass of the distinct sampled correct (A) and incorrect (B) actions.
    Q_u : float
        Unsampled correct mass, Q_pos - P_pos (P-9).
    A2, B2, U_pos2, U_neg2, U2 : float
        Sums of p^2 over A, B, unsampled correct, unsampled incorrect, all unsampled.
    S_R : float
        Batch baseline R_c P_pos + R_w P_neg.
    """

    N: Any
    X: Any
    n_distinct: Any
    r_correct: float
    r_incorrect: float
    Q_pos: Any
    Q_neg: Any
    P_pos: Any
    P_neg: Any
    Q_u: Any
    A2: Any
    B2: Any
    U_pos2: Any
    U_neg2: Any
    U2: Any
    S_R: Any

    def as_dict(self) -> dict[str, Any]:
        """Fields as a dict (Python scalars for a single group)."""
        return {f.name: _out(getattr(self, f.name)) for f in fields(self)}


class P17Terms(NamedTuple):
    """First-order change of the total correct mass under the theory rule (P-17), by term."""

    sampled_correct: Any
    sampled_incorrect: Any
    unsampled_coupling: Any
    total: Any


class P10Terms(NamedTuple):
    """First-order change of the unsampled correct mass under the theory rule (P-10)."""

    direct_drift: Any
    coupling: Any
    total: Any


def total_correct_change_p17(stats: GroupStatistics, eta: Any) -> P17Terms:
    """First-order change of the total correct mass Q_pos under the theory rule (P-17).

    dQ_pos = (eta/N) [ (R_c - S_R) Q_neg A2 + (S_R - R_w) Q_pos B2
                       + S_R (Q_pos U_neg2 - Q_neg U_pos2) ]

    The first two terms are >= 0 whenever R_c >= 0 >= R_w (both reward encodings of the paper:
    then R_c - S_R >= 0 and S_R - R_w >= 0; other rewards can flip them); the third (unsampled
    coupling) can be negative and vanishes as N grows. For a focal step pass ``eta * g``.

    Parameters
    ----------
    stats : GroupStatistics
        Statistics of the group (see :func:`group_statistics`).
    eta : float or array_like
        Step size (broadcast against the statistics).

    Returns
    -------
    P17Terms
        ``sampled_correct``, ``sampled_incorrect``, ``unsampled_coupling`` and their ``total``.
    """
    s = stats
    c = np.asarray(eta) / s.N
    t1 = c * (s.r_correct - s.S_R) * s.Q_neg * s.A2
    t2 = c * (s.S_R - s.r_incorrect) * s.Q_pos * s.B2
    t3 = c * s.S_R * (s.Q_pos * s.U_neg2 - s.Q_neg * s.U_pos2)
    return P17Terms(_out(t1), _out(t2), _out(t3), _out(t1 + t2 + t3))


def unsampled_correct_change_p10(stats: GroupStatistics, eta: Any) -> P10Terms:
    """First-order change of the unsampled correct mass Q_u (Proposition 3.2, P-10).

    dQ_u = (eta/N) [ -S_R U_pos2  -  Q_u ( (R_c - S_R) A2 + (R_w - S_R) B2 - S_R U2 ) ]

    The first term is the direct drift of the unsampled correct logits, the second the
    normalization coupling. For the theory rule only; for a focal step pass ``eta * g``.

    Parameters
    ----------
    stats : GroupStatistics
    eta : float or array_like

    Returns
    -------
    P10Terms
        ``direct_drift``, ``coupling`` and their ``total``.
    """
    s = stats
    c = np.asarray(eta) / s.N
    direct = -c * s.S_R * s.U_pos2
    coupling = (
        -c * s.Q_u * ((s.r_correct - s.S_R) * s.A2 + (s.r_incorrect - s.S_R) * s.B2 - s.S_R * s.U2)
    )
    return P10Terms(_out(direct), _out(coupling), _out(direct + coupling))


# --------------------------------------------------------------------------------------------
# first-order and exact softmax changes (P-18, P-19 and the exact update)
# --------------------------------------------------------------------------------------------


def _weights(probs: np.ndarray, weights: Any) -> np.ndarray:
    return np.ones_like(probs) if weights is None else np.asarray(weights, dtype=float)


def prob_change_first_order(probs: Any, dz: Any) -> np.ndarray:
    """First-order change of every probability after a logit step ``dz`` (P-18).

    dp_i = p_i (dz_i - sum_j p_j dz_j)

    Parameters
    ----------
    probs : array_like, shape (..., K)
        Probabilities (summing to 1 over the last axis).
    dz : array_like, shape (..., K)
        Logit change.

    Returns
    -------
    numpy.ndarray, shape (..., K)
    """
    p = np.asarray(probs, dtype=float)
    d = np.asarray(dz, dtype=float)
    return p * (d - np.sum(p * d, axis=-1, keepdims=True))


def subset_change_first_order(probs: Any, dz: Any, mask: Any, weights: Any = None) -> Any:
    """First-order change of the mass of a subset S after a logit step ``dz`` (P-19).

    dQ_S = sum_{i in S} p_i dz_i - Q_S sum_j p_j dz_j

    Parameters
    ----------
    probs, dz : array_like, shape (..., K)
        Probabilities and logit change.
    mask : array_like of bool, shape (..., K)
        Membership of S.
    weights : array_like, shape (..., K), optional
        Number of actions each entry stands for (entries with equal p and dz merged); default 1.

    Returns
    -------
    float or numpy.ndarray, shape (...)
    """
    p = np.asarray(probs, dtype=float)
    pw = p * _weights(p, weights)
    pdz = pw * np.asarray(dz, dtype=float)
    m = np.asarray(mask, dtype=bool)
    q_s = np.sum(np.where(m, pw, 0.0), axis=-1)
    return _out(np.sum(np.where(m, pdz, 0.0), axis=-1) - q_s * np.sum(pdz, axis=-1))


def _exact_parts(
    p: np.ndarray, dz: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """expm1(dz - m), W = sum w p expm1(dz - m) and w p, with a shift m only for large steps.

    With sum w p = 1, p'_i = p_i (1 + em_i) / (1 + W) for any shift m, so
    p'_i - p_i = p_i (em_i - W) / (1 + W): no cancellation for small steps (m = 0).
    """
    pw = p * w
    top = np.max(np.where(w > 0, dz, -np.inf), axis=-1, keepdims=True)
    shift = np.where(top > 1.0, top, 0.0)
    em = expm1(dz - shift)
    W = np.sum(pw * em, axis=-1, keepdims=True)
    return em, W, pw


def exact_prob_change(probs: Any, dz: Any) -> np.ndarray:
    """Exact change of every probability, ``softmax(z + dz) - softmax(z)``, without cancellation.

    With W = sum_j p_j expm1(dz_j): p'_i - p_i = p_i (expm1(dz_i) - W) / (1 + W).

    Parameters
    ----------
    probs : array_like, shape (..., K)
        Probabilities p = softmax(z) (summing to 1).
    dz : array_like, shape (..., K)
        Logit change.

    Returns
    -------
    numpy.ndarray, shape (..., K)
    """
    p = np.asarray(probs, dtype=float)
    em, W, _ = _exact_parts(p, np.asarray(dz, dtype=float), np.ones_like(p))
    return p * (em - W) / (1.0 + W)


def exact_subset_change(probs: Any, dz: Any, mask: Any, weights: Any = None) -> Any:
    """Exact change of the mass of a subset S after the softmax is recomputed.

    dQ_S = (sum_S p expm1(dz) - Q_S W) / (1 + W),  W = sum_j p_j expm1(dz_j).

    Parameters
    ----------
    probs, dz : array_like, shape (..., K)
        Probabilities (``sum weights * probs = 1``) and logit change.
    mask : array_like of bool, shape (..., K)
        Membership of S.
    weights : array_like, shape (..., K), optional
        Number of actions each entry stands for; default 1.

    Returns
    -------
    float or numpy.ndarray, shape (...)
    """
    p = np.asarray(probs, dtype=float)
    em, W, pw = _exact_parts(p, np.asarray(dz, dtype=float), _weights(p, weights))
    m = np.asarray(mask, dtype=bool)
    q_s = np.sum(np.where(m, pw, 0.0), axis=-1)
    e_s = np.sum(np.where(m, pw * em, 0.0), axis=-1)
    W = W[..., 0]
    return _out((e_s - q_s * W) / (1.0 + W))


# --------------------------------------------------------------------------------------------
# the core: statistics, logit step and changes of a batch of groups given as atoms
# --------------------------------------------------------------------------------------------


def _sum(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.sum(np.where(mask, x, 0.0), axis=-1)


def _statistics(
    p: np.ndarray, w: np.ndarray, n: np.ndarray, corr: np.ndarray, N: int, rc: float, rw: float
) -> GroupStatistics:
    sampled = n > 0
    inc = ~corr
    pw = p * w
    p2w = p * pw
    a_set, b_set = sampled & corr, sampled & inc
    up_set, un_set = ~sampled & corr, ~sampled & inc
    P_pos, P_neg = _sum(pw, a_set), _sum(pw, b_set)
    U_pos2, U_neg2 = _sum(p2w, up_set), _sum(p2w, un_set)
    return GroupStatistics(
        N=N,
        X=np.sum(np.where(corr, n, 0), axis=-1),
        n_distinct=np.sum(sampled & (w > 0), axis=-1),
        r_correct=rc,
        r_incorrect=rw,
        Q_pos=_sum(pw, corr),
        Q_neg=_sum(pw, inc),
        P_pos=P_pos,
        P_neg=P_neg,
        Q_u=_sum(pw, up_set),
        A2=_sum(p2w, a_set),
        B2=_sum(p2w, b_set),
        U_pos2=U_pos2,
        U_neg2=U_neg2,
        U2=U_pos2 + U_neg2,
        S_R=rc * P_pos + rw * P_neg,
    )


def _step(
    p: np.ndarray,
    w: np.ndarray,
    n: np.ndarray,
    corr: np.ndarray,
    stats: GroupStatistics,
    eta: float,
    rule: str,
    gamma: float,
    conv: AdvantageConvention | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Logit change of every atom under ``rule`` and the focal weight g of each group."""
    N, X = stats.N, np.asarray(stats.X)
    g = np.asarray(focal_weight(X / N, gamma), dtype=float)
    step = (eta * g / N)[..., None]
    if rule == "theory":  # P-5 on the distinct sampled actions; unsampled reward 0
        reward = np.where(n > 0, np.where(corr, stats.r_correct, stats.r_incorrect), 0.0)
        return step * p * (reward - np.asarray(stats.S_R)[..., None]), g
    adv_c, adv_w = binary_advantages(X, N, conv, stats.r_correct, stats.r_incorrect)
    adv = np.where(corr, np.asarray(adv_c)[..., None], np.asarray(adv_w)[..., None])
    n_adv = np.where(n > 0, n * adv, 0.0)
    if rule == "paper-sim":  # gradient of (1/N) sum_j adv_j p(a_j)
        total = np.sum(w * n_adv * p, axis=-1, keepdims=True)
        return step * p * (n_adv - total), g
    return step * n_adv, g  # logprob: gradient of (1/N) sum_j A_j log p(a_j)


def _evaluate(
    p: np.ndarray,
    w: np.ndarray,
    n: np.ndarray,
    corr: np.ndarray,
    N: int,
    eta: float,
    rule: str,
    rc: float,
    rw: float,
    gamma: float,
    conv: AdvantageConvention | None,
) -> tuple[dict[str, np.ndarray], GroupStatistics, np.ndarray]:
    """Every per-group quantity of :data:`QUANTITIES` for a batch of groups given as atoms."""
    stats = _statistics(p, w, n, corr, N, rc, rw)
    dz, g = _step(p, w, n, corr, stats, eta, rule, gamma, conv)
    sampled = n > 0
    a_set, up_set = sampled & corr, ~sampled & corr
    out: dict[str, np.ndarray] = {k: np.asarray(v) for k, v in stats.as_dict().items()}
    out.pop("N"), out.pop("r_correct"), out.pop("r_incorrect")
    out["g"] = g
    if rule == "theory":
        t17 = total_correct_change_p17(stats, eta * g)
        t10 = unsampled_correct_change_p10(stats, eta * g)
        terms = (t17.sampled_correct, t17.sampled_incorrect, t17.unsampled_coupling)
        dq_pos, dq_u = t17.total, t10.total
        direct, coupling = t10.direct_drift, t10.coupling
    else:
        # P-19 on C, regrouped like P-17: dQ_pos = Q_neg sum_C p dz - Q_pos sum_notC p dz.
        pdz = p * w * dz
        s_a, s_b = _sum(pdz, a_set), _sum(pdz, sampled & ~corr)
        s_up, s_un = _sum(pdz, up_set), _sum(pdz, ~sampled & ~corr)
        q_pos, q_neg = stats.Q_pos, stats.Q_neg
        terms = (q_neg * s_a, -q_pos * s_b, q_neg * s_up - q_pos * s_un)
        dq_pos = subset_change_first_order(p, dz, corr, w)
        dq_u = subset_change_first_order(p, dz, up_set, w)
        direct = s_up
        coupling = -stats.Q_u * np.sum(pdz, axis=-1)
    out["dq_pos_first_order"] = dq_pos
    out["dq_pos_sampled_correct"], out["dq_pos_sampled_incorrect"] = terms[0], terms[1]
    out["dq_pos_unsampled"] = terms[2]
    out["dq_pos_exact"] = exact_subset_change(p, dz, corr, w)
    out["dq_unsampled_correct_first_order"] = dq_u
    out["direct_drift"], out["coupling"] = direct, coupling
    out["dq_unsampled_correct_exact"] = exact_subset_change(p, dz, up_set, w)
    out["dq_sampled_correct_first_order"] = subset_change_first_order(p, dz, a_set, w)
    out["dq_sampled_correct_exact"] = exact_subset_change(p, dz, a_set, w)
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}, stats, dz


def _dense_atoms(
    logits: Any, correct: Any, group: Group
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    z, corr = check_policy(logits, correct)
    if not isinstance(group, Group):
        fail("group", type(group).__name__, "a Group (see make_group or sample_group)")
    group = make_group(group.actions, group.counts, n_actions=z.size)
    n = np.zeros(z.size, dtype=np.int64)
    n[group.actions] = group.counts
    return softmax(z), np.ones(z.size), n, corr


# --------------------------------------------------------------------------------------------
# one group
# --------------------------------------------------------------------------------------------


def group_statistics(
    logits: Any,
    correct: Any,
    group: Group,
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
) -> GroupStatistics:
    """The statistics of theory.md section 5 (Q_pos, P_pos, ..., S_R) of one sampled group.

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)
        Mask of the correct actions (at least one).
    group : Group
        The sampled group (distinct actions and counts).
    r_correct, r_incorrect : float
        Rewards R_c > R_w (default +1, -1 as in the categorical simulation).

    Returns
    -------
    GroupStatistics
    """
    rc, rw = _check_rewards(r_correct, r_incorrect)
    p, w, n, corr = _dense_atoms(logits, correct, group)
    stats = _statistics(p, w, n, corr, group.N, rc, rw)
    return GroupStatistics(**stats.as_dict())


def logit_step(
    logits: Any,
    correct: Any,
    group: Group,
    eta: float,
    rule: str = "theory",
    *,
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
    gamma: float = 0.0,
    convention: str | AdvantageConvention | None = None,
) -> np.ndarray:
    """Logit change ``dz`` of one update on one group (P-5 for the theory rule).

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)
    group : Group
    eta : float
        Step size > 0.
    rule : {"theory", "paper-sim", "logprob"}
        Update rule (see the module docstring).
    r_correct, r_incorrect : float
        Rewards R_c > R_w.
    gamma : float
        Focal exponent >= 0; the step is multiplied by g = (1 - X/N)^gamma (P-12).
    convention : str or AdvantageConvention, optional
        Advantage convention for "paper-sim" (default "paper-sim": R - mean R) and "logprob"
        (default "grpo"); must be None for "theory".

    Returns
    -------
    numpy.ndarray, shape (K,)
    """
    rule, conv = _resolve_rule(rule, convention)
    eta = _check_eta(eta)
    gamma = check_scalar("gamma", gamma, lo=0.0)
    rc, rw = _check_rewards(r_correct, r_incorrect)
    p, w, n, corr = _dense_atoms(logits, correct, group)
    stats = _statistics(p, w, n, corr, group.N, rc, rw)
    return _step(p, w, n, corr, stats, eta, rule, gamma, conv)[0]


@dataclass(frozen=True)
class OneStepResult:
    """Decomposition of one update on one group: first-order and exact changes.

    Attributes
    ----------
    rule : str
        Update rule.
    eta, gamma : float
        Step size and focal exponent.
    convention : str or None
        Name of the advantage convention (None for the theory rule).
    g : float
        Focal weight of the group (1 for gamma = 0).
    stats : GroupStatistics
        Section 5 statistics of the group.
    first_order_source : str
        "P-17/P-10" for the theory rule (closed forms), "P-19" for the others (from their dz).
    dq_pos_first_order, dq_pos_exact : float
        Change of the total correct mass Q_pos, first order and exact.
    dq_pos_sampled_correct, dq_pos_sampled_incorrect, dq_pos_unsampled : float
        The three terms of dq_pos_first_order (P-17's terms for the theory rule).
    dq_unsampled_correct_first_order, dq_unsampled_correct_exact : float
        Change of the unsampled correct mass Q_u (P-10 for the theory rule), first order and exact.
    direct_drift, coupling : float
        The two terms of dq_unsampled_correct_first_order.
    dq_sampled_correct_first_order, dq_sampled_correct_exact : float
        Change of the sampled correct mass P_pos.
    dz : numpy.ndarray, shape (K,)
        The rule's logit change.
    probs : numpy.ndarray, shape (K,)
        Probabilities before the update. Methods :meth:`dp_first_order` (P-18),
        :meth:`dp_exact` and :meth:`subset_change` (P-19 and exact) use both.
    """

    rule: str
    eta: float
    gamma: float
    convention: str | None
    g: float
    stats: GroupStatistics
    first_order_source: str
    dq_pos_first_order: float
    dq_pos_sampled_correct: float
    dq_pos_sampled_incorrect: float
    dq_pos_unsampled: float
    dq_pos_exact: float
    dq_unsampled_correct_first_order: float
    direct_drift: float
    coupling: float
    dq_unsampled_correct_exact: float
    dq_sampled_correct_first_order: float
    dq_sampled_correct_exact: float
    dz: np.ndarray = field(repr=False, compare=False)
    probs: np.ndarray = field(repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        """Scalar fields and the statistics, flattened into one dict (arrays left out)."""
        d: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "stats":
                d.update(self.stats.as_dict())
            elif f.name not in ("dz", "probs"):
                d[f.name] = getattr(self, f.name)
        return d

    def dp_first_order(self) -> np.ndarray:
        """First-order change of every probability (P-18), shape (K,)."""
        return prob_change_first_order(self.probs, self.dz)

    def dp_exact(self) -> np.ndarray:
        """Exact change of every probability after the softmax is recomputed, shape (K,)."""
        return exact_prob_change(self.probs, self.dz)

    def subset_change(self, mask: Any) -> tuple[float, float]:
        """First-order (P-19) and exact change of the mass of any subset of actions.

        Parameters
        ----------
        mask : array_like of bool, shape (K,)

        Returns
        -------
        first_order, exact : float
        """
        m = np.asarray(mask)
        if m.dtype != bool or m.shape != self.probs.shape:
            fail("mask", f"an array of {m.dtype} and shape {m.shape}", "a bool mask over actions")
        return (
            float(subset_change_first_order(self.probs, self.dz, m)),
            float(exact_subset_change(self.probs, self.dz, m)),
        )

    def to_frame(self) -> pd.DataFrame:
        """One-row DataFrame of :meth:`as_dict`."""
        import pandas as pd

        return pd.DataFrame([self.as_dict()])


def one_step(
    logits: Any,
    correct: Any,
    group: Group,
    eta: float,
    rule: str = "theory",
    *,
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
    gamma: float = 0.0,
    convention: str | AdvantageConvention | None = None,
) -> OneStepResult:
    """First-order and exact changes of Q_pos, Q_u and P_pos after one update on one group.

    For the theory rule the first-order changes are the closed forms P-17 and P-10 (Proposition
    3.2); for "paper-sim" and "logprob" they are P-19 applied to the rule's ``dz``, split into the
    same terms. Exact changes recompute the softmax. Works for K = 128,000 actions (O(K) memory).

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)
    group : Group
        The sampled group, e.g. from :func:`sample_group` or :func:`make_group`.
    eta : float
        Step size > 0.
    rule : {"theory", "paper-sim", "logprob"}
    r_correct, r_incorrect : float
        Rewards R_c > R_w (default +1, -1).
    gamma : float
        Focal exponent >= 0 (the step is multiplied by g = (1 - X/N)^gamma).
    convention : str or AdvantageConvention, optional
        Advantage convention for "paper-sim"/"logprob"; None for "theory".

    Returns
    -------
    OneStepResult

    Examples
    --------
    >>> from fgrpo_theory.policy import paper_policy
    >>> z, c = paper_policy()
    >>> r = one_step(z, c, sample_group(z, 8, seed=0), eta=1e-2)
    >>> abs(r.dq_pos_first_order - r.dq_pos_exact) < 1e-15
    True
    """
    rule, conv = _resolve_rule(rule, convention)
    eta = _check_eta(eta)
    gamma = check_scalar("gamma", gamma, lo=0.0)
    rc, rw = _check_rewards(r_correct, r_incorrect)
    p, w, n, corr = _dense_atoms(logits, correct, group)
    values, stats, dz = _evaluate(p, w, n, corr, group.N, eta, rule, rc, rw, gamma, conv)
    scalars = {k: float(v) for k, v in values.items()}
    return OneStepResult(
        rule=rule,
        eta=eta,
        gamma=gamma,
        convention=None if conv is None else conv.name,
        g=scalars["g"],
        stats=GroupStatistics(**stats.as_dict()),
        first_order_source="P-17/P-10" if rule == "theory" else "P-19",
        dz=dz,
        probs=p,
        **{
            k: scalars[k]
            for k in QUANTITIES
            if k not in {f.name for f in fields(GroupStatistics)} and k != "g"
        },
    )


# --------------------------------------------------------------------------------------------
# closed-form expectations over the group draw
# --------------------------------------------------------------------------------------------


class _Levels(NamedTuple):
    """Actions merged by (correctness, logit): every member has the same probability."""

    of_action: np.ndarray  # level index of each action
    p: np.ndarray  # probability of one action of the level
    m: np.ndarray  # number of actions in the level
    correct: np.ndarray  # correctness of the level


def _levels(z: np.ndarray, corr: np.ndarray, p: np.ndarray) -> _Levels:
    order = np.lexsort((z, corr))
    zs, cs = z[order], corr[order]
    start = np.ones(z.size, dtype=bool)
    start[1:] = (zs[1:] != zs[:-1]) | (cs[1:] != cs[:-1])
    ids = np.cumsum(start) - 1
    of_action = np.empty(z.size, dtype=np.int64)
    of_action[order] = ids
    first = order[start]
    return _Levels(of_action, p[first], np.bincount(ids).astype(np.int64), corr[first])


def _chunked(k: np.ndarray, width: int, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    flat = k.ravel()
    step = max(1, _BLOCK // max(width, 1))
    parts = [fn(flat[i : i + step]) for i in range(0, flat.size, step)] or [np.zeros(0)]
    return np.concatenate(parts).reshape(k.shape)


def _miss_all(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """(1 - q)^k for q in [0, 1] and integer k >= 0 (0^0 = 1), accurate for tiny q."""
    with np.errstate(divide="ignore", invalid="ignore"):
        val = np.exp(k * log1p(-np.minimum(q, 1.0)))
    return np.where(k == 0, 1.0, val)


def expected_unsampled_square_mass(logits: Any, N: Any, mask: Any = None) -> Any:
    """Expected unsampled second moment E[U2] = sum_i p_i^2 (1 - p_i)^N (theory.md section 5).

    Parameters
    ----------
    logits : array_like, shape (K,)
    N : int or array_like of int
        Group size(s) >= 1; the result has the shape of ``N``.
    mask : array_like of bool, shape (K,), optional
        Restrict the sum to these actions (e.g. the correct mask gives E[U_pos2]).

    Returns
    -------
    float or numpy.ndarray
    """
    z = check_array("logits", logits)
    n_arr = check_int_array("N", N, lo=1)
    sel = np.ones(z.size, dtype=bool)
    if mask is not None:
        sel = check_policy(z, mask, names=("logits", "mask"))[1]
    lv = _levels(z, sel, softmax(z))
    keep = lv.correct  # the levels inside the mask
    p, m = lv.p[keep], lv.m[keep]

    def block(ns: np.ndarray) -> np.ndarray:
        return np.sum(m * p**2 * _miss_all(p, ns[:, None]), axis=-1)

    return _out(_chunked(n_arr, p.size, block))


def expected_sampled_mass_given_correct(
    logits: Any, correct: Any, N: int, k: Any
) -> tuple[Any, Any]:
    """Expected sampled correct and incorrect mass given X = k correct draws (Lemma H.1).

    With q_pos = p/mu on correct and q_neg = p/(1-mu) on incorrect actions (P-24, P-25):

        E[P_pos | X=k] = sum_C p (1 - (1 - q_pos)^k),          non-decreasing in k,
        E[P_neg | X=k] = sum_notC p (1 - (1 - q_neg)^(N-k)),   non-increasing in k.

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)
    N : int
        Group size >= 1.
    k : int or array_like of int
        Number(s) of correct draws, 0 <= k <= N.

    Returns
    -------
    e_pos, e_neg : float or numpy.ndarray
        Shapes of ``k``.
    """
    z, corr = check_policy(logits, correct)
    N = _check_N(N)
    k_arr = check_int_array("k", k, lo=0, hi=N)
    p = softmax(z)
    lv = _levels(z, corr, p)
    mu, nu = float(np.sum(p[corr])), float(np.sum(p[~corr]))

    def side(mask: np.ndarray, total: float, draws: np.ndarray) -> np.ndarray:
        q = lv.p[mask] / total if total > 0 else lv.p[mask]  # total = 0: no such action
        mp = lv.m[mask] * lv.p[mask]

        def block(ks: np.ndarray) -> np.ndarray:
            return np.sum(mp * (1.0 - _miss_all(q, ks[:, None])), axis=-1)

        return _chunked(draws, q.size, block)

    e_pos = side(lv.correct, mu, k_arr)
    e_neg = side(~lv.correct, nu, N - k_arr)
    return _out(e_pos), _out(e_neg)


def expected_baseline_given_correct(
    logits: Any,
    correct: Any,
    N: int,
    k: Any,
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
) -> Any:
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
    rc, rw = _check_rewards(r_correct, r_incorrect)
    e_pos, e_neg = expected_sampled_mass_given_correct(logits, correct, N, k)
    return _out(rc * np.asarray(e_pos) + rw * np.asarray(e_neg))


@dataclass(frozen=True)
class LogprobDrift:
    """Expected first-order step of the log-prob rule (theory.md section 6, our result).

    Attributes
    ----------
    N, eta, gamma : number
        Group size, step size, focal exponent.
    convention : str
        Advantage convention.
    mu : float
        Success probability.
    h_pos, h_neg : float
        E[g(X/N) X A+(X)] / N and E[g(X/N) (N-X) A-(X)] / N; for advantages that sum to zero in
        the group h_neg = -h_pos, and for "grpo" h_pos = h = E[g sqrt(X(N-X))] / N.
    h : float
        Same as ``h_pos``.
    expected_dz : numpy.ndarray, shape (K,)
        E[dz_c] = eta h_pos p_c / mu on correct, E[dz_w] = eta h_neg p_w / (1 - mu) on incorrect.
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
    eta: float
    gamma: float
    convention: str
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
    logits: Any,
    correct: Any,
    N: int,
    eta: float = 1.0,
    gamma: float = 0.0,
    convention: str | AdvantageConvention = "grpo",
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
) -> LogprobDrift:
    """Expected first-order drift of the log-prob (policy-gradient) update (theory.md section 6).

    The logit step is dz_k = (eta/N) g(X/N) n_k A(k); given X, E[n_c] = X p_c/mu, so

        E[dz_c] = eta h_pos p_c / mu,    E[dz_w] = eta h_neg p_w / (1 - mu),
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
        Group size >= 1.
    eta : float
        Step size > 0 (everything is linear in it).
    gamma : float
        Focal exponent >= 0.
    convention : str or AdvantageConvention
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
    N = _check_N(N)
    eta = _check_eta(eta)
    gamma = check_scalar("gamma", gamma, lo=0.0)
    rc, rw = _check_rewards(r_correct, r_incorrect)
    conv = get_convention(convention)
    p = softmax(z)
    mu, nu = float(np.sum(p[corr])), float(np.sum(p[~corr]))
    x = np.arange(N + 1)
    pmf = binom.pmf(x, N, mu)
    g = np.asarray(focal_weight(x / N, gamma))
    adv_c, adv_w = binary_advantages(x, N, conv, rc, rw)
    h_pos = float(np.sum(pmf * g * x * np.asarray(adv_c)) / N)
    h_neg = float(np.sum(pmf * g * (N - x) * np.asarray(adv_w)) / N)
    s_p, s_n = float(np.sum(p[corr] ** 2)), float(np.sum(p[~corr] ** 2))
    e_dz = np.where(corr, eta * h_pos * p / mu, eta * h_neg * p / nu)
    mean_dz = eta * (h_pos * s_p / mu + h_neg * s_n / nu)  # sum_i p_i E[dz_i]
    e_dp = p * (e_dz - mean_dz)
    e_dmu = eta * (h_pos * s_p * nu / mu - h_neg * s_n * mu / nu)
    if h_pos > 0:
        thr = mean_dz / eta * mu / h_pos
        thr_ratio: float | None = thr / mu
    else:
        thr, thr_ratio = None, None
    losing = corr & (e_dp < 0)
    return LogprobDrift(
        N=N,
        eta=eta,
        gamma=gamma,
        convention=conv.name,
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


# --------------------------------------------------------------------------------------------
# expectation of any one-step quantity: enumeration or Monte Carlo
# --------------------------------------------------------------------------------------------


def count_outcomes(K: int, N: int) -> int:
    """Number of distinct group outcomes (multisets of N draws from K actions): C(N+K-1, N)."""
    return math.comb(int(N) + int(K) - 1, int(N))


def _log_count_outcomes(K: int, N: int) -> float:
    return float(gammaln(N + K) - gammaln(N + 1) - gammaln(K))


@dataclass(frozen=True)
class ExpectationResult:
    """Expected values of one-step quantities over the group draw.

    Attributes
    ----------
    method : {"enumeration", "monte-carlo"}
        How the expectation was computed.
    n_outcomes : int or None
        Number of enumerated group outcomes (enumeration).
    n_samples : int or None
        Number of sampled groups (Monte Carlo).
    mean, stderr : dict[str, float]
        Expected value and its standard error (0 for enumeration) per quantity.
    """

    method: str
    n_outcomes: int | None
    n_samples: int | None
    mean: dict[str, float]
    stderr: dict[str, float]

    def __getitem__(self, name: str) -> float:
        return self.mean[name]

    def to_frame(self) -> pd.DataFrame:
        """DataFrame with one row per quantity: quantity, mean, stderr, method, n."""
        import pandas as pd

        n = self.n_outcomes if self.method == "enumeration" else self.n_samples
        return pd.DataFrame(
            {
                "quantity": list(self.mean),
                "mean": list(self.mean.values()),
                "stderr": [self.stderr[k] for k in self.mean],
                "method": self.method,
                "n": n,
            }
        )


def _quantity_names(quantities: Sequence[str | Callable[[np.ndarray], float]]) -> list[str]:
    names = []
    for i, q in enumerate(quantities):
        if callable(q):
            names.append(getattr(q, "__name__", f"quantity_{i}"))
        elif q in QUANTITIES:
            names.append(q)
        else:
            fail("quantities", q, "names from QUANTITIES or callables of the new probabilities")
    if len(set(names)) != len(names):
        fail("quantities", ",".join(names), "a list without repeated names")
    return names


def _compositions(K: int, N: int, rows: int):
    """All compositions of N into K non-negative parts, as (rows, K) blocks (stars and bars)."""
    bars = itertools.combinations(range(N + K - 1), K - 1)
    while True:
        block = list(itertools.islice(bars, rows))
        if not block:
            return
        b = np.asarray(block, dtype=np.int64).reshape(len(block), K - 1)
        edges = np.concatenate(
            [np.full((len(block), 1), -1), b, np.full((len(block), 1), N + K - 1)], axis=1
        )
        yield np.diff(edges, axis=1) - 1


def expected_change(
    logits: Any,
    correct: Any,
    N: int,
    eta: float,
    quantities: Sequence[str | Callable[[np.ndarray], float]] = (
        "dq_pos_first_order",
        "dq_pos_exact",
        "dq_unsampled_correct_first_order",
        "dq_unsampled_correct_exact",
    ),
    *,
    rule: str = "theory",
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
    gamma: float = 0.0,
    convention: str | AdvantageConvention | None = None,
    method: str = "auto",
    samples: int = 10_000,
    seed: Any = 0,
    max_outcomes: int = 20_000,
) -> ExpectationResult:
    """Expected one-step change (or any per-group quantity) over the draw of the group.

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)
    N : int
        Group size >= 1.
    eta : float
        Step size > 0.
    quantities : sequence of str or callable
        Names from :data:`QUANTITIES` (first-order and exact changes, statistics), or callables
        ``f(new_probs) -> float`` of the exact post-update probabilities (shape (K,); these cost
        O(K) per outcome).
    rule, r_correct, r_incorrect, gamma, convention
        As in :func:`one_step`.
    method : {"auto", "enumerate", "monte-carlo"}
        "enumerate" sums over all C(N+K-1, N) multinomial outcomes with their probabilities;
        "monte-carlo" averages ``samples`` sampled groups and reports the standard error; "auto"
        enumerates when there are at most ``max_outcomes`` outcomes.
    samples : int
        Number of Monte Carlo groups (>= 2).
    seed : int, numpy.random.Generator or None
        Monte Carlo seed; the same seed gives the same numbers.
    max_outcomes : int
        Enumeration limit of "auto".

    Returns
    -------
    ExpectationResult
    """
    z, corr = check_policy(logits, correct)
    N = _check_N(N)
    rule, conv = _resolve_rule(rule, convention)
    eta = _check_eta(eta)
    gamma = check_scalar("gamma", gamma, lo=0.0)
    rc, rw = _check_rewards(r_correct, r_incorrect)
    names = _quantity_names(quantities)
    if method not in ("auto", "enumerate", "monte-carlo"):
        fail("method", method, "one of 'auto', 'enumerate', 'monte-carlo'")
    samples = int(check_int_array("samples", samples, lo=2))
    max_outcomes = int(check_int_array("max_outcomes", max_outcomes, lo=1))
    K = z.size
    log_count = _log_count_outcomes(K, N)
    if method == "auto":
        small = log_count <= math.log(max_outcomes) + 1e-9
        method = "enumerate" if small and count_outcomes(K, N) <= max_outcomes else "monte-carlo"
    if method == "enumerate" and (
        log_count > math.log(MAX_ENUMERATION) + 1e-9 or count_outcomes(K, N) > MAX_ENUMERATION
    ):
        fail(
            "method",
            "enumerate",
            f"used with at most {MAX_ENUMERATION} outcomes (K = {K}, N = {N} has "
            f"about 10^{log_count / math.log(10):.1f}); use 'monte-carlo'",
        )
    p = softmax(z)
    args = (N, eta, rule, rc, rw, gamma, conv)
    if method == "enumerate":
        return _enumerate(z, p, corr, quantities, names, args)
    return _monte_carlo(z, p, corr, quantities, names, args, samples, seed)


def _collect(
    values: dict[str, np.ndarray],
    dz: np.ndarray,
    new_probs: Callable[[int], np.ndarray],
    quantities: Sequence[Any],
    names: list[str],
) -> dict[str, np.ndarray]:
    out = {}
    for q, name in zip(quantities, names, strict=True):
        if callable(q):
            out[name] = np.asarray([float(q(new_probs(i))) for i in range(dz.shape[0])])
        else:
            out[name] = values[q]
    return out


def _enumerate(
    z: np.ndarray,
    p: np.ndarray,
    corr: np.ndarray,
    quantities: Sequence[Any],
    names: list[str],
    args: tuple[Any, ...],
) -> ExpectationResult:
    N = args[0]
    K = z.size
    logp = log_softmax(z)
    total = dict.fromkeys(names, 0.0)
    prob_sum, n_out = 0.0, 0
    ones = np.ones(K)
    for counts in _compositions(K, N, max(1, _BLOCK // K)):
        logw = gammaln(N + 1) - np.sum(gammaln(counts + 1), axis=-1)
        logw = logw + np.sum(np.where(counts > 0, counts * logp, 0.0), axis=-1)
        prob = np.exp(logw)
        values, _, dz = _evaluate(p, ones, counts, corr, *args)

        def new_probs(i: int, dz: np.ndarray = dz) -> np.ndarray:
            return p + exact_prob_change(p, dz[i])

        for name, v in _collect(values, dz, new_probs, quantities, names).items():
            total[name] += float(np.sum(prob * v))
        prob_sum += float(np.sum(prob))
        n_out += counts.shape[0]
    if abs(prob_sum - 1.0) > 1e-9:  # pragma: no cover - a defect, not a user error
        raise RuntimeError(f"outcome probabilities sum to {prob_sum!r}, not 1")
    return ExpectationResult(
        method="enumeration",
        n_outcomes=n_out,
        n_samples=None,
        mean=total,
        stderr=dict.fromkeys(names, 0.0),
    )


def _monte_carlo(
    z: np.ndarray,
    p: np.ndarray,
    corr: np.ndarray,
    quantities: Sequence[Any],
    names: list[str],
    args: tuple[Any, ...],
    samples: int,
    seed: Any,
) -> ExpectationResult:
    N = args[0]
    rng = np.random.default_rng(seed)
    lv = _levels(z, corr, p)
    L = lv.p.size
    cdf = np.cumsum(p)
    chunk = max(1, min(samples, _BLOCK // (L + N)))
    acc: dict[str, list[np.ndarray]] = {name: [] for name in names}
    done = 0
    while done < samples:
        S = min(chunk, samples - done)
        idx = np.sort(_draw(cdf, rng, (S, N)), axis=1)
        start = np.ones((S, N), dtype=bool)
        start[:, 1:] = idx[:, 1:] != idx[:, :-1]
        run = np.cumsum(start, axis=1) - 1
        rows = np.broadcast_to(np.arange(S)[:, None], (S, N))
        counts = np.bincount((rows * N + run).ravel(), minlength=S * N).reshape(S, N)
        actions = np.zeros((S, N), dtype=np.int64)
        actions[rows[start], run[start]] = idx[start]
        valid = counts > 0
        lv_act = lv.of_action[actions]
        taken = np.bincount((rows * L + lv_act)[valid], minlength=S * L).reshape(S, L)
        pa = np.concatenate([p[actions], np.broadcast_to(lv.p, (S, L))], axis=1)
        wa = np.concatenate([valid.astype(float), (lv.m - taken).astype(float)], axis=1)
        na = np.concatenate([counts, np.zeros((S, L), dtype=np.int64)], axis=1)
        ca = np.concatenate([corr[actions], np.broadcast_to(lv.correct, (S, L))], axis=1)
        values, _, dz = _evaluate(pa, wa, na, ca, *args)

        def new_probs(i: int, dz=dz, actions=actions, valid=valid) -> np.ndarray:
            dense = dz[i, N:][lv.of_action]  # unsampled actions move like their level
            dense[actions[i][valid[i]]] = dz[i, :N][valid[i]]
            return p + exact_prob_change(p, dense)

        for name, v in _collect(values, dz, new_probs, quantities, names).items():
            acc[name].append(v)
        done += S
    mean, stderr = {}, {}
    for name in names:
        v = np.concatenate(acc[name])
        mean[name] = float(np.mean(v))
        stderr[name] = float(np.std(v, ddof=1) / math.sqrt(v.size))
    return ExpectationResult(
        method="monte-carlo", n_outcomes=None, n_samples=samples, mean=mean, stderr=stderr
    )
