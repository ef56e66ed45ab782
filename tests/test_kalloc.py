"""``sim.kalloc.empty`` / ``zeros`` against ``np.empty`` / ``np.zeros`` compiled by Numba (the
oracle): the same types, shapes, strides, alignment, contents of ``zeros`` and errors."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from fgrpo_theory.sim.kalloc import empty, zeros


@numba.njit
def _ours(n, m, like):
    return (
        empty(n, np.float64), zeros((n, m), np.int64), zeros(n, np.bool_),
        zeros(m, like.dtype), empty((n, m, 2), np.uint8), empty(like.shape, like.dtype),
    )  # fmt: skip


@numba.njit
def _numbas(n, m, like):
    return (
        np.empty(n, np.float64), np.zeros((n, m), np.int64), np.zeros(n, np.bool_),
        np.zeros(m, like.dtype), np.empty((n, m, 2), np.uint8), np.empty_like(like),
    )  # fmt: skip


@pytest.mark.parametrize("n, m", [(0, 0), (1, 5), (7, 3), (1000, 17)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_the_arrays_are_numbas(n, m, dtype):
    like = np.arange(m, dtype=dtype)
    ours, numbas = _ours(n, m, like), _numbas(n, m, like)
    assert [numba.typeof(a) for a in ours] == [numba.typeof(a) for a in numbas]
    for a, b in zip(ours, numbas, strict=True):
        assert (a.shape, a.strides, a.dtype, a.flags.c_contiguous, a.flags.owndata) == (
            b.shape, b.strides, b.dtype, b.flags.c_contiguous, b.flags.owndata
        )  # fmt: skip
        assert a.ctypes.data % 32 == 0 or a.size == 0  # Numba's alignment for these dtypes
    for i in (1, 2, 3):  # zeros: every byte 0
        assert ours[i].tobytes() == bytes(ours[i].nbytes)


@pytest.mark.parametrize(
    ("n", "m", "message"),
    [(-1, 2, "negative dimensions not allowed"), (2**62, 4, "array is too big")],
)
def test_the_errors_are_numbas(n, m, message):
    like = np.zeros(1)
    for fn in (_ours, _numbas):
        with pytest.raises(ValueError, match=message):
            fn(n, m, like)


@numba.njit
def _ours_shapes(n, m):
    return empty((np.int32(n), m), np.float64), zeros((), np.int64), zeros((np.int32(n),), np.uint8)


@numba.njit
def _numbas_shapes(n, m):
    return (
        np.empty((np.int32(n), m), np.float64), np.zeros((), np.int64),
        np.zeros((np.int32(n),), np.uint8),
    )  # fmt: skip


def test_mixed_integer_and_empty_shapes_are_numbas():
    ours, numbas = _ours_shapes(3, 4), _numbas_shapes(3, 4)
    assert [numba.typeof(a) for a in ours] == [numba.typeof(a) for a in numbas]
    for a, b in zip(ours, numbas, strict=True):
        assert (a.shape, a.strides, a.dtype) == (b.shape, b.strides, b.dtype)
    assert ours[1][()] == 0 and ours[2].tobytes() == bytes(3)


def test_an_untyped_call_is_refused():
    @numba.njit
    def bad(n):
        return empty(n, "float64")

    with pytest.raises(numba.TypingError):
        bad(3)
