"""Element-wise ``exp``, ``log`` and integer powers rounded as the C library rounds them, on every
CPU.

NumPy chooses its float64 ``exp``, ``log`` and ``power`` loops by CPU: with AVX-512 it runs its
own vector routines, elsewhere it calls the C library. The two differ by one unit in the last
place on a few inputs (measured on 2,000,000 uniforms: ``np.log`` differs from the C library's
``log`` on 0.3 % of them, ``x ** 4`` on 5 %). Most results never notice; a simulation does when
the differing values are its inputs. The population model's initial logits, the KL reference of
both simulators, the sum-tree step table and the softmax the simulator's thresholds read come from
these functions, and W-REINFORCE or NSR under SGD amplify a one-ulp change of an initial logit
over 300 steps into different rows (docs/reliability.md). The compiled kernels call the C library
already (Numba lowers ``math.exp``, ``math.log`` and ``**`` to it), so computing their inputs here
the same way makes a seed's numbers the same on AVX-512 and on AVX2 machines.

Each function calls the C library once per element: through :mod:`math` in a Python loop (about
50 ns an element, so a million elements cost 0.05 s), or, for an array of at least
:data:`JIT_MIN_SIZE` elements in a process that has Numba loaded, in the compiled loop of
:mod:`fgrpo_theory._libm_loops` (the C library's routines again, 3-4x faster at a thousand
elements; not compiled for fewer than :data:`JIT_COMPILE_MIN_SIZE` elements, nor read from
the disk cache for fewer than :data:`JIT_DISK_MIN_SIZE`). Results
equal NumPy's on a CPU without AVX-512, including NumPy's own special cases (``x ** 1`` and
``x ** 2``, which NumPy computes as ``x`` and ``x * x``).
"""

from __future__ import annotations

import functools
import math
import sys
from itertools import repeat
from typing import Any

import numpy as np

from ._validate import fail

__all__ = ["exp", "log", "power"]

#: Largest argument whose ``exp`` is finite (``math.exp`` raises ``OverflowError`` above it).
_EXP_MAX = 709.782712893384


#: arrays of at least this many elements go through the compiled loops (when Numba is loaded)
JIT_MIN_SIZE = 256
#: ... if the loop is loaded in this process already, or (arrays of at least
#: :data:`JIT_DISK_MIN_SIZE` elements) in the disk cache; else only arrays of at least this many
#: (the Python loop takes 3-9 ms on them): compiling it takes 0.3 s, which a first simulate at
#: K = 1,000 paid for 1,000 exps (the same values either way)
JIT_COMPILE_MIN_SIZE = 65536
#: ... and the disk cache is asked (once per process: 30 ms) only for arrays of at least this
#: many: a warm simulate at K = 1,000 paid the question for 1,000 exps (0.1 ms of Python loop),
#: a warm population's 120 pass@k powers of 14,336 elements gain 20-50 ms from the loaded loop
JIT_DISK_MIN_SIZE = 8192


def _map(func, a: np.ndarray, k: float | None = None) -> np.ndarray:
    """``func`` of every element (``func(x, k)`` with ``k``), in an array laid out in memory as
    ``a`` is (as a NumPy ufunc lays out its result: the order of a later reduction over it, so
    its rounding, follows). A large array in a process that has Numba loaded already (the
    simulators) takes the compiled loop of :mod:`fgrpo_theory._libm_loops`: the same C-library
    call per element, without Python's loop."""
    loop = None
    if a.size >= JIT_MIN_SIZE and "numba" in sys.modules and _loops_available():
        from . import _libm_loops as lp

        loop = lp.pow_into if func is math.pow else lp.exp_into if func is math.exp else lp.log_into
        if a.size < JIT_COMPILE_MIN_SIZE and not lp.ready(
            loop, ask_disk=a.size >= JIT_DISK_MIN_SIZE
        ):
            loop = None
    if loop is not None:
        # one layout for the loops (contiguous, aligned, writeable: one compiled version)
        flat = np.require(a.ravel(), np.float64, ["C", "A", "W"])
        vals = np.empty(a.size, dtype=np.float64)
        if func is math.pow:
            loop(flat, float(k), vals)  # a float k: Numba's int power multiplies
        else:
            loop(flat, vals)
    else:
        flat = a.ravel()
        more = () if k is None else (repeat(k),)
        vals = np.fromiter(map(func, flat.tolist(), *more), dtype=np.float64, count=a.size)
    # a fresh array laid out by NumPy's own rule for a unary ufunc (a 0-d one for a 0-d input)
    out = np.positive(a) if a.ndim else np.empty((), dtype=np.float64)
    out[...] = vals.reshape(a.shape)
    return out


@functools.cache
def _loops_available() -> bool:
    from ._libm_loops import available

    return available()


def _result(out: np.ndarray):
    """``out``, or its scalar for a 0-d input (as a NumPy ufunc returns it)."""
    return out[()] if out.ndim == 0 else out


def exp(x: Any) -> np.ndarray:
    """``exp(x)`` element-wise (float64), the C library's value for every element; ``inf`` where
    it overflows, as NumPy gives."""
    a = np.asarray(x, dtype=np.float64)
    big = a > _EXP_MAX
    out = _map(math.exp, np.where(big, 0.0, a) if big.any() else a)
    out[big] = np.inf
    return _result(out)


def log(x: Any) -> np.ndarray:
    """``log(x)`` element-wise (float64), the C library's value for every positive element;
    ``-inf`` at 0 and NaN below, as NumPy gives (NumPy's warnings are not raised)."""
    a = np.asarray(x, dtype=np.float64)
    bad = ~(a > 0.0)  # zero, negative, NaN
    out = _map(math.log, np.where(bad, 1.0, a) if bad.any() else a)
    out[bad] = np.where(a[bad] == 0.0, -np.inf, np.nan)
    return _result(out)


def power(x: Any, k: int) -> np.ndarray:
    """``x ** k`` element-wise for a float64 array ``x`` in [0, 1] (a probability or its
    complement; NaN gives NaN) and an integer ``k >= 1``: ``x`` for ``k = 1``, ``x * x`` for
    ``k = 2`` (NumPy's special cases), else the C library's ``pow(x, k)``."""
    a = np.asarray(x, dtype=np.float64)
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        fail("k", k, "an integer >= 1")
    k = int(k)
    if k == 1:
        return np.positive(a)
    if k == 2:
        return a * a
    outside = (a < 0.0) | (a > 1.0)  # NaN passes, as NaN ** k is NaN
    if outside.any():
        fail("x", float(a[outside].flat[0]), "probabilities in [0, 1]")
    return _result(_map(math.pow, a, float(k)))
