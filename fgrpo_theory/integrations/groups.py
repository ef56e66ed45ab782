"""Group bookkeeping shared by the trainer integrations (array API: NumPy arrays or torch tensors).

- :func:`trainer_scheme`: a scheme spec as a trainer may use it (no regularizer term, no
  likelihood-aware scheme), and whether it names its own advantage term or only modifies the
  trainer's (``focal:gamma=G`` alone);
- :func:`correct_from_scores`: each rollout's correctness from its score (0/1 or -1/+1 scores,
  or a threshold), refusing other scores with one line;
- :func:`grouped_advantages`: a scheme's advantages of rollouts grouped by an id (unequal group
  sizes, groups of one), in the input's order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import fail

__all__ = ["trainer_scheme", "correct_from_scores", "grouped_advantages", "focal_weights"]


def trainer_scheme(spec: Any, name: str = "scheme") -> tuple[Any, bool]:
    """``(scheme, has_base)`` for a trainer: ``has_base`` is False for a spec that is only a focal
    modifier (the trainer's own advantages are then multiplied by the focal weight)."""
    from ..schemes import SCHEMES, parse_scheme

    try:
        s = parse_scheme(spec)
    except ValueError as e:
        raise ValueError(str(e).replace("scheme must", f"{name} must", 1)) from None
    terms = [p.split(":")[0].strip() for p in str(spec).split("+")]
    has_base = any(SCHEMES[t].role == "advantage" for t in terms)
    if s.regularizers:
        fail(name, spec, "a scheme without entropy/kl terms (use the trainer's own KL/entropy)")
    if s.needs_logprobs:
        fail(name, spec, "a scheme that does not need log-probabilities (not supported here)")
    return s, has_base


def correct_from_scores(scores: Any, threshold: float | None = None, name: str = "scores") -> Any:
    """Boolean correctness of each score: ``score >= threshold`` when a threshold is given;
    otherwise every score must be 0/1 or -1/+1 (correct = 1)."""
    from array_api_compat import array_namespace

    xp = array_namespace(scores)
    if threshold is not None:
        return scores >= threshold
    one = scores == 1
    zero_or_minus = (scores == 0) | (scores == -1)
    if not bool(xp.all(one | zero_or_minus)):
        bad = scores[~(one | zero_or_minus)][0]
        bad = bad.item() if hasattr(bad, "item") else float(bad)
        fail(name, bad, "0/1 or -1/+1 (binary); set a correctness threshold for other scores")
    if bool(xp.any(scores == 0)) and bool(xp.any(scores == -1)):
        fail(name, -1.0, "one binary pair, 0/1 or -1/+1, not both")
    return one


def focal_weights(correct: Any, gamma: float) -> Any:
    """g = (1 - X/N)^gamma (P-12) of each group of a [groups, N] boolean array."""
    from array_api_compat import array_namespace

    from ..advantages import focal_weight

    xp = array_namespace(correct)
    return focal_weight(xp.mean(xp.astype(correct, xp.float64), axis=-1), gamma)


def grouped_advantages(scheme: Any, scores: Any, index: Any, correct: Any) -> Any:
    """A scheme's advantages of rollouts grouped by ``index`` (any hashable ids, any order,
    unequal group sizes), returned in the input order; float like ``scores`` (1-D)."""
    from array_api_compat import array_namespace, device

    xp = array_namespace(scores)
    ids = np.asarray(index)
    if ids.shape[0] != scores.shape[0]:
        fail("index", f"{ids.shape[0]} ids", f"one id per score ({scores.shape[0]})")
    _, group = np.unique(ids, return_inverse=True)
    group = group.reshape(-1)
    sizes = np.bincount(group)
    out = xp.zeros_like(scores)
    order = np.argsort(group, kind="stable")  # rows of each group together, in input order
    for n in np.unique(sizes):
        rows = order[sizes[group[order]] == n]  # groups of size n, members consecutive
        take = xp.asarray(rows, device=device(scores))
        r = xp.reshape(xp.take(scores, take, axis=0), (-1, int(n)))
        c = xp.reshape(xp.take(correct, take, axis=0), (-1, int(n)))
        adv = scheme.advantages(r, correct=c)
        out[take] = xp.reshape(xp.astype(adv, scores.dtype), (-1,))
    return out
