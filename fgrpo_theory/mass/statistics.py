"""The group statistics of theory.md section 5 and their first-order closed forms P-17 and P-10.

For a group, the actions split into A (sampled correct), B (sampled incorrect) and U (never
sampled); :class:`GroupStatistics` holds

    Q_pos = sum_C p, Q_neg = 1 - Q_pos, P_pos = sum_A p, P_neg = sum_B p, Q_u = Q_pos - P_pos (P-9),
    A2 = sum_A p^2, B2 = sum_B p^2, U_pos2, U_neg2, U2 = sums of p^2 over unsampled correct,
    unsampled incorrect, all unsampled actions, and the batch baseline S_R = R_c P_pos + R_w P_neg.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from .._validate import check_array, check_rewards, fail
from ._checks import out
from .groups import Group

__all__ = [
    "GroupStatistics",
    "group_statistics",
    "P17Terms",
    "P10Terms",
    "total_correct_change_p17",
    "unsampled_correct_change_p10",
]

#: A float, or an array of floats for a batch of groups.
FloatOrArray = float | np.ndarray


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

    N: int
    X: int | np.ndarray
    n_distinct: int | np.ndarray
    r_correct: float
    r_incorrect: float
    Q_pos: FloatOrArray
    Q_neg: FloatOrArray
    P_pos: FloatOrArray
    P_neg: FloatOrArray
    Q_u: FloatOrArray
    A2: FloatOrArray
    B2: FloatOrArray
    U_pos2: FloatOrArray
    U_neg2: FloatOrArray
    U2: FloatOrArray
    S_R: FloatOrArray

    def as_dict(self) -> dict[str, Any]:
        """Fields as a dict (Python scalars for a single group)."""
        return {f.name: out(getattr(self, f.name)) for f in fields(self)}


class P17Terms(NamedTuple):
    """First-order change of the total correct mass under the theory rule (P-17), by term."""

    sampled_correct: FloatOrArray
    sampled_incorrect: FloatOrArray
    unsampled_coupling: FloatOrArray
    total: FloatOrArray


class P10Terms(NamedTuple):
    """First-order change of the unsampled correct mass under the theory rule (P-10)."""

    direct_drift: FloatOrArray
    coupling: FloatOrArray
    total: FloatOrArray


def _check_stats(stats: Any) -> GroupStatistics:
    if not isinstance(stats, GroupStatistics):
        fail("stats", type(stats).__name__, "a GroupStatistics (see group_statistics)")
    return stats


def total_correct_change_p17(stats: GroupStatistics, lr: ArrayLike) -> P17Terms:
    """First-order change of the total correct mass Q_pos under the theory rule (P-17).

    dQ_pos = (lr/N) [ (R_c - S_R) Q_neg A2 + (S_R - R_w) Q_pos B2
                      + S_R (Q_pos U_neg2 - Q_neg U_pos2) ]

    The first two terms are >= 0 whenever R_c >= 0 >= R_w (both reward encodings of the paper:
    then R_c - S_R >= 0 and S_R - R_w >= 0; other rewards can flip them); the third (unsampled
    coupling) can be negative and vanishes as N grows. For a focal step pass ``lr * g``.

    Parameters
    ----------
    stats : GroupStatistics
        Statistics of the group (see :func:`group_statistics`).
    lr : float or array_like
        Step size lr (eta in the paper), >= 0, broadcast against the statistics.

    Returns
    -------
    P17Terms
        ``sampled_correct``, ``sampled_incorrect``, ``unsampled_coupling`` and their ``total``.
    """
    s = _check_stats(stats)
    c = check_array("lr", lr, lo=0.0) / s.N
    t1 = c * (s.r_correct - s.S_R) * s.Q_neg * s.A2
    t2 = c * (s.S_R - s.r_incorrect) * s.Q_pos * s.B2
    t3 = c * s.S_R * (s.Q_pos * s.U_neg2 - s.Q_neg * s.U_pos2)
    return P17Terms(out(t1), out(t2), out(t3), out(t1 + t2 + t3))


def unsampled_correct_change_p10(stats: GroupStatistics, lr: ArrayLike) -> P10Terms:
    """First-order change of the unsampled correct mass Q_u (Proposition 3.2, P-10).

    dQ_u = (lr/N) [ -S_R U_pos2  -  Q_u ( (R_c - S_R) A2 + (R_w - S_R) B2 - S_R U2 ) ]

    The first term is the direct drift of the unsampled correct logits, the second the
    normalization coupling. For the theory rule only; for a focal step pass ``lr * g``.

    Parameters
    ----------
    stats : GroupStatistics
    lr : float or array_like
        Step size lr (eta in the paper), >= 0.

    Returns
    -------
    P10Terms
        ``direct_drift``, ``coupling`` and their ``total``.
    """
    s = _check_stats(stats)
    c = check_array("lr", lr, lo=0.0) / s.N
    direct = -c * s.S_R * s.U_pos2
    coupling = (
        -c * s.Q_u * ((s.r_correct - s.S_R) * s.A2 + (s.r_incorrect - s.S_R) * s.B2 - s.S_R * s.U2)
    )
    return P10Terms(out(direct), out(coupling), out(direct + coupling))


def group_statistics(
    logits: ArrayLike,
    correct: ArrayLike,
    group: Group,
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
) -> GroupStatistics:
    """The statistics of docs/theory.md section 5 (Q_pos, P_pos, ..., S_R) of one sampled group.

    Includes the unsampled-correct mass Q_u = Q_pos - P_pos (P-9).

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
    from ._engine import dense_atoms, statistics

    rc, rw = check_rewards(r_correct, r_incorrect)
    p, w, n, corr = dense_atoms(logits, correct, group)
    stats = statistics(p, w, n, corr, int(n.sum()), rc, rw)
    return GroupStatistics(**stats.as_dict())
