"""Counter-based random numbers for the simulator (SplitMix64 output function).

Each run owns a 64-bit key derived from the user's seed and the run index; its i-th random word is
``mix64(key + i * GOLDEN)`` (the SplitMix64 generator written as a counter-based one). Runs never
share state, so results do not depend on how runs are scheduled over threads, and a rerun with
the same seed gives bit-identical numbers.

The key deliberately does NOT depend on the other config fields: two configs that differ only in,
say, ``gamma`` or ``algo`` see the same random words (common random numbers). This makes paired
comparisons sharper and lets tests check exact identities such as "focal gamma = 0 equals vanilla"
and "CISPO with one inner update equals log-prob GRPO" bit for bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["run_keys", "mix64_py", "next_u64", "next_uniform", "next_uniform_open0", "next_exp"]

_MASK = (1 << 64) - 1
_GOLDEN_PY = 0x9E3779B97F4A7C15
_M1_PY = 0xBF58476D1CE4E5B9
_M2_PY = 0x94D049BB133111EB

GOLDEN = np.uint64(_GOLDEN_PY)
M1 = np.uint64(_M1_PY)
M2 = np.uint64(_M2_PY)
S30 = np.uint64(30)
S27 = np.uint64(27)
S31 = np.uint64(31)
S11 = np.uint64(11)
ONE = np.uint64(1)
INV53 = 1.0 / 9007199254740992.0  # 2**-53


def mix64_py(x: int) -> int:
    """SplitMix64 finalizer on Python ints (used to derive keys; mirrors the Numba version)."""
    x &= _MASK
    x = ((x ^ (x >> 30)) * _M1_PY) & _MASK
    x = ((x ^ (x >> 27)) * _M2_PY) & _MASK
    return x ^ (x >> 31)


def run_keys(seed: int, n_runs: int) -> np.ndarray:
    """Keys of runs ``0 .. n_runs-1`` for user seed ``seed`` (uint64 array).

    ``key_r = mix64(mix64(seed) ^ mix64(r + GOLDEN))``; distinct seeds or run indices give
    unrelated keys.
    """
    base = mix64_py(int(seed) & _MASK)
    keys = [mix64_py(base ^ mix64_py((r + _GOLDEN_PY) & _MASK)) for r in range(n_runs)]
    return np.array(keys, dtype=np.uint64)


@njit(cache=True, inline="always")
def _mix64(x):
    x = (x ^ (x >> S30)) * M1
    x = (x ^ (x >> S27)) * M2
    return x ^ (x >> S31)


@njit(cache=True, inline="always")
def next_u64(state):
    """Next 64-bit word of the stream ``state = [key, counter]`` (uint64 array, advanced)."""
    c = state[1] + ONE
    state[1] = c
    return _mix64(state[0] + c * GOLDEN)


@njit(cache=True, inline="always")
def next_uniform(state):
    """Uniform double in [0, 1) with 53 random bits."""
    return float(next_u64(state) >> S11) * INV53


@njit(cache=True, inline="always")
def next_uniform_open0(state):
    """Uniform double in (0, 1] with 53 random bits (safe argument for ``log``)."""
    return (float(next_u64(state) >> S11) + 1.0) * INV53


@njit(cache=True, inline="always")
def next_exp(state):
    """Standard exponential variate ``-log(U)``, U in (0, 1]."""
    return -np.log(next_uniform_open0(state))
