"""Input validation shared by the library and the CLI.

Every check raises :class:`ValueError` with a one-line message that names the parameter and the
offending value, e.g. ``mu must be in (0, 1); got 1.5``. The CLI prints exactly this message and
exits with code 2, so library and command line report the same error in the same words.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

#: Largest integer magnitude accepted by :func:`check_int_array` (exact in float64).
MAX_EXACT_INT = 2**53
#: Largest number of elements inputs may broadcast to (1 GiB of float64), refused beforehand.
MAX_BROADCAST = 2**27

__all__ = [
    "MAX_EXACT_INT",
    "fail",
    "format_value",
    "check_array",
    "check_int_array",
    "check_integer",
    "check_scalar",
    "check_rewards",
]


def format_value(value: Any) -> str:
    """Render a bad value compactly for an error message (Python scalars, not NumPy reprs)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, str):
        return repr(value)
    return str(value)


def _short(value: Any) -> Any:
    """``value``, or its text cut to 60 characters if longer (a bad input can be a whole column)."""
    text = " ".join(format_value(value).split())
    return value if len(text) <= 60 else text[:57] + "..."


def fail(name: str, value: Any, requirement: str) -> NoReturn:
    """Raise ``ValueError("<name> must be <requirement>; got <value>")`` (a value of more than
    200 characters is cut, saying how long it was)."""
    text = format_value(value)
    if len(text) > 200:
        text = f"{text[:100]}... ({len(text)} characters)"
    raise ValueError(f"{name} must be {requirement}; got {text}")


#: dtype kinds that are not numbers: datetime64, timedelta64, str, bytes, void.
_NOT_NUMBER_KINDS = "MmUSV"


def _not_a_number(x: Any) -> Any | None:
    """The first element of ``x`` that is text, bytes, a date or a duration, else None (such
    values convert to float, or are counted in days since 1970, without being numbers)."""
    import datetime

    bad_types = (str, bytes, np.datetime64, np.timedelta64, datetime.date, datetime.timedelta)
    if isinstance(x, bad_types):
        return x
    dtype = getattr(x, "dtype", None)
    kind = getattr(dtype, "kind", "")  # "" for a dtype without one (torch's): not NumPy text
    if isinstance(kind, str) and len(kind) == 1 and kind in _NOT_NUMBER_KINDS:
        flat = np.asarray(x).ravel()
        return flat[0] if flat.size else str(dtype)
    if isinstance(x, list | tuple) or kind == "O":
        try:
            arr = np.asarray(x).ravel()
        except (ValueError, TypeError):  # ragged: the float conversion names it
            return None
        if arr.dtype.kind in _NOT_NUMBER_KINDS:
            return arr[0] if arr.size else None
        if arr.dtype.kind == "O":
            for v in arr:
                if isinstance(v, bad_types):
                    return v
    return None


def refuse_not_numbers(name: str, x: Any) -> None:
    """Refuse ``x`` if it is or holds text, bytes, a date or a duration (the one rule, shared by
    every function that converts its input to numbers): NumPy would read ``"0.5"`` as 0.5 and a
    date as days since 1970."""
    odd = _not_a_number(x)
    if odd is not None:
        fail(name, _short(odd), "a number or an array of numbers (not text, a date or a duration)")


def _interval(lo: float | None, hi: float | None, lo_open: bool, hi_open: bool) -> str:
    """``"in (0, 1)"`` for two bounds, ``"> 0"`` / ``">= 0"`` / ``"< 1"`` / ``"<= 1"`` for one."""
    if hi is None and lo is not None:
        return f"{'>' if lo_open else '>='} {format_value(lo)}"
    if lo is None and hi is not None:
        return f"{'<' if hi_open else '<='} {format_value(hi)}"
    left = "(" if lo_open else "["
    right = ")" if hi_open else "]"
    return f"in {left}{format_value(lo)}, {format_value(hi)}{right}"


def check_array(
    name: str,
    x: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    allow_empty: bool = False,
) -> np.ndarray:
    """Return ``x`` as a float array after checking every element is real, finite and in range.

    Complex input (even with zero imaginary parts) is refused, never truncated to its real part.

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    x : array_like
        Values to check.
    lo, hi : float, optional
        Bounds of the allowed interval (``None`` for unbounded).
    lo_open, hi_open : bool
        Whether the corresponding bound is excluded.
    allow_empty : bool
        Whether an empty array is acceptable.

    Raises
    ------
    ValueError
        On the first element that is NaN, infinite or outside the interval.
    """
    refuse_not_numbers(name, x)
    try:
        if np.iscomplexobj(x):
            z = np.asarray(x).ravel()
            fail(name, z[0] if z.size else x, "a real number or an array of real numbers")
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError, OverflowError) as e:
        if isinstance(e, ValueError) and str(e).startswith(f"{name} must be"):
            raise
        fail(name, _short(x), "a number or an array of numbers")
    if arr.size == 0 and not allow_empty:
        fail(name, "[]", "non-empty")
    bad = ~np.isfinite(arr)
    if lo is not None:
        bad |= (arr <= lo) if lo_open else (arr < lo)
    if hi is not None:
        bad |= (arr >= hi) if hi_open else (arr > hi)
    if bad.any():
        value = arr[bad].flat[0]
        if not np.isfinite(value):
            fail(name, value, "a finite number")
        fail(name, value, _interval(lo, hi, lo_open, hi_open))
    return arr


