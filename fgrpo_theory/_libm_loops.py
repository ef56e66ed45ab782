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


def available() -> bool:
    """Whether these loops give the C library's values here (not when Numba uses SVML)."""
    from numba import config

    return not bool(getattr(config, "USING_SVML", True))


def ready(loop) -> bool:  # noqa: ANN001 - one of the loops below
    """Whether ``loop`` is loaded in this process already (compiled here or read from the disk
    cache), so calling it costs neither a compilation nor a cache read. (Asking the disk cache
    costs 30 ms, loading from it more: the Python loop does a million exps in that time.)"""
    return bool(loop.overloads)


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
