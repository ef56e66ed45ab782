"""Likelihood-aware advantage schemes: the advantages of a group depend on each rollout's
log-probability ``L_i`` under the sampling policy, not only on its correctness, so no per-X table
expresses them. Array-API functions (NumPy, torch, any array-API library through
``array_api_compat``), ``[..., N]`` in, the same type out; the simulators' kernels compute the
same numbers per sampled group (:func:`fgrpo_theory.sim.kcore._likelihood_advantages`).

``L_i`` is what the caller passes as ``logprobs``: the sequence model decides between the
sequence sum and the per-token mean (both papers' code uses the per-token mean under the
sampling policy pi_old); in the tabular simulators a rollout is one action, ``L_i = log
p_old(a_i)``. Rewards are binary (correctness ``c_i``); definitions from the authors' code
(``schemes_spec.md`` sections 1 and 2 of the project notes).
"""

from __future__ import annotations

from typing import Any

__all__ = ["unlikeliness_advantages", "ds_advantages", "EPS_UNLIKELINESS", "EPS_DS"]

#: epsilon of the std normalization in both authors' code
EPS_UNLIKELINESS = 1e-6
EPS_DS = 1e-6


def average_ranks(xp: Any, L: Any) -> Any:
    """Ascending 0-based ranks of ``L`` along the last axis, ties at their average rank:
    ``q_i = #{j: L_j < L_i} + (#{j: L_j = L_i} - 1) / 2`` (O(N^2) comparisons)."""
    less = xp.sum(xp.astype(L[..., None, :] < L[..., :, None], L.dtype), axis=-1)
    equal = xp.sum(xp.astype(L[..., None, :] == L[..., :, None], L.dtype), axis=-1)
    return less + (equal - 1.0) / 2.0


def unlikeliness_advantages(
    xp: Any, r: Any, correct: Any, logprobs: Any, N: int, penalty: float = 0.25
) -> Any:
    """GRPO-Unlikeliness (He, Fried and Welleck 2025, "Rewarding the Unlikely", arXiv
    2506.02355, section 4.1; the rank-penalized reward, eq. 13 per a third-party reading), as
    the authors' code computes it (AndreHe02/rewarding-unlikely-release,
    ``_compute_advantages``):

        q_i = ascending rank of L_i over all N rollouts (0 = least likely),
        m_i = r_i (1 - penalty q_i / N) for a correct rollout, 0 for an incorrect one,
        A_i = (m_i - mean m) / (std_Bessel(m) + 1e-6),

    and A = 0 for a group with X = 0 or X = N (the code skips groups without a mixed outcome).

    Ties: the authors' ``argsort(argsort(L))`` splits them in an arbitrary order. Here tied
    rollouts (in the tabular simulators: the same action, drawn more than once) get their
    average rank. The tied rollouts' rewards then sum to what any tie order gives (ranks enter
    m linearly, and the average keeps their sum), so mean m and the group's summed update
    direction over the tie are unchanged; the std (hence the normalization) can differ slightly
    from a given arbitrary order, since the spread of m inside the tie is removed.
    """
    q = average_ranks(xp, logprobs)
    X = xp.sum(xp.astype(correct, r.dtype), axis=-1, keepdims=True)
    m = xp.where(correct, r * (1.0 - penalty * q / N), xp.zeros_like(r))
    mean = xp.mean(m, axis=-1, keepdims=True)
    d = m - mean
    denom = max(N - 1, 1)
    std = xp.sqrt(xp.sum(d * d, axis=-1, keepdims=True) / denom)
    adv = d / (std + EPS_UNLIKELINESS)
    mixed = (X > 0) & (X < N)
    return xp.where(mixed, adv, xp.zeros_like(adv))


def ds_advantages(
    xp: Any,
    r: Any,
    correct: Any,
    logprobs: Any,
    N: int,
    gamma_p: float = 0.05,
    gamma_n: float = 0.05,
) -> Any:
    """Differential smoothing, DS-GRPO (Gai, Zeng, Zhang and Raghunathan 2025, arXiv
    2511.19942), the practical advantage-level form (their eq. 6 per a third-party reading), as
    the co-authors' code computes it (Zanette-Labs/MaxRL, ``compute_dsgrpo_outcome_advantage``):

        A_i = (r_i - mean r) / (std_pop(r) + 1e-6) - gamma_p c_i L_i + gamma_n (1 - c_i) L_i,

    with c_i the correctness and L_i <= 0 the log-probability under the sampling policy: rare
    correct rollouts are pushed up more (an entropy bonus on the correct ones) and likely
    incorrect ones pushed down more (an entropy penalty on the incorrect ones). No group is
    filtered: with X = 0 or N the GRPO part is 0 and the DS term is not. Defaults 0.05 / 0.05
    are that code's defaults. Unresolved (the paper body was not available): the paper's tuned
    gamma_p and gamma_n, sequence sum vs per-token mean (the code: mean), pi_base vs pi_old (the
    code: pi_old) and whether the term is added before or after the std division (the code:
    after, as here).
    """
    mean = xp.mean(r, axis=-1, keepdims=True)
    d = r - mean
    std = xp.sqrt(xp.mean(d * d, axis=-1, keepdims=True))
    c = xp.astype(correct, r.dtype)
    return d / (std + EPS_DS) - gamma_p * c * logprobs + gamma_n * (1.0 - c) * logprobs
