"""Numba side of the counter-based random streams (see :mod:`.keys` for the scheme).

The functions are defined in :mod:`.kernels` (Numba's cache only notices edits to a kernel's own
file, so everything the kernels inline lives there) and re-exported here.
"""

from __future__ import annotations

from .kernels import next_exp, next_u64, next_uniform, next_uniform_open0

__all__ = ["next_u64", "next_uniform", "next_uniform_open0", "next_exp"]
