"""The dense path's float32 primitives (``SimConfig.precision = "float32"``, docs/precision.md)
and the compile-time dispatchers that pick them for float32 logits.

Numba compiles a kernel once per argument type. The run loop (:func:`~.kernels.run_steps`) calls
the dispatchers :func:`_exp_v`, :func:`_draw_v`, :func:`_sgd_v`, :func:`_adam_v` (helpers inlined
at Numba IR level that branch on :func:`_is_f32`, a compile-time constant, so LLVM keeps one
branch: for float64 logits the unchanged float64 primitive of :mod:`.kcore`, bit for bit and at
the same speed) and :func:`_as_f64` (the metrics' float64 logits). The float32 branch goes
through entry points (``_*32_entry``) that are empty stubs for float64 arrays, so float64 kernels
do not compile float32 code. Float32 primitives:

* :func:`_exp_blocks32`: ``e = exp(z - m)`` (a degree-7 polynomial with float32 Cody-Waite
  constants; the scale ``2**n`` is the float32 whose exponent bits are ``n + 127``,
  :func:`_f32_from_bits`) fused with the sums of blocks of 64 weights (8 float32 lanes of 8
  terms, a fixed order) and their float64 prefix sums, the block CDF of the i.i.d. sampler; the
  total weight is the last prefix. One pass over the logits where float64 makes three.
* :func:`_draw32`: the i.i.d. sampler's binary search over that block CDF and a float64 walk
  inside the block; the sorted sampler with a float64 running CDF and exponential spacings from
  a vectorized ``-log`` (:func:`_gaps32`, :func:`_neg_log`).
* :func:`_adam32`, :func:`_sgd32`: the optimizer loops with float32 scalars (twice the vector
  lanes of float64); the step's scalars are computed in float64 and rounded once, and AdamW's
  decay ``lr wd z`` is part of the increment (rounded once with the Adam move), never a factor
  ``1 - lr wd`` rounded to float32.

Sums never run in float32 beyond 64 terms, so their relative error (<= 11 float32 roundings,
~7e-7) does not grow with K; every logged metric is computed in float64 from the float32 logits.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from ._jit import FM, _f64_bits, _f64_from_bits, jit_elementwise, jit_fast, jit_fast_inline
from .kcore import (
    _BLOCK,
    SAMPLER_IID,
    _adam,
    _adam_scalars,
    _block_find,
    _exp_shift,
    _nonzero_below,
    _sample_iid,
    _sample_sorted,
    _sgd,
    _tally,
    _walk,
)
from .rng import next_uniform, uniform_open0_at

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
#: actions per block of the block CDF (the i.i.d. sampler's _BLOCK)
_B32 = _BLOCK  # the block CDF must be the one _block_find searches


@intrinsic
def _f32_from_bits(typingctx, bits):
    """The float32 whose bit pattern is the low 32 bits of the integer ``bits`` (a register
    reinterpretation, so the loop that uses it still vectorizes)."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.trunc(args[0], ir.IntType(32)), ir.FloatType())

    return types.float32(bits), codegen


@jit_fast_inline
def _exp32(x0):
    """Float32 ``exp(x0)`` for ``x0 <= 0``: Cody-Waite reduction ``x = n log 2 + r``, a
    degree-7 Taylor polynomial, times ``2**n`` built from its exponent bits. Arguments below -87
    give 0. Error against float64 ``numpy.exp`` rounded to float32: <= 2 ulp on [-87, 0]
    (tests/test_sim_float32.py)."""
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
    s = _f32_from_bits((np.int32(n) + np.int32(127)) << np.int32(23))
    return p * s if x0 > _XMIN32 else _ZERO32


@jit_fast_inline
def _block_sum32(zb, eb, m):
    """``eb = exp(zb - m)`` for one block of 64 actions; returns its float32 sum in 8 lanes of 8
    terms (a fixed order). Slices, so every index counts from 0 (LLVM then vectorizes: with a
    block offset the index's negative-wraparound select turned the loads into gathers)."""
    for i in range(_B32):
        eb[i] = _exp32(zb[i] - m)
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = _ZERO32
    for i in range(0, _B32, 8):
        a0 += eb[i]
        a1 += eb[i + 1]
        a2 += eb[i + 2]
        a3 += eb[i + 3]
        a4 += eb[i + 4]
        a5 += eb[i + 5]
        a6 += eb[i + 6]
        a7 += eb[i + 7]
    return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))


