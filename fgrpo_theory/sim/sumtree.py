"""A binary sum tree over ``exp(z - shift)`` for O(log K) sampling and updates.

Layout: ``tree`` has ``2P`` slots (``P`` = the smallest power of two >= K); leaf ``k`` is slot
``P + k`` (padding leaves are 0) and slot ``j`` holds ``tree[2j] + tree[2j+1]``; the root
``tree[1]`` is the total. :func:`tree_set` recomputes every ancestor from its two children, so
internal sums never drift from the leaves however many updates are made.

The functions are defined in :mod:`.kernels` (Numba's cache only notices edits to a kernel's own
file, so everything the kernels inline lives there) and re-exported here.
"""

from __future__ import annotations

from .kernels import tree_build, tree_find, tree_set

__all__ = ["tree_build", "tree_set", "tree_find"]
