"""The private batched engine of :mod:`fgrpo_theory.mass`: statistics, logit step and changes.

Every quantity is a weighted sum over "atoms" (a probability ``p``, the number of actions ``w`` it
stands for, their draw count ``n`` and correctness), vectorized over leading axes (a batch of
groups): a dense policy has one atom per action; the Monte Carlo path merges the unsampled actions
of equal logit into one atom per logit level, so a group from the paper's 128,000-action policy
costs O(N + number of distinct logits). Nothing here validates: callers pass checked arrays and a
validated :class:`~fgrpo_theory.mass.step.StepSpec`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import log1p, softmax

from .._validate import fail
from ..advantages import binary_advantages, focal_weight
from ..policy import check_policy
from .groups import Group, make_group
from .softmax import exact_subset, first_order_subset
from .statistics import GroupStatistics, total_correct_change_p17, unsampled_correct_change_p10

if TYPE_CHECKING:
    from .step import StepSpec

#: Array elements per vectorized block (bounds the memory of every batched computation).
BLOCK = 1_000_000


def _sum(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.sum(np.where(mask, x, 0.0), axis=-1)


def statistics(
    p: np.ndarray, w: np.ndarray, n: np.ndarray, corr: np.ndarray, N: int, rc: float, rw: float
) -> GroupStatistics:
    """Section 5 statistics of a batch of groups given as atoms."""
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


def step(
    p: np.ndarray,
    w: np.ndarray,
    n: np.ndarray,
    corr: np.ndarray,
    stats: GroupStatistics,
    spec: StepSpec,
) -> tuple[np.ndarray, np.ndarray]:
    """Logit change of every atom under ``spec.rule`` and the focal weight g of each group.

    The focal weight is :func:`fgrpo_theory.advantages.focal_weight` (P-12) and the advantages
    are :func:`fgrpo_theory.advantages.binary_advantages` of ``spec.advantage``.
    """
    N, X = stats.N, np.asarray(stats.X)
    g = np.asarray(focal_weight(X / N, spec.gamma), dtype=float)
    lr_step = (spec.lr * g / N)[..., None]
    if spec.rule == "theory":  # P-5 on the distinct sampled actions; unsampled reward 0
        reward = np.where(n > 0, np.where(corr, stats.r_correct, stats.r_incorrect), 0.0)
        return lr_step * p * (reward - np.asarray(stats.S_R)[..., None]), g
    adv_c, adv_w = binary_advantages(X, N, spec.advantage, stats.r_correct, stats.r_incorrect)
    adv = np.where(corr, np.asarray(adv_c)[..., None], np.asarray(adv_w)[..., None])
    n_adv = np.where(n > 0, n * adv, 0.0)
    if spec.rule == "linear":  # gradient of (1/N) sum_j adv_j p(a_j)
        total = np.sum(w * n_adv * p, axis=-1, keepdims=True)
        return lr_step * p * (n_adv - total), g
    return lr_step * n_adv, g  # logprob: gradient of (1/N) sum_j A_j log p(a_j)


def evaluate(
    p: np.ndarray,
    w: np.ndarray,
    n: np.ndarray,
    corr: np.ndarray,
    N: int,
    spec: StepSpec,
) -> tuple[dict[str, np.ndarray], GroupStatistics, np.ndarray]:
    """Every per-group quantity of :data:`~fgrpo_theory.mass.QUANTITIES` for a batch of groups."""
    stats = statistics(p, w, n, corr, N, spec.r_correct, spec.r_incorrect)
    dz, g = step(p, w, n, corr, stats, spec)
    sampled = n > 0
    a_set, up_set = sampled & corr, ~sampled & corr
    out: dict[str, np.ndarray] = {k: np.asarray(v) for k, v in stats.as_dict().items()}
    out.pop("N"), out.pop("r_correct"), out.pop("r_incorrect")
    out["g"] = g
    if spec.rule == "theory":
        t17 = total_correct_change_p17(stats, spec.lr * g)
        t10 = unsampled_correct_change_p10(stats, spec.lr * g)
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
        dq_pos = first_order_subset(p, dz, corr, w)
        dq_u = first_order_subset(p, dz, up_set, w)
        direct = s_up
        coupling = -stats.Q_u * np.sum(pdz, axis=-1)
    out["dq_pos_first_order"] = dq_pos
    out["dq_pos_sampled_correct"], out["dq_pos_sampled_incorrect"] = terms[0], terms[1]
    out["dq_pos_unsampled"] = terms[2]
    out["dq_pos_exact"] = exact_subset(p, dz, corr, w)
    out["dq_unsampled_correct_first_order"] = dq_u
    out["direct_drift"], out["coupling"] = direct, coupling
    out["dq_unsampled_correct_exact"] = exact_subset(p, dz, up_set, w)
    out["dq_sampled_correct_first_order"] = first_order_subset(p, dz, a_set, w)
    out["dq_sampled_correct_exact"] = exact_subset(p, dz, a_set, w)
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}, stats, dz


def dense_atoms(
    logits: ArrayLike, correct: ArrayLike, group: Group
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validated policy and group as one atom per action: (p, w = 1, counts, correct)."""
    z, corr = check_policy(logits, correct)
    if not isinstance(group, Group):
        fail("group", type(group).__name__, "a Group (see make_group or sample_group)")
    group = make_group(group.actions, group.counts, n_actions=z.size)
    n = np.zeros(z.size, dtype=np.int64)
    n[group.actions] = group.counts
    return softmax(z), np.ones(z.size), n, corr


class Levels(NamedTuple):
    """Actions merged by (correctness, logit): every member has the same probability."""

    of_action: np.ndarray  # level index of each action
    p: np.ndarray  # probability of one action of the level
    m: np.ndarray  # number of actions in the level
    correct: np.ndarray  # correctness of the level


def levels(z: np.ndarray, corr: np.ndarray, p: np.ndarray) -> Levels:
    """Merge the actions of equal (correctness, logit) into levels."""
    order = np.lexsort((z, corr))
    zs, cs = z[order], corr[order]
    start = np.ones(z.size, dtype=bool)
    start[1:] = (zs[1:] != zs[:-1]) | (cs[1:] != cs[:-1])
    ids = np.cumsum(start) - 1
    of_action = np.empty(z.size, dtype=np.int64)
    of_action[order] = ids
    first = order[start]
    return Levels(of_action, p[first], np.bincount(ids).astype(np.int64), corr[first])


def chunked(k: np.ndarray, width: int, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Apply ``fn`` to blocks of ``k.ravel()`` of about BLOCK / width elements."""
    flat = k.ravel()
    size = max(1, BLOCK // max(width, 1))
    parts = [fn(flat[i : i + size]) for i in range(0, flat.size, size)] or [np.zeros(0)]
    return np.concatenate(parts).reshape(k.shape)


def miss_all(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """(1 - q)^k for q in [0, 1] and integer k >= 0 (0^0 = 1), accurate for tiny q."""
    with np.errstate(divide="ignore", invalid="ignore"):
        val = np.exp(k * log1p(-np.minimum(q, 1.0)))
    return np.where(k == 0, 1.0, val)