@jit_fast_inline
def _exp_blocks32(z, e, m, cum):
    """``e = exp(z - m)`` (float32, ``m = max z``) and the block CDF: ``cum[b]`` = the float64
    sum of the weights of blocks ``0..b`` of 64 actions, each block summed in 8 float32 lanes of
    8 terms (a fixed order: bit-reproducible). Returns the total weight ``cum[nb - 1]``."""
    K = z.shape[0]
    nf = K // _B32
    acc = 0.0
    for b in range(nf):
        lo = b * _B32
        acc += np.float64(_block_sum32(z[lo : lo + _B32], e[lo : lo + _B32], m))
        cum[b] = acc
    if nf * _B32 < K:  # the last, partial block
        for i in range(nf * _B32, K):
            v = _exp32(z[i] - m)
            e[i] = v
            acc += np.float64(v)
        cum[nf] = acc
    return acc


@jit_fast_inline
def _draw32(sampler, e, S, cum, gaps, correct, N, state, cnt, touched):
    """N draws from float32 weights ``e`` (total ``S``); returns (distinct actions, X).

    i.i.d.: the inverse CDF of the same uniforms as the float64 sampler, by binary search over
    the block CDF ``cum`` of :func:`_exp_blocks32` and a float64 walk inside the block.
    Sorted (chosen for large N): exponential spacings (:func:`_gaps32`, no libm log) merged
    with a float64 running CDF, as :func:`~.kcore._sample_sorted`.
    """
    K = e.shape[0]
    nd = 0
    X = 0
    if sampler == SAMPLER_IID:
        nb = (K + _B32 - 1) // _B32
        for _ in range(N):
            k = _block_find(e, cum, nb, next_uniform(state) * S)
            nd, X = _tally(_nonzero_below(e, k), nd, X, touched, cnt, correct)
        return nd, X
    _gaps32(state, gaps, N + 1)
    scale = S / gaps[N]
    k = 0
    ck = np.float64(e[0])
    for j in range(N):
        t = gaps[j] * scale
        k, ck = _walk(e, k, ck, t, K - 1)
        nd, X = _tally(_nonzero_below(e, k), nd, X, touched, cnt, correct)
    return nd, X


_LN2 = 0.6931471805599453
_SQRT2 = 1.4142135623730951
_MANT = (1 << 52) - 1
_ONE_BITS = 1023 << 52


@jit_fast_inline
def _neg_log(u):
    """``-log(u)`` for a normal ``u > 0`` with absolute error < 1e-12 (tests), in
    operations LLVM vectorizes (no libm call): ``u = 2^n m``, ``m`` in ``[sqrt(2)/2, sqrt(2))``,
    ``log m = 2 atanh(s)``, ``s = (m - 1) / (m + 1)``, ``|s| <= 0.172``, odd series to
    ``s^15`` (truncation < 5e-13)."""
    b = _f64_bits(u)
    n = (b >> 52) - 1023
    m = _f64_from_bits((b & _MANT) | _ONE_BITS)
    big = m > _SQRT2
    m = m * 0.5 if big else m
    n = n + 1 if big else n
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    p = 1.0 / 15.0
    p = p * s2 + 1.0 / 13.0
    p = p * s2 + 1.0 / 11.0
    p = p * s2 + 1.0 / 9.0
    p = p * s2 + 1.0 / 7.0
    p = p * s2 + 1.0 / 5.0
    p = p * s2 + 1.0 / 3.0
    p = p * s2 + 1.0
    return -(n * _LN2 + 2.0 * s * p)


@jit_fast_inline
def _gaps32(state, gaps, n):
    """``gaps[i]`` = the partial sums of ``n`` standard exponentials ``-log U`` (``U`` in
    (0, 1], the stream's next ``n`` words, as :func:`~.rng.next_exp` draws them), with
    :func:`_neg_log`: the words and logs in one loop LLVM vectorizes, then the sums."""
    key = state[0]
    c0 = state[1]
    for i in range(n):
        gaps[i] = _neg_log(uniform_open0_at(key, c0 + np.uint64(i + 1)))
    state[1] = c0 + np.uint64(n)
    acc = 0.0
    for i in range(n):
        acc += gaps[i]
        gaps[i] = acc


