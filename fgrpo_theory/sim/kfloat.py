"""Precision-generic Numba primitives: the simulator's dense path in float64 or float32.

Numba compiles a function once per argument type, so a primitive written once over the logits'
dtype serves both precisions as long as its scalars take that dtype too: :func:`_like` casts a
scalar to an array's dtype (a no-op for float64, so float64 kernels are unchanged bit for bit),
:func:`_as_f64` gives a float64 view or copy of the logits (metrics are always float64), and
:func:`_vexp` picks the vectorized ``exp(z - m)`` of the array's precision at compile time:
float64 :func:`~.kcore._vexp_shift` (degree 13) or float32 :func:`_vexp_shift32` (degree 7,
float32 Cody-Waite constants, 32-bit scale bits), so LLVM fills 8 lanes of a 256-bit register
instead of 4.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from ._jit import FM, jit_fast_inline

# overload implementations: separate functions (LLVM inlines them) with explicit flags, see _jit
_OPTS = {"fastmath": FM, "error_model": "numpy"}

_F = np.float32
_LOG2E32 = _F(1.4426950408889634)
# Cody-Waite split of log(2) for float32 (Cephes expf): _LN2_HI32 has 9 significant bits, so
# n * _LN2_HI32 is exact for |n| <= 2**15
_LN2_HI32 = _F(0.693359375)
_LN2_LO32 = _F(-2.12194440e-4)
#: exp arguments below this give 0 (exp(-87) = 1.6e-38 is still a normal float32)
X_MIN32 = -87.0
_XMIN32 = _F(X_MIN32)
_HALF32 = _F(0.5)
_B127 = _F(127.0)
_P23 = _F(8388608.0)  # 2**23
_ZERO32 = _F(0.0)
# Taylor coefficients 1/k!, k = 0..7: on |r| <= log(2)/2 the truncation error is r^8/8! < 5.2e-9
# relative (0.04 ulp of float32); the rest is float32 rounding of the Horner steps
_G0 = _F(1.0)
_G1 = _F(1.0)
_G2 = _F(1.0 / 2)
_G3 = _F(1.0 / 6)
_G4 = _F(1.0 / 24)
_G5 = _F(1.0 / 120)
_G6 = _F(1.0 / 720)
_G7 = _F(1.0 / 5040)


@jit_fast_inline
def _vexp_shift32(z, e, m, ibuf, sc):
    """Float32 ``e = exp(z - m)`` for ``z <= m`` (``z``, ``e`` float32, ``m`` float32).

    Cody-Waite reduction with float32 constants and a degree-7 Taylor polynomial; the scale
    ``2**n`` is built as float32 exponent bits in the first K int32 slots of ``ibuf`` (an int64
    buffer of length K; ``sc`` unused). Arguments below -87 give 0. Error against float64
    ``numpy.exp`` rounded to float32: <= 2 ulp on [-87, 0] (tests/test_sim_float32.py).
    """
    K = z.shape[0]
    ib = ibuf.view(np.int32)
    s32 = ib.view(np.float32)
    for i in range(K):
        x0 = z[i] - m
        x = x0 if x0 > _XMIN32 else _XMIN32
        n = np.floor(x * _LOG2E32 + _HALF32)
        r = (x - n * _LN2_HI32) - n * _LN2_LO32
        p = _G7
        p = p * r + _G6
        p = p * r + _G5
        p = p * r + _G4
        p = p * r + _G3
        p = p * r + _G2
        p = p * r + _G1
        p = p * r + _G0
        e[i] = p if x0 > _XMIN32 else _ZERO32
        ib[i] = np.int32((n + _B127) * _P23)  # exponent bits of 2**n (exact in float32)
    for i in range(K):
        e[i] *= s32[i]


def _vexp(z, e, m, ibuf, sc):  # pragma: no cover - replaced by the overload in compiled code
    """``exp(z - m)`` into ``e`` in the precision of ``z`` (compile-time choice)."""
    raise NotImplementedError


@overload(_vexp, jit_options=_OPTS)
def _vexp_ov(z, e, m, ibuf, sc):
    from .kcore import _vexp_shift

    if isinstance(z, types.Array) and z.dtype == types.float32:
        return lambda z, e, m, ibuf, sc: _vexp_shift32(z, e, m, ibuf, sc)
    return lambda z, e, m, ibuf, sc: _vexp_shift(z, e, m, ibuf, sc)


def _like(a, x):  # pragma: no cover
    """``x`` cast to the dtype of array ``a`` (float32 or float64; a no-op for float64)."""
    raise NotImplementedError


@overload(_like, jit_options=_OPTS)
def _like_ov(a, x):
    if isinstance(a, types.Array) and a.dtype == types.float32:
        return lambda a, x: np.float32(x)
    return lambda a, x: x


def _as_f64(z):  # pragma: no cover
    """``z`` itself if float64, else a float64 copy (metrics are computed in float64)."""
    raise NotImplementedError


@overload(_as_f64, jit_options=_OPTS)
def _as_f64_ov(z):
    if isinstance(z, types.Array) and z.dtype == types.float64:
        return lambda z: z
    return lambda z: z.astype(np.float64)


_B32 = 64  # float32 weights summed per block in float32 lanes before a float64 accumulation


@jit_fast_inline
def _sum8_32(e):
    """Sum of float32 ``e``: blocks of 64 summed in 8 interleaved float32 lanes (8 terms each,
    so a block's relative rounding error is <= 11 float32 ulps, ~7e-7, whatever K), block totals
    accumulated in float64. A fixed order (bit-reproducible) that vectorizes; converting every
    term to float64 instead measured 2x slower than the float64 sum."""
    K = e.shape[0]
    s = 0.0
    K64 = K - K % _B32
    for b in range(0, K64, _B32):
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = _ZERO32
        for i in range(b, b + _B32, 8):
            a0 += e[i]
            a1 += e[i + 1]
            a2 += e[i + 2]
            a3 += e[i + 3]
            a4 += e[i + 4]
            a5 += e[i + 5]
            a6 += e[i + 6]
            a7 += e[i + 7]
        s += np.float64(((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)))
    for i in range(K64, K):
        s += np.float64(e[i])
    return s


def _sumv(e):  # pragma: no cover
    """Sum of the weights ``e`` in float64: :func:`~.kcore._sum8` or :func:`_sum8_32`."""
    raise NotImplementedError


@overload(_sumv, jit_options=_OPTS)
def _sumv_ov(e):
    from .kcore import _sum8

    if isinstance(e, types.Array) and e.dtype == types.float32:
        return lambda e: _sum8_32(e)
    return lambda e: _sum8(e)
