"""Argument checks and output shaping shared by the modules of :mod:`fgrpo_theory.mass`."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .._validate import check_array, check_int_array, fail

#: Largest group size N accepted anywhere in :mod:`fgrpo_theory.mass` (8 x the paper's largest
#: N = 131,072). Sampling one group costs about 40 bytes per draw and a Monte Carlo group about
#: 250 bytes per draw, so N = 2**20 peaks near 300 MB; larger groups are refused before any
#: allocation.
MAX_GROUP_SIZE = 2**20


def out(x: Any) -> Any:
    """A Python scalar for a 0-d result, the array otherwise."""
    arr = np.asarray(x)
    return arr.item() if arr.ndim == 0 else arr


def check_N(N: Any, name: str = "N", hi: int | None = MAX_GROUP_SIZE) -> int:
    """One group size in [1, hi] (``hi=None``: up to 2**53, for O(1)-in-N closed forms)."""
    arr = check_int_array(name, N, lo=1, hi=hi)
    if arr.ndim != 0:
        fail(name, N, "a single integer >= 1")
    return int(arr)


def check_logits(logits: ArrayLike, name: str = "logits") -> np.ndarray:
    """Finite 1-d logits (K >= 1)."""
    z = check_array(name, logits)
    if z.ndim != 1:
        fail(name, f"an array of shape {z.shape}", "a 1-d array of logits")
    return z