@jit_elementwise
def _sgd32(z, e, inv_s, cvec, C, inv_n, lr, wd):
    """:func:`~.kcore._sgd` with float32 logits: ``z += lr ((c - p C) / N - wd z)``, its
    scalars rounded to float32 once."""
    pc = _F(inv_s * C * inv_n)
    cn = _F(inv_n)
    lr32 = _F(lr)
    wd32 = _F(wd)
    for i in range(z.shape[0]):
        zi = z[i]
        g = cvec[i] * cn - e[i] * pc - wd32 * zi
        z[i] = zi + lr32 * g


@jit_fast  # not jit_elementwise: reassociation would undo the one rounding of the increment
def _adam32(z, e, inv_s, cvec, C, inv_n, lr, wd, decoupled, b1, b2, eps, t, mm, vv):
    """:func:`~.kcore._adam` with float32 logits and moments: the step's scalars
    (:func:`~.kcore._adam_scalars`) in float64, rounded to float32 once; the loop in float32."""
    sc = _adam_scalars(lr, wd, decoupled, b1, b2, eps, t)
    b1f = _F(sc[0])
    b2f = _F(sc[1])
    a1f = _F(sc[2])
    a2f = _F(sc[3])
    epsf = _F(sc[4])
    stepf = _F(sc[5])
    isbf = _F(sc[6])
    # AdamW's decay as z - (lr wd z + step), one rounding of the whole increment: the factor
    # 1 - lr wd rounded to float32 is 1 for lr wd < 3e-8 (no decay at all) and off by up to
    # 2**-25 above, and a decay rounded on its own vanishes below half an ulp of z
    lwdf = _F(lr * wd) if decoupled else _ZERO32
    l2f = _F(sc[8])
    pc = _F(inv_s * C * inv_n)
    cn = _F(inv_n)
    for i in range(z.shape[0]):  # no reduction here: it would block vectorization
        zi = z[i]
        g = e[i] * pc - cvec[i] * cn + l2f * zi  # gradient of the loss -J
        m = b1f * mm[i] + a1f * g
        v = b2f * vv[i] + a2f * g * g
        mm[i] = m
        vv[i] = v
        z[i] = zi - (lwdf * zi + stepf * m / (np.sqrt(v) * isbf + epsf))


def _is32_type(a) -> bool:
    return isinstance(a, types.Array) and a.dtype == types.float32


@intrinsic
def _is_f32(typingctx, a):
    """Whether ``a`` is a float32 array: a compile-time constant (LLVM deletes the branch not
    taken, so each precision compiles to its own code only)."""
    val = _is32_type(a)

    def codegen(context, builder, signature, args):
        return context.get_constant(types.boolean, val)

    return types.boolean(a), codegen


# Dispatchers, inlined into the run loop at Numba IR level (like every per-step helper). The
# condition is a constant, so for float64 logits the code is the float64 primitive's alone.
# (Not @overload(inline="always"): Numba cannot inline a typed overload whose body has a
# variable defined on one branch only, as kcore._sample_iid does, and for the others it warns
# NumbaIRAssumptionWarning; without inline="always" the overload is a call, which measured
# 12-15 % slower per step at K = 128,000.) Both branches are typed and compiled before LLVM
# drops one, so the float32 branch goes through the entry points below: for float32 they call
# the float32 primitive (one call per step, not per element), for float64 they are empty stubs,
# so a float64 kernel does not compile the float32 code (a cold compile of the dense kernel took
# 12.6 s before the float32 mode, 18.4 s with the float32 code typed for float64 logits).

_OPTS = {"fastmath": FM, "error_model": "numpy"}


def _exp32_entry(z, e, m, cum):  # pragma: no cover - compiled code only (the overload below)
    raise NotImplementedError


@overload(_exp32_entry, jit_options=_OPTS)
def _exp32_entry_ov(z, e, m, cum):
    if _is32_type(z):

        def impl(z, e, m, cum):
            return _exp_blocks32(z, e, m, cum)

        return impl

    def stub(z, e, m, cum):
        return 0.0

    return stub


def _draw32_entry(sampler, e, S, cum, gaps, correct, N, state, cnt, touched):  # pragma: no cover
    raise NotImplementedError