def check_int_array(
    name: str,
    x: Any,
    *,
    lo: int | None = None,
    hi: int | None = None,
    allow_empty: bool = False,
) -> np.ndarray:
    """Return ``x`` as an int64 array after checking every element is an integer in ``[lo, hi]``.

    Integers are exact in float64 only up to ``2**53``; larger magnitudes are refused
    (:data:`MAX_EXACT_INT`) rather than silently rounded or wrapped by the int64 cast.
    """
    arr = check_array(name, x, allow_empty=allow_empty)
    frac = arr != np.round(arr)
    if frac.any():
        fail(name, arr[frac].flat[0], "an integer")
    if lo is not None and (arr < lo).any():
        fail(name, int(arr[arr < lo].flat[0]), f">= {lo}")
    if hi is not None and (arr > hi).any():
        fail(name, int(arr[arr > hi].flat[0]), f"<= {hi}")
    huge = np.abs(arr) > MAX_EXACT_INT
    if huge.any():
        fail(name, arr[huge].flat[0], f"an integer of magnitude <= 2**53 = {MAX_EXACT_INT}")
    return arr.astype(np.int64)


def check_integer(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    """Check a single integer (a Python or NumPy integer, or an integral float) in ``[lo, hi]``
    (see :func:`check_int_array`) and return it as ``int``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer | float):
        fail(name, value, "an integer")
    return int(check_int_array(name, value, lo=lo, hi=hi))


def check_scalar(
    name: str,
    x: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> float:
    """Check a single finite number (see :func:`check_array`) and return it as ``float``."""
    arr = check_array(name, x, lo=lo, hi=hi, lo_open=lo_open, hi_open=hi_open)
    if arr.ndim != 0:
        fail(name, x, "a single number")
    return float(arr)


def check_rewards(r_correct: Any, r_incorrect: Any) -> tuple[float, float]:
    """Rewards R_c > R_w, both finite, with a finite difference; returned as floats."""
    rc = check_scalar("r_correct", r_correct)
    rw = check_scalar("r_incorrect", r_incorrect)
    if not rc > rw:
        fail("r_correct", rc, f"> r_incorrect = {rw!r}")
    if not np.isfinite(rc - rw):
        fail("r_correct", rc, f"such that r_correct - r_incorrect is finite (r_incorrect = {rw!r})")
    return rc, rw


def check_broadcastable(
    name: str, shape: tuple[int, ...], other: str, other_shape: tuple[int, ...]
) -> tuple[int, ...]:
    """The broadcast shape of ``shape`` (of argument ``name``) and ``other_shape`` (of the
    arguments described by ``other``): ``"<name> must be broadcastable with <other> of shape
    ..."`` when they do not broadcast, and :func:`check_broadcast_size`'s refusal when the result
    would hold more than :data:`MAX_BROADCAST` values (before anything is allocated)."""
    shape, other_shape = tuple(shape), tuple(other_shape)
    try:
        np.broadcast_shapes(shape, other_shape)
    except ValueError:
        fail(name, f"shape {shape}", f"broadcastable with {other} of shape {other_shape}")
    return check_broadcast_size(name, shape, other_shape)


def check_broadcast_size(name: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape of ``shapes``, refused (naming ``name``) when they do not broadcast
    or the result would hold more than :data:`MAX_BROADCAST` elements (before any allocation)."""
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        fail(name, " and ".join(f"shape {s}" for s in shapes), "shapes that broadcast together")
    size = int(np.prod(shape, dtype=object))
    if size > MAX_BROADCAST:
        fail(
            name,
            f"shape {shape} ({size} values)",
            f"inputs that broadcast to at most {MAX_BROADCAST} values",
        )
    return shape


def check_seed(seed: Any, name: str = "seed") -> Any:
    """A seed for :func:`numpy.random.default_rng`: None, a Generator or SeedSequence as they
    are, else an integer in [0, 2**63) (NumPy's own message for a negative one names nothing)."""
    if seed is None or isinstance(
        seed, np.random.Generator | np.random.SeedSequence | np.random.BitGenerator
    ):
        return seed
    parts = list(seed) if isinstance(seed, list | tuple) else [seed]  # NumPy takes a sequence
    for part in parts:
        if isinstance(part, bool) or not isinstance(part, int | np.integer):
            fail(name, seed, "an integer >= 0 (or a sequence of them)")
        if not 0 <= int(part) < 2**63:
            fail(name, seed, "an integer in [0, 2**63)")
    return seed if isinstance(seed, list | tuple) else int(seed)
