"""Numba side of the counter-based random streams (see :mod:`.keys` for the scheme)."""

from __future__ import annotations

import numpy as np
from numba import njit

from .keys import GOLDEN_INT, M1_INT, M2_INT

__all__ = ["next_u64", "next_uniform", "next_uniform_open0", "next_exp"]

GOLDEN = np.uint64(GOLDEN_INT)
M1 = np.uint64(M1_INT)
M2 = np.uint64(M2_INT)
S30 = np.uint64(30)
S27 = np.uint64(27)
S31 = np.uint64(31)
S11 = np.uint64(11)
ONE = np.uint64(1)
INV53 = 1.0 / 9007199254740992.0  # 2**-53


@njit(cache=True, inline="always", error_model="numpy")
def _mix64(x):
    x = (x ^ (x >> S30)) * M1
    x = (x ^ (x >> S27)) * M2
    return x ^ (x >> S31)


@njit(cache=True, inline="always", error_model="numpy")
def next_u64(state):
    """Next 64-bit word of the stream ``state = [key, counter]`` (uint64 array, advanced)."""
    c = state[1] + ONE
    state[1] = c
    return _mix64(state[0] + c * GOLDEN)


@njit(cache=True, inline="always", error_model="numpy")
def next_uniform(state):
    """Uniform double in [0, 1) with 53 random bits."""
    return float(next_u64(state) >> S11) * INV53


@njit(cache=True, inline="always", error_model="numpy")
def next_uniform_open0(state):
    """Uniform double in (0, 1] with 53 random bits (safe argument for ``log``)."""
    return (float(next_u64(state) >> S11) + 1.0) * INV53


@njit(cache=True, inline="always", error_model="numpy")
def next_exp(state):
    """Standard exponential variate ``-log(U)``, U in (0, 1]."""
    return -np.log(next_uniform_open0(state))
