"""Sampled groups, stored sparsely as distinct actions and their counts (theory.md section 5)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import softmax

from .._validate import check_int_array, check_seed, fail
from ._checks import check_logits, check_N

__all__ = ["Group", "make_group", "sample_group"]


class Group(NamedTuple):
    """A sampled group, sparse: the distinct sampled actions and how often each was drawn.

    Attributes
    ----------
    actions : numpy.ndarray of int64
        Distinct action indices, sorted.
    counts : numpy.ndarray of int64
        Number of draws of each action (>= 1); ``N = counts.sum()``.
    """

    actions: np.ndarray
    counts: np.ndarray

    @property
    def N(self) -> int:
        """Group size (number of draws)."""
        return int(self.counts.sum())


def make_group(
    actions: ArrayLike, counts: ArrayLike | None = None, *, n_actions: int, name: str = "group"
) -> Group:
    """Build a :class:`Group` from action indices and counts, or from a list of draws.

    Parameters
    ----------
    actions : array_like of int
        Action indices in ``[0, n_actions)``. Without ``counts`` this is the list of the N draws
        (repeats allowed); with ``counts`` the indices must be distinct.
    counts : array_like of int, optional
        Number of draws of each listed action, each >= 1.
    n_actions : int
        Number of actions K of the policy.
    name : str
        Parameter name for error messages.

    Returns
    -------
    Group

    Examples
    --------
    >>> make_group([3, 0, 3], n_actions=5)
    Group(actions=array([0, 3]), counts=array([1, 2]))
    """
    a = check_int_array(name, actions, lo=0, hi=int(n_actions) - 1).ravel()
    if counts is None:
        uniq, cnt = np.unique(a, return_counts=True)
        return Group(uniq.astype(np.int64), cnt.astype(np.int64))
    c = check_int_array(f"{name} counts", counts, lo=1).ravel()
    if c.shape != a.shape:
        fail(f"{name} counts", f"{c.size} counts", f"one count per action ({a.size})")
    order = np.argsort(a, kind="stable")
    a, c = a[order], c[order]
    dup = a[1:] == a[:-1]
    if dup.any():
        fail(name, int(a[1:][dup][0]), "a list of distinct actions when counts are given")
    return Group(a, c)


def sample_group(logits: ArrayLike, N: int, seed: int | np.random.Generator | None = None) -> Group:
    """Draw a group of N i.i.d. actions from ``softmax(logits)``, returned sparsely.

    Uses inverse-CDF sampling (O(K) setup, O(N log K) draws), so N = 131,072 draws from the
    paper's 128,000-action policy never build a K x N array.

    Parameters
    ----------
    logits : array_like, shape (K,)
    N : int
        Group size, in [1, :data:`~fgrpo_theory.mass.MAX_GROUP_SIZE`] (2**20; about 40 bytes per
        draw, larger groups are refused before allocating).
    seed : int, numpy.random.Generator or None
        Seed or generator (``numpy.random.default_rng(seed)``).

    Returns
    -------
    Group
    """
    z = check_logits(logits)
    N = check_N(N)
    p = softmax(z)
    rng = np.random.default_rng(check_seed(seed))
    draws = draw(np.cumsum(p), rng, (N,))
    return make_group(draws, n_actions=z.size)


def draw(cdf: np.ndarray, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Inverse-CDF draws of action indices (private helper of the package)."""
    u = rng.random(shape) * cdf[-1]
    idx = np.searchsorted(cdf, u, side="right")
    return np.minimum(idx, cdf.size - 1)
