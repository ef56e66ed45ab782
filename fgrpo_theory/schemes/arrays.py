"""The array-API advantages of any scheme: ``[..., N]`` rewards (NumPy, torch, any array-API
library) in, the same type out. This is the one function the trainer integrations and the
sequence model call (:meth:`fgrpo_theory.schemes.Scheme.advantages`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import fail
from ..advantages.group import _first, _is_array, _like, _namespace, as_real_array

__all__ = ["scheme_advantages", "correct_mask"]


def correct_mask(xp: Any, r: Any, correct: Any, spec: str) -> Any:
    """Each rollout's correctness as a bool array of ``r``'s namespace: ``correct`` if given
    (checked: boolean, same shape), else ``r == 1`` for rewards that are all 0 or 1."""
    if correct is not None:
        mask = correct if _is_array(correct) else np.asarray(correct)
        if not _is_array(mask) or not _namespace(mask).isdtype(mask.dtype, "bool"):
            fail("correct", getattr(mask, "dtype", type(mask).__name__), "a boolean array")
        if tuple(mask.shape) != tuple(r.shape):
            fail("correct", f"shape {tuple(mask.shape)}", f"the shape of rewards {tuple(r.shape)}")
        # on the rewards' device; _like casts to their float dtype, so cast back to bool
        return xp.astype(_like(xp, r, mask), xp.bool) if _is_array(mask) else mask
    outside = (r != 0) & (r != 1)
    if bool(xp.any(outside)):
        fail(
            "rewards",
            _first(xp, r, outside),
            f"0 or 1 for scheme {spec!r}, which needs each rollout's correctness (or pass "
            "correct=, a boolean array)",
        )
    return r == 1


def _logprobs(xp: Any, r: Any, logprobs: Any, spec: str) -> Any:
    if logprobs is None:
        fail("logprobs", None, f"an array of the rollouts' log-probabilities for scheme {spec!r}")
    lp = as_real_array("logprobs", logprobs, hi=0.0)
    if tuple(lp.shape) != tuple(r.shape):
        fail("logprobs", f"shape {tuple(lp.shape)}", f"the shape of rewards {tuple(r.shape)}")
    return _like(xp, r, lp)


def scheme_advantages(scheme: Any, rewards: Any, logprobs: Any = None, correct: Any = None) -> Any:
    """Advantages of ``scheme`` (see :meth:`Scheme.advantages`)."""
    from ..advantages import group_advantages

    d = scheme.definition
    spec = scheme.spec
    r = as_real_array("rewards", rewards)
    xp = _namespace(r)
    if r.ndim == 0:
        fail("rewards", float(r), "an array of shape (..., N)")
    N = r.shape[-1]
    needs_mask = d.binary or scheme.gamma != 0.0 or (d.table is not None and not d.convention)
    mask = correct_mask(xp, r, correct, spec) if needs_mask or correct is not None else None
    if d.convention:
        adv = group_advantages(r, d.name)
    elif d.advantages is not None:
        lp = _logprobs(xp, r, logprobs, spec) if d.needs_logprobs else None
        adv = d.advantages(xp, r, mask, lp, N, **scheme.base.kw)
    else:
        a_c, a_w = d.table(N, 1.0, 0.0, **scheme.base.kw)
        X = xp.sum(xp.astype(mask, xp.int64), axis=-1)
        flat = xp.reshape(X, (-1,))
        tc = _like(xp, r, np.ascontiguousarray(a_c))
        tw = _like(xp, r, np.ascontiguousarray(a_w))
        shape = tuple(X.shape) + (1,)
        ac = xp.reshape(xp.take(tc, flat, axis=0), shape)
        aw = xp.reshape(xp.take(tw, flat, axis=0), shape)
        adv = xp.where(mask, ac, aw)
    if scheme.gamma != 0.0:
        mu_hat = xp.mean(xp.astype(mask, r.dtype), axis=-1)
        adv = xp.pow(1.0 - mu_hat, scheme.gamma)[..., None] * adv  # P-12, P-13
    if not bool(xp.all(xp.isfinite(adv))):
        fail("rewards", _first(xp, r, ~xp.isfinite(adv)), "small enough for finite advantages")
    return adv