@overload(_draw32_entry, jit_options=_OPTS)
def _draw32_entry_ov(sampler, e, S, cum, gaps, correct, N, state, cnt, touched):
    if _is32_type(e):

        def impl(sampler, e, S, cum, gaps, correct, N, state, cnt, touched):
            return _draw32(sampler, e, S, cum, gaps, correct, N, state, cnt, touched)

        return impl

    def stub(sampler, e, S, cum, gaps, correct, N, state, cnt, touched):
        return 0, 0

    return stub


def _sgd32_entry(z, e, inv_s, cvec, C, inv_n, lr, wd):  # pragma: no cover
    raise NotImplementedError


@overload(_sgd32_entry, jit_options=_OPTS)
def _sgd32_entry_ov(z, e, inv_s, cvec, C, inv_n, lr, wd):
    if _is32_type(z):

        def impl(z, e, inv_s, cvec, C, inv_n, lr, wd):
            _sgd32(z, e, inv_s, cvec, C, inv_n, lr, wd)

        return impl

    def stub(z, e, inv_s, cvec, C, inv_n, lr, wd):
        pass

    return stub


def _adam32_entry(z, e, inv_s, cvec, C, inv_n, lr, wd, dec, b1, b2, eps, t, mm, vv):  # noqa: E501  # pragma: no cover
    raise NotImplementedError


@overload(_adam32_entry, jit_options=_OPTS)
def _adam32_entry_ov(z, e, inv_s, cvec, C, inv_n, lr, wd, dec, b1, b2, eps, t, mm, vv):
    if _is32_type(z):

        def impl(z, e, inv_s, cvec, C, inv_n, lr, wd, dec, b1, b2, eps, t, mm, vv):
            _adam32(z, e, inv_s, cvec, C, inv_n, lr, wd, dec, b1, b2, eps, t, mm, vv)

        return impl

    def stub(z, e, inv_s, cvec, C, inv_n, lr, wd, dec, b1, b2, eps, t, mm, vv):
        pass

    return stub


@jit_fast_inline
def _exp_v(z, e, m, ibuf, sc):
    """``e = exp(z - m)``; returns ``sum(e)``. Float32: also the block CDF into ``sc``."""
    if _is_f32(z):
        return _exp32_entry(z, e, m, sc)
    return _exp_shift(z, e, m, ibuf, sc)


@jit_fast_inline
def _draw_v(sampler, e, S, cum, gaps, correct, N, state, cnt, touched, sc):
    """N draws with the dense path's sampler; returns (distinct actions, correct draws X).
    Float32 reads the block CDF from ``sc`` (see :func:`_exp_v`)."""
    if _is_f32(e):
        return _draw32_entry(sampler, e, S, sc, gaps, correct, N, state, cnt, touched)
    if sampler == SAMPLER_IID:
        return _sample_iid(e, cum, correct, N, state, cnt, touched)
    return _sample_sorted(e, S, gaps, correct, N, state, cnt, touched)


@jit_fast_inline
def _sgd_v(z, e, inv_s, cvec, C, inv_n, lr, wd):
    """One SGD step of the dense path in the logits' precision."""
    if _is_f32(z):
        _sgd32_entry(z, e, inv_s, cvec, C, inv_n, lr, wd)
    else:
        _sgd(z, e, inv_s, cvec, C, inv_n, lr, wd)


@jit_fast_inline
def _adam_v(z, e, inv_s, cvec, C, inv_n, lr, wd, dec, b1, b2, eps, t, mm, vv):
    """One Adam / AdamW step of the dense path in the logits' precision."""
    if _is_f32(z):
        _adam32_entry(z, e, inv_s, cvec, C, inv_n, lr, wd, dec, b1, b2, eps, t, mm, vv)
    else:
        _adam(z, e, inv_s, cvec, C, inv_n, lr, wd, dec, b1, b2, eps, t, mm, vv)


def _as_f64(z):  # pragma: no cover
    """``z`` itself if float64, else a float64 copy (metrics are computed in float64)."""
    raise NotImplementedError


@overload(_as_f64, inline="always")
def _as_f64_ov(z):
    if isinstance(z, types.Array) and z.dtype == types.float32:

        def impl32(z):
            return z.astype(np.float64)

        return impl32

    def impl(z):
        return z

    return impl
