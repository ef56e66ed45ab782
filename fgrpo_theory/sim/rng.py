"""Counter-based random streams on the Numba side (see :mod:`.keys` for the scheme).

A stream is a uint64 array ``state = [key, counter]``; word ``i`` is the SplitMix64 finalizer of
``key + i * GOLDEN``, so any word can be computed without the ones before it, and runs, threads
and schedulers never share state.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit_exact_inline
from .kalloc import empty
from .keys import GOLDEN_INT, M1_INT, M2_INT

__all__ = [
    "next_u64",
    "next_uniform",
    "next_uniform_open0",
    "uniform_at",
    "uniform_open0_at",
    "next_exp",
    "new_stream",
]

GOLDEN = np.uint64(GOLDEN_INT)
M1 = np.uint64(M1_INT)
M2 = np.uint64(M2_INT)
S30 = np.uint64(30)
S27 = np.uint64(27)
S31 = np.uint64(31)
S11 = np.uint64(11)
ONE = np.uint64(1)
INV53 = 1.0 / 9007199254740992.0  # 2**-53


@jit_exact_inline
def _mix64(x):
    x = (x ^ (x >> S30)) * M1
    x = (x ^ (x >> S27)) * M2
    return x ^ (x >> S31)


@jit_exact_inline
def next_u64(state):
    """Next 64-bit word of the stream ``state = [key, counter]`` (uint64 array, advanced)."""
    c = state[1] + ONE
    state[1] = c
    return _mix64(state[0] + c * GOLDEN)


@jit_exact_inline
def uniform_at(key, c):
    """Word ``c`` of the stream with key ``key`` as a uniform double in [0, 1) (53 bits): what
    :func:`next_uniform` returns when the counter reaches ``c``, without the state."""
    return float(_mix64(key + c * GOLDEN) >> S11) * INV53


@jit_exact_inline
def uniform_open0_at(key, c):
    """Word ``c`` of the stream as a uniform double in (0, 1] (safe argument for ``log``)."""
    return (float(_mix64(key + c * GOLDEN) >> S11) + 1.0) * INV53


@jit_exact_inline
def next_uniform(state):
    """Uniform double in [0, 1) with 53 random bits."""
    c = state[1] + ONE
    state[1] = c
    return uniform_at(state[0], c)


@jit_exact_inline
def next_uniform_open0(state):
    """Uniform double in (0, 1] with 53 random bits (safe argument for ``log``)."""
    c = state[1] + ONE
    state[1] = c
    return uniform_open0_at(state[0], c)


@jit_exact_inline
def next_exp(state):
    """Standard exponential variate ``-log(U)``, U in (0, 1]."""
    return -np.log(next_uniform_open0(state))


@jit_exact_inline
def new_stream(key):
    """A fresh stream ``state = [key, 0]`` (its first word is ``mix64(key + GOLDEN)``)."""
    state = empty(2, np.uint64)
    state[0] = key
    state[1] = 0
    return state
