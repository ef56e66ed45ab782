"""Theory checks at the sequence level: Lemma 3.1 with the model's own mu and tau.

Lemma 3.1 (theory.md section 2): a group of ``N`` i.i.d. rollouts of a prompt with correct mass
``mu`` and rare-set mass ``tau`` is active yet draws no rare correct answer with probability
Pr(B) = (1 - tau)^N - (mu - tau)^N - (1 - mu)^N. For the transformer, ``mu`` and ``tau`` are
exact (:mod:`fgrpo_theory.sequence.exact`), so the lemma predicts the frequency of the event among
sampled groups with no free parameter. :func:`lemma31_check` draws ``n_groups`` groups per prompt
and compares; :func:`fgrpo_theory.sequence.run.run_sequence` with ``lemma_check`` does the same
for the groups an RL run trains on, each at the policy that sampled it.

The z-score of a sum of indicators against the sum of their probabilities uses the standard error
sqrt(sum p (1 - p)): the indicators are independent given the policies that drew them (during
RL the policy depends on earlier groups, and the centred indicators form a martingale difference
sequence, so the same normal approximation holds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .._validate import fail
from .task import Prompts, answer_index

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["lemma31_check", "tail_miss_z"]


def tail_miss_z(observed: float, expected: np.ndarray) -> float:
    """z-score of ``observed`` events against independent probabilities ``expected``."""
    p = np.asarray(expected, dtype=float)
    var = float((p * (1 - p)).sum())
    return float("nan") if var == 0 else (observed - float(p.sum())) / np.sqrt(var)


def lemma31_check(
    model, prompts: Prompts, ids, N: int, n_groups: int, seed: int = 0
) -> pd.DataFrame:
    """Per prompt ``ids`` (with a rare set): exact ``mu``, ``tau``, Lemma 3.1's ``p_lemma``, the
    observed frequency ``p_observed`` of active groups with no rare rollout among ``n_groups``
    groups of ``N``, its standard error ``se`` and ``z``; a last row ``all`` pools the prompts."""
    import pandas as pd
    import torch

    from ..tail_miss import tail_miss_probability
    from .exact import answer_logprobs
    from .rl import sample_answers

    if isinstance(N, bool) or not isinstance(N, int) or N < 2:
        fail("N", N, "an integer >= 2")
    if isinstance(n_groups, bool) or not isinstance(n_groups, int) or n_groups < 1:
        fail("n_groups", n_groups, "an integer >= 1")
    ids = np.asarray(ids)
    ids = ids[prompts.rare[ids].any(axis=1)]
    if len(ids) == 0:
        fail("ids", "prompts without rare answers", "prompts with a rare set (variant 'multi')")
    if len(ids) * N * n_groups > 4_000_000:
        fail("n_groups", n_groups, "such that prompts x N x n_groups <= 4,000,000")
    L = prompts.task.L
    tok = torch.from_numpy(prompts.tokens[ids])
    with torch.no_grad():
        p = answer_logprobs(model, tok, L).exp().numpy()
        moves, _ = sample_answers(model, tok, N * n_groups, L, torch.Generator().manual_seed(seed))
    mu = (p * prompts.correct[ids]).sum(1)
    tau = (p * prompts.rare[ids]).sum(1)
    idx = answer_index(moves.numpy())  # [prompts, N * n_groups]
    rows = []
    events = np.zeros(len(ids))
    for j, pid in enumerate(ids):
        corr = prompts.correct[pid][idx[j]].reshape(n_groups, N)
        rare = prompts.rare[pid][idx[j]].reshape(n_groups, N)
        X = corr.sum(1)
        events[j] = ((X > 0) & (X < N) & ~rare.any(1)).sum()
    pb = np.asarray(tail_miss_probability(N, mu, tau), dtype=float)
    for j, pid in enumerate(ids):
        se = np.sqrt(pb[j] * (1 - pb[j]) / n_groups)
        obs = events[j] / n_groups
        rows.append(dict(prompt=int(pid), mu=mu[j], tau=tau[j], p_lemma=pb[j], p_observed=obs,
                         se=se, z=(obs - pb[j]) / se if se > 0 else np.nan))  # fmt: skip
    n = len(ids) * n_groups
    total_se = np.sqrt((pb * (1 - pb)).sum() * n_groups) / n
    rows.append(dict(prompt="all", mu=mu.mean(), tau=tau.mean(), p_lemma=pb.mean(),
                     p_observed=events.sum() / n, se=total_se,
                     z=tail_miss_z(events.sum(), np.repeat(pb, n_groups))))  # fmt: skip
    return pd.DataFrame(rows)
