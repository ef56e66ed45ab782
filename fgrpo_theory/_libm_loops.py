"""Compiled loops behind :mod:`fgrpo_theory._libm`: one C-library call per element, as its
Python loop makes, without the Python loop (about 50 ns an element there, a few here).

Numba lowers ``math.exp``, ``math.log`` and ``math.pow`` of float64 arguments to the intrinsics
``llvm.exp`` / ``llvm.log`` / ``llvm.pow``, which LLVM turns into calls of the C library's
``exp``, ``log`` and ``pow``: compiled strictly (no fast-math), nothing is approximated or
reordered, and a call per element keeps the loop scalar. (Numba binds glibc's older symbol
versions of the three, :mod:`math` the newer ones; they are wrappers of the same routines that
differ only in how they report errors: overflow, underflow, domain, none of which changes a
value here.) The exponent must be a float64: with an integer one Numba multiplies instead. The
one exception is a Numba using Intel's SVML: then LLVM may call SVML's vector routines, which
round differently, so :func:`available` is False there (and when Numba does not say) and
:mod:`fgrpo_theory._libm` keeps its Python loop. ``tests/test_libm.py`` checks both paths against
:mod:`math` element by element, subnormal results included.
"""

from __future__ import annotations

import math

from .sim._jit import jit_exact

__all__ = ["available", "ready", "exp_into", "log_into", "pow_into"]

#: The disk cache's answers of :func:`ready`, by loop (asked once per process).
_on_disk: dict = {}


def available() -> bool:
    """Whether these loops give the C library's values here (not when Numba uses SVML)."""
    from numba import config

    return not bool(getattr(config, "USING_SVML", True))


def ready(loop, *, ask_disk: bool = False) -> bool:  # noqa: ANN001 - one of the loops below
    """Whether calling ``loop`` compiles nothing: it is loaded in this process already, or
    (``ask_disk``) its machine code is in the disk cache. The disk is asked once per loop and
    process: the question costs about 30 ms, loading the code about as much, in which time the
    Python loop does some 600,000 elements (50 ns each)."""
    if loop.overloads:
        return True
    if not ask_disk:
        return False
    if loop not in _on_disk:
        from numba import types

        from ._numba_cache import on_disk

        f = types.Array(types.float64, 1, "C")
        sig = (f, types.float64, f) if loop is pow_into else (f, f)
        _on_disk[loop] = on_disk(loop, sig) is True
    return _on_disk[loop]


@jit_exact
def exp_into(x, out):  # noqa: ANN001, ANN201 - a Numba kernel
    """``out[i] = exp(x[i])`` (1-D float64; ``x`` finite or -inf, at most libm's overflow bound)."""
    for i in range(x.size):
        out[i] = math.exp(x[i])


@jit_exact
def log_into(x, out):  # noqa: ANN001, ANN201 - a Numba kernel
    """``out[i] = log(x[i])`` (1-D float64; ``x`` positive)."""
    for i in range(x.size):
        out[i] = math.log(x[i])


@jit_exact
def pow_into(x, k, out):  # noqa: ANN001, ANN201 - a Numba kernel
    """``out[i] = pow(x[i], k)`` (1-D float64, ``k`` a float64)."""
    for i in range(x.size):
        out[i] = math.pow(x[i], k)
