"""Group advantages and the focal weight, written once against the Python array API.

:func:`group_advantages`, :func:`focal_weight` and :func:`focal_advantages` take NumPy arrays,
torch tensors (any library supported by ``array_api_compat``) or plain Python numbers/lists, and
return the input's array type (a Python float for a 0-d NumPy result) without copying through
NumPy, so the same functions run inside a trainer on tensors of shape [groups, N]:

>>> import torch
>>> focal_advantages(torch.tensor([[1.0, 0, 0, 1]]), 1.0, "trl", r_incorrect=0.0)  # doctest: +SKIP
tensor([[ 0.4329, -0.4329, -0.4329,  0.4329]])

Inputs that are not arrays (lists, scalars) become NumPy float64 arrays. Every check raises the
package's one-line ValueError naming the argument and the bad value.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._validate import _interval, check_broadcast_size, fail, format_value, refuse_not_numbers
from .conventions import AdvantageConvention, get_convention

__all__ = ["group_advantages", "focal_weight", "focal_advantages"]


def _is_array(x: Any) -> bool:
    from array_api_compat import is_array_api_obj

    return is_array_api_obj(x) and not isinstance(x, np.generic)


#: NumPy's own namespace is the array API standard's from NumPy 2.1 (``astype`` is the last of
#: the functions used here to arrive); ``array_api_compat.numpy`` forwards these functions to it
#: unchanged (``std``'s ``correction`` as ``ddof``, ``pow`` as ``power``).
_NUMPY_IS_ARRAY_API = hasattr(np, "astype") and hasattr(np, "isdtype") and hasattr(np, "pow")


def _namespace(*arrays: Any) -> Any:
    """The array namespace of ``arrays``: NumPy itself for NumPy arrays (from NumPy 2.1; the
    first ``array_api_compat.numpy`` of a process imports ``numpy.f2py`` and ``numpy.testing``:
    0.2-0.4 s of every ``simulate``'s start-up), else ``array_api_compat``'s."""
    if _NUMPY_IS_ARRAY_API and all(type(a) is np.ndarray for a in arrays):
        return np
    from array_api_compat import array_namespace

    return array_namespace(*arrays)


def _first(xp: Any, x: Any, mask: Any) -> Any:
    """The first element of ``x`` where ``mask`` holds, as a Python number (for messages)."""
    m = xp.broadcast_to(mask, x.shape) if tuple(mask.shape) != tuple(x.shape) else mask
    vals = x[m]
    return vals[0].item() if hasattr(vals[0], "item") else float(vals[0])


def as_real_array(name: str, x: Any, *, lo: float | None = None, hi: float | None = None) -> Any:
    """``x`` as a real floating array of its own namespace (NumPy for non-arrays), checked.

    Refuses ragged nested lists, complex, boolean-only or non-numeric input (text, bytes, dates
    and durations by the library's one rule, :func:`~fgrpo_theory._validate.refuse_not_numbers`),
    NaN or infinite elements, and (with ``lo``/``hi``) elements outside [lo, hi], naming ``name``
    and the value.
    """
    refuse_not_numbers(name, x)
    if not _is_array(x):
        try:
            arr = np.asarray(x)
            if arr.dtype.kind == "c":
                fail(name, arr.ravel()[0].item(), "real (not complex)")
            x = np.asarray(arr, dtype=float)
        except (TypeError, ValueError) as e:
            if str(e).startswith(name + " must be"):
                raise
            text = format_value(x)
            text = text if len(text) <= 60 else text[:57] + "..."
            fail(name, text, "a number or a rectangular (not ragged) array of numbers")
    xp = _namespace(x)
    if xp.isdtype(x.dtype, "complex floating"):
        fail(name, _first(xp, x, xp.ones(x.shape, dtype=xp.bool)), "real (not complex)")
    if not xp.isdtype(x.dtype, "real floating"):
        if not xp.isdtype(x.dtype, ("integral", "bool")):
            fail(name, str(x.dtype), "an array of real numbers")
        x = xp.astype(x, xp.float64)
    if math.prod(x.shape) == 0:
        fail(name, "[]", "non-empty")
    bad = ~xp.isfinite(x)
    if lo is not None:
        bad = bad | (x < lo)
    if hi is not None:
        bad = bad | (x > hi)
    if bool(xp.any(bad)):
        value = _first(xp, x, bad)
        if not np.isfinite(value):
            fail(name, value, "a finite number")
        fail(name, value, _interval(lo, hi, False, False))
    return x


def _is_numpy(x: Any) -> bool:
    return isinstance(x, np.ndarray)


def _out(x: Any) -> Any:
    """A Python float for a 0-d NumPy result, the array otherwise."""
    if _is_numpy(x) and x.ndim == 0:
        return float(x)
    return x


def _refuse_group_of_one(conv: AdvantageConvention) -> None:
    fail("N", 1, f">= 2 for convention {conv.name!r} (it refuses groups of one)")


def _zero_divisor(conv: AdvantageConvention) -> None:
    fail(
        "eps",
        conv.eps,
        f"> 0 for convention {conv.name!r}: zero_variance='formula' divides a zero-variance "
        "group by std + eps = 0",
    )


def group_advantages(
    rewards: Any, advantage: str | AdvantageConvention = "grpo", **overrides: Any
) -> Any:
    """Group-relative advantages of every rollout (P-3 and the trainer variants).

    Parameters
    ----------
    rewards : array_like or array API array, shape (..., N)
        Rewards of groups of N rollouts; the last axis is the group (e.g. [groups, N]). NumPy
        arrays, torch tensors or other array-API arrays are computed in their own library.
    advantage : str or AdvantageConvention
        A preset name (see :data:`PRESETS`; default ``"grpo"``: population std, eps 0) or a
        convention object.
    **overrides
        Fields of :class:`AdvantageConvention` to replace, see :func:`get_convention`.

    Returns
    -------
    array of the input's type, shape (..., N)
        Advantages. With a mean baseline they sum to zero within each group; they are
        permutation-equivariant along the last axis.

    Raises
    ------
    ValueError
        Non-finite, complex or ragged rewards, a 0-d or empty group, a refused group of one, or
        a zero-variance group whose divisor is 0 under ``zero_variance="formula"``.

    Examples
    --------
    >>> group_advantages([1.0, 0.0, 0.0, 1.0], "trl")  # Bessel std 0.57735 + 1e-4
    array([ 0.86587,  -0.86587, -0.86587,  0.86587])  # doctest: +SKIP
    """
    conv = get_convention(advantage, **overrides)
    r = as_real_array("rewards", rewards)
    xp = _namespace(r)
    if r.ndim == 0:
        fail("rewards", _first(xp, r, xp.isfinite(r)), "an array of shape (..., N)")
    n = r.shape[-1]
    zero = xp.zeros_like(r)
    if n == 1:
        if conv.group_of_one == "raise":
            _refuse_group_of_one(conv)
        if conv.group_of_one == "zero":
            return zero
        return r / conv.divisor(1.0)
    flat = xp.max(r, axis=-1, keepdims=True) == xp.min(r, axis=-1, keepdims=True)
    if conv.zero_variance == "formula" and conv.std != "none" and bool(xp.any(flat)):
        if conv.divisor(0.0) == 0:
            _zero_divisor(conv)
    # Rewards near the float64 limit overflow the mean, the std or the quotient: NumPy's
    # warnings are silenced here because every non-finite result is refused below, by name.
    with np.errstate(over="ignore", invalid="ignore"):
        # A flat group's centred rewards are 0 exactly (not the rounding noise of its float mean).
        centred = xp.where(flat, zero, r - xp.mean(r, axis=-1, keepdims=True))
        if conv.baseline == "loo":
            centred = centred * (n / (n - 1))
        if conv.std == "none":
            adv = centred
        else:
            ddof = 1 if conv.std == "bessel" else 0
            if conv.scale_scope == "batch":
                flat_r = xp.reshape(r, (-1,))
                if flat_r.shape[0] < 2:
                    fail("rewards", flat_r.shape[0], "at least 2 rewards for a batch std")
                std = xp.std(flat_r, correction=ddof) * xp.ones_like(r[..., :1])
            else:
                std = xp.std(r, axis=-1, correction=ddof, keepdims=True)
            if not bool(xp.all(xp.isfinite(std))):
                fail("rewards", _first(xp, r, ~xp.isfinite(std)), "small enough for a finite std")
            div = conv.divisor(std, xp)
            zero_div = div == 0
            if bool(xp.any(zero_div & ~flat)):
                bad = _first(xp, r, zero_div & ~flat)
                fail("rewards", bad, "spread enough within a group for a non-zero std (underflow)")
            adv = xp.where(zero_div, zero, centred / xp.where(zero_div, xp.ones_like(div), div))
        if conv.zero_variance == "zero":
            adv = xp.where(flat, zero, adv)
    if not bool(xp.all(xp.isfinite(adv))):
        fail("rewards", _first(xp, r, ~xp.isfinite(adv)), "small enough for finite advantages")
    return adv


def _broadcast(
    name: str, x: Any, other_name: str, shape: tuple[int, ...], trailing: int = 1
) -> tuple[int, ...]:
    """The broadcast shape of ``x`` and ``shape``, refused when they do not broadcast or when
    the result (times ``trailing`` values each: a group's N) would exceed the library's
    broadcast bound, before anything is allocated."""
    try:
        out = tuple(np.broadcast_shapes(tuple(x.shape), shape))
    except ValueError:
        fail(name, f"shape {tuple(x.shape)}", f"broadcastable against {other_name} {shape}")
    check_broadcast_size(name, out + (trailing,) if trailing != 1 else out)
    return out


def focal_weight(mu_hat: Any, gamma: Any) -> Any:
    """Focal weight g = (1 - mu_hat)^gamma of a group (P-12).

    Parameters
    ----------
    mu_hat : float, array_like or array API array
        Empirical success rate of the group (P-11), in [0, 1].
    gamma : float, array_like or array API array
        Focusing exponent, >= 0; broadcast against ``mu_hat``. ``gamma = 0`` gives g = 1 exactly
        (also at mu_hat = 1, with the convention 0^0 = 1), i.e. the vanilla method.

    Returns
    -------
    float or array of the input's type
        g in [0, 1]: 1 for a group with no correct rollout, 0 for an all-correct group (gamma > 0).
    """
    m = as_real_array("mu_hat", mu_hat, lo=0, hi=1)
    xp = _namespace(m)
    g = _like(xp, m, as_real_array("gamma", gamma, lo=0))
    _broadcast("gamma", g, "mu_hat of shape", tuple(m.shape))
    return _out(xp.pow(1.0 - m, g))


def _like(xp: Any, ref: Any, x: Any) -> Any:
    """``x`` in the namespace, dtype and device of ``ref`` (a NumPy gamma next to a tensor)."""
    if _is_numpy(ref) and _is_numpy(x):
        return x
    from array_api_compat import device

    if not _is_numpy(x) and _namespace(x) is not xp:
        x = np.asarray(x)
    return xp.asarray(x, dtype=ref.dtype, device=device(ref))


def focal_advantages(
    rewards: Any,
    gamma: Any,
    advantage: str | AdvantageConvention = "grpo",
    correct: Any = None,
    *,
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
    **overrides: Any,
) -> Any:
    """Focal-weighted advantages A_F = g * A (P-13) of groups of rollouts.

    The weight g = (1 - mu_hat)^gamma (P-12) uses the group's success rate (P-11)

        mu_hat = (mean R - R_w) / (R_c - R_w),

    from the declared reward pair (``r_correct``, ``r_incorrect``), or mu_hat = mean(correct) from
    an explicit mask. Without a mask, every reward must be R_c or R_w exactly.

    Parameters
    ----------
    rewards : array_like or array API array, shape (..., N)
        Rewards of groups of N rollouts (last axis = group), e.g. a torch tensor [groups, N].
    gamma : float or array_like
        Focusing exponent >= 0; an array must broadcast against the batch shape ``(...)``.
    advantage : str or AdvantageConvention
        Convention of the underlying advantage (see :func:`group_advantages`).
    correct : array of bool, shape (..., N), optional
        Which rollouts are correct; overrides the reward pair (any reward scheme then works).
    r_correct, r_incorrect : float
        The declared reward pair (default 1.0, -1.0), ``r_correct > r_incorrect``.
    **overrides
        Fields of :class:`AdvantageConvention` to replace.

    Returns
    -------
    array of the input's type, shape ``broadcast((...), gamma.shape) + (N,)``
        ``g[..., None] * A``; with gamma = 0 exactly :func:`group_advantages`.

    Raises
    ------
    ValueError
        As :func:`group_advantages`; a reward outside {r_correct, r_incorrect} without a mask; a
        mask of another shape or not boolean; a gamma that does not broadcast.
    """
    adv = group_advantages(rewards, advantage, **overrides)
    r = as_real_array("rewards", rewards)
    xp = _namespace(r)
    g = _like(xp, r, as_real_array("gamma", gamma, lo=0))
    _broadcast("gamma", g, "the batch shape of rewards", tuple(r.shape[:-1]), r.shape[-1])
    if correct is None:
        rc = _pair_value("r_correct", r_correct)
        rw = _pair_value("r_incorrect", r_incorrect)
        if not rc > rw:
            fail("r_correct", rc, f"> r_incorrect = {rw!r}")
        outside = (r != rc) & (r != rw)
        if bool(xp.any(outside)):
            fail(
                "rewards",
                _first(xp, r, outside),
                f"r_correct = {rc!r} or r_incorrect = {rw!r} (declare the pair with r_correct/"
                "r_incorrect, or pass a boolean correct mask)",
            )
        # P-11 with the declared pair; exact for binary rewards: (mean R - R_w) / (R_c - R_w).
        mu_hat = xp.mean(xp.astype(r == rc, r.dtype), axis=-1)
    else:
        mask = correct if _is_array(correct) else np.asarray(correct)
        if not _is_array(mask) or not _namespace(mask).isdtype(mask.dtype, "bool"):
            fail("correct", getattr(mask, "dtype", type(mask).__name__), "a boolean array")
        if tuple(mask.shape) != tuple(r.shape):
            fail("correct", f"shape {tuple(mask.shape)}", f"of the shape of rewards {r.shape}")
        mask = _like(xp, r, mask)
        mu_hat = xp.mean(mask, axis=-1)
    w = xp.pow(1.0 - mu_hat, g)
    return w[..., None] * adv


def _pair_value(name: str, v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        fail(name, v, "a finite number")
    if not np.isfinite(f):
        fail(name, v, "a finite number")
    return f
