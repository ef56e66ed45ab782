"""A binary sum tree over ``exp(z - shift)`` for O(log K) sampling and updates.

Layout: ``tree`` has ``2P`` slots (``P`` = the smallest power of two >= K); leaf ``k`` is slot
``P + k`` (padding leaves are 0) and slot ``j`` holds ``tree[2j] + tree[2j+1]``; the root
``tree[1]`` is the total. :func:`tree_set` recomputes every ancestor from its two children, so
internal sums never drift from the leaves however many updates are made.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit_exact, jit_exact_inline

__all__ = ["tree_build", "tree_set", "tree_find", "tree_find_lanes", "tree_leaf_range"]

_TWO_M40 = 2.0**-40  # margin of tree_leaf_range, relative to the total


@jit_exact
def tree_build(z, tree, P):
    """Fill leaves with ``exp(z - max z)`` and all parents; return the shift ``max z``."""
    K = z.shape[0]
    m = z[0]
    for i in range(1, K):
        if z[i] > m:
            m = z[i]
    for i in range(K):
        tree[P + i] = np.exp(z[i] - m)
    for i in range(P + K, 2 * P):
        tree[i] = 0.0
    for j in range(P - 1, 0, -1):
        tree[j] = tree[2 * j] + tree[2 * j + 1]
    return m


@jit_exact_inline
def tree_set(tree, P, k, w):
    """Set leaf ``k`` to ``w`` and recompute its ancestors."""
    j = P + k
    tree[j] = w
    j >>= 1
    while j >= 1:
        tree[j] = tree[2 * j] + tree[2 * j + 1]
        j >>= 1


@jit_exact_inline
def tree_find(tree, P, t):
    """First leaf whose prefix sum exceeds ``t`` (the inverse CDF), for ``0 <= t < tree[1]``.

    Never returns a zero-weight leaf: at the top end, where rounding can push ``t`` past the last
    positive leaf, it descends left. (A branch-free descent was measured 1.7x slower at K = 6:
    it serializes the loads that speculation overlaps.)
    """
    j = 1
    while j < P:
        left = tree[2 * j]
        if t < left or tree[2 * j + 1] == 0.0:
            j = 2 * j
        else:
            t -= left
            j = 2 * j + 1
    return j - P


@jit_exact_inline
def tree_find_lanes(tree, P, tb, jb, m):
    """:func:`tree_find` of the targets ``tb[:m]`` at once, leaves into ``jb[:m]`` (``tb`` is
    consumed).

    The same comparisons and subtractions as :func:`tree_find`, so the same leaves bit for bit,
    but level by level over the lanes with selects instead of branches: the lanes' descents are
    independent, so the processor overlaps their loads, and no branch can be mispredicted. That
    wins when the draws are spread over several leaves (random descents mispredict half their
    branches); when nearly every draw takes the same path, :func:`tree_find`'s predicted
    branches win.
    """
    for i in range(m):
        jb[i] = 1
    h = 1
    while h < P:
        for i in range(m):
            j = jb[i]
            t = tb[i]
            left = tree[2 * j]
            right = (t >= left) & (tree[2 * j + 1] != 0.0)
            tb[i] = t - left if right else t
            jb[i] = 2 * j + right
        h *= 2
    for i in range(m):
        jb[i] -= P


@jit_exact
def tree_leaf_range(tree, P, k):
    """``(lo, hi)`` such that :func:`tree_find` returns leaf ``k`` for every target
    ``lo <= t <= hi`` (``lo > hi``: none known), so a draw there needs no descent.

    The descent is monotone in ``t`` (at every node a larger target goes the same way or right,
    and rounding is monotone), so leaf ``k``'s targets form an interval near
    ``[S, S + w_k)``, ``S`` the sum of the leaves before ``k``, whose ends differ from the
    floating-point ``S`` and ``S + w_k`` by the tree's roundings (a few ulps of the total). The
    range returned is ``[S + d, S + w_k - d]``, ``d = 2**-40`` of the total, and only if both of
    its ends descend to ``k`` (two descents): then, by monotonicity, every target between does.
    """
    total = tree[1]
    S = 0.0  # the leaves before k, from the tree: the left siblings on the way up
    j = P + k
    while j > 1:
        if j & 1:
            S += tree[j - 1]
        j >>= 1
    d = total * _TWO_M40
    lo = S + d
    hi = S + tree[P + k] - d
    if lo <= hi and tree_find(tree, P, lo) == k and tree_find(tree, P, hi) == k:
        return lo, hi
    return 1.0, 0.0
