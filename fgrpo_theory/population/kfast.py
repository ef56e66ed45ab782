"""Faster forms of the simulator's primitives for the population kernel, and its metrics pass.

The population kernel calls the softmax exp, the i.i.d. sampler and the exact metrics once per
prompt visit at a few dozen to a few hundred strategies, where the simulator's forms (tuned for
K = 128,000) spend their time on a scalar step of the exp and on walking the CDF draw by draw.
Each function here computes exactly the floating-point operations of its counterpart in
:mod:`fgrpo_theory.sim.kcore` (same operations, same order, same fast-math flags), reorganized so
that LLVM vectorizes it or so that fewer of them run per draw:

* :func:`_exp_shift_v`: :func:`~fgrpo_theory.sim.kcore._exp_shift` with the scale ``2**n``
  built from the bits of ``n + 1.5 * 2**52`` (a register reinterpretation) instead of a
  float-to-int64 conversion, which has no AVX2 vector instruction and kept the loop scalar;
* :func:`_draw_p`: :func:`~fgrpo_theory.sim.kcore._sample_iid` (K > 16) with the walk
  inside a block replaced by a binary search over the block's running sums, computed once per
  group in the walk's order (so the same sums decide the same action); K <= 16 takes
  :func:`~fgrpo_theory.sim.ksmall._draw_small`, float32 logits the block CDF of :func:`_exp_p`;
* :func:`_prompt_metrics_row` (not bit for bit with anything: the logged metrics): the
  simulator's metrics arithmetic (:mod:`fgrpo_theory.sim.kmetrics`: one vectorized exp per
  logit, every sum compensated) with its TwoSum lanes in vector registers (:func:`_tsum8`).

``tests/test_population_kfast.py`` compares each with its counterpart bit for bit (float64;
the float32 mode is compared with float64 within its error in
``tests/test_population_float32.py``) and the metrics pass with mpmath.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ..sim._jit import _f64_bits, _f64_from_bits, jit_fast_inline, jit_fast_leaf
from ..sim.kcore import (
    _BLOCK,
    _adam,
    _max,
    _nonzero_below,
    _sgd,
    _sum8,
    _tally,
)
from ..sim.kfloat import _adam32_entry, _exp32_entry, _is_f32, _sgd32_entry
from ..sim.kmetrics import _vexp_block
from ..sim.ksmall import _draw_small
from ..sim.rng import next_uniform

_LOG2E = 1.4426950408889634  # the constants of kcore._vexp_shift
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_E0 = 1.0
_E1 = 1.0
_E2 = 1.0 / 2
_E3 = 1.0 / 6
_E4 = 1.0 / 24
_E5 = 1.0 / 120
_E6 = 1.0 / 720
_E7 = 1.0 / 5040
_E8 = 1.0 / 40320
_E9 = 1.0 / 362880
_E10 = 1.0 / 3628800
_E11 = 1.0 / 39916800
_E12 = 1.0 / 479001600
_E13 = 1.0 / 6227020800
#: 1.5 * 2**52: for an integer-valued |n| < 2**51, the low bits of n + _MAGIC hold n
_MAGIC = 6755399441055744.0
_MAGIC_BITS = 0x4338000000000000


@jit_fast_inline
def _exp_shift_v(z, e, m):
    """``e = exp(z - m)`` (``m`` = max z); returns ``sum(e)``: kcore._exp_shift bit for bit.

    For K >= 32 the same Cody-Waite reduction, degree-13 polynomial and scale ``2**n`` as
    ``kcore._vexp_shift``; ``n`` is an integer in [-1021, 0], so ``n + 1.5 * 2**52`` is exact and
    its low bits are ``n``. The sum is ``kcore._sum8`` (8 lanes, a fixed order).
    """
    K = z.shape[0]
    if K < 32:  # as kcore._exp_shift: libm's exp
        s = 0.0
        for i in range(K):
            v = np.exp(z[i] - m)
            e[i] = v
            s += v
        return s
    for i in range(K):
        x0 = z[i] - m
        x = x0 if x0 > -708.0 else -708.0
        n = np.floor(x * _LOG2E + 0.5)
        r = (x - n * _LN2_HI) - n * _LN2_LO
        p = _E13
        p = p * r + _E12
        p = p * r + _E11
        p = p * r + _E10
        p = p * r + _E9
        p = p * r + _E8
        p = p * r + _E7
        p = p * r + _E6
        p = p * r + _E5
        p = p * r + _E4
        p = p * r + _E3
        p = p * r + _E2
        p = p * r + _E1
        p = p * r + _E0
        sc = _f64_from_bits(((_f64_bits(n + _MAGIC) - _MAGIC_BITS) + 1023) << 52)
        e[i] = (p if x0 > -708.0 else 0.0) * sc
    return _sum8(e)


@jit_fast_inline
def _block_cum(e, cum, K):
    """Block CDF ``cum[b]`` (as kcore._sample_iid builds it). Returns (number of blocks,
    total)."""
    nb = (K + _BLOCK - 1) // _BLOCK
    acc = 0.0
    for b in range(nb):
        lo = b * _BLOCK
        hi = min(lo + _BLOCK, K)
        acc += _sum8(e[lo:hi])
        cum[b] = acc
    return nb, acc


@jit_fast_inline
def _prefix_from_cum(e, cum, pre, K):
    """The running sums that kcore._walk forms inside each block of the block CDF ``cum``:
    ``pre[k] = cum[b-1] + e[lo] + ... + e[k]`` in float64, in that order (four full blocks at
    a time: independent chains)."""
    nb = (K + _BLOCK - 1) // _BLOCK
    nf = K // _BLOCK  # full blocks
    b = 0
    while b + 4 <= nf:
        lo = b * _BLOCK
        c0 = cum[b - 1] if b > 0 else 0.0
        c1 = cum[b]
        c2 = cum[b + 1]
        c3 = cum[b + 2]
        for j in range(_BLOCK):
            c0 += e[lo + j]
            c1 += e[lo + _BLOCK + j]
            c2 += e[lo + 2 * _BLOCK + j]
            c3 += e[lo + 3 * _BLOCK + j]
            pre[lo + j] = c0
            pre[lo + _BLOCK + j] = c1
            pre[lo + 2 * _BLOCK + j] = c2
            pre[lo + 3 * _BLOCK + j] = c3
        b += 4
    while b < nb:
        lo = b * _BLOCK
        c = cum[b - 1] if b > 0 else 0.0
        for k in range(lo, min(lo + _BLOCK, K)):
            c += e[k]
            pre[k] = c
        b += 1


@jit_fast_inline
def _draw_blocks(e, cum, pre, nb, total, correct, N, state, cnt, touched):
    """N draws by inverse CDF over the block CDF ``cum`` and the running sums ``pre``: a binary
    search over blocks, then the first action of the block whose running sum exceeds the
    target, or the block's last action (the sums are non-decreasing, so that is the block's
    first plus the number of sums <= the target before its last: a branch-free count)."""
    K = e.shape[0]
    nd = 0
    X = 0
    for _ in range(N):
        t = next_uniform(state) * total
        lo = 0
        hi = nb - 1
        while lo < hi:
            mid = (lo + hi) >> 1
            if cum[mid] > t:
                hi = mid
            else:
                lo = mid + 1
        a = lo * _BLOCK
        # a slice indexed from 0: with indices from a, Numba's negative-index select stays in
        # the loop and LLVM gathers the sums (vgatherqpd, 28 % of the default population's
        # kernel) instead of loading them
        pb = pre[a:]
        c = 0
        for k in range(min(_BLOCK, K - a) - 1):
            c += pb[k] <= t
        nd, X = _tally(_nonzero_below(e, a + c), nd, X, touched, cnt, correct)
    return nd, X


_F64C = types.Array(types.float64, 1, "C")


@intrinsic
def _tsum8(typingctx, vs, n, out):
    """Compensated sums of the arrays of the tuple ``vs``, each over ``[0, n)`` (``n`` a multiple
    of 8, at most every array's length): array ``s``'s element ``i`` goes to lane ``i % 8`` of
    an 8-lane vector by TwoSum (``a + x = t + err`` exactly, the errors summed in a second
    vector); the lanes go to ``out[16 s : 16 s + 8]``, the errors to ``out[16 s + 8 : 16 s +
    16]`` (:func:`_fold8`). Written as vector IR: LLVM does not vectorize a TwoSum over lanes
    held in registers, and lanes in memory cost a store and a load per element. The arrays'
    chains run side by side in one loop. No fast-math flag reaches these additions but the
    enclosing function's (``FM``: no reassociation, and there is no product to contract)."""
    if not (
        isinstance(vs, types.UniTuple)
        and vs.dtype == _F64C
        and isinstance(n, types.Integer)
        and out == _F64C
    ):
        return None
    R = vs.count

    def codegen(context, builder, signature, args):
        tup, nv, outv = args
        intp = context.get_value_type(types.intp)
        vty = ir.VectorType(ir.DoubleType(), 8)
        zero = ir.Constant(vty, None)
        data = [
            context.make_array(_F64C)(context, builder, builder.extract_value(tup, s)).data
            for s in range(R)
        ]
        lanes = [cgutils.alloca_once_value(builder, zero) for _ in range(2 * R)]
        stop = context.cast(builder, nv, signature.args[1], types.intp)
        step = ir.Constant(intp, 8)
        with cgutils.for_range_slice(builder, ir.Constant(intp, 0), stop, step, intp) as (i, _):
            for s in range(R):
                src = builder.bitcast(builder.gep(data[s], [i]), vty.as_pointer())
                x = builder.load(src, align=8)
                a = builder.load(lanes[2 * s])
                t = builder.fadd(a, x)
                b = builder.fsub(t, a)
                err = builder.fadd(builder.fsub(a, builder.fsub(t, b)), builder.fsub(x, b))
                builder.store(t, lanes[2 * s])
                builder.store(builder.fadd(builder.load(lanes[2 * s + 1]), err), lanes[2 * s + 1])
        o = context.make_array(_F64C)(context, builder, outv).data
        for k in range(2 * R):
            dst = builder.bitcast(builder.gep(o, [ir.Constant(intp, 8 * k)]), vty.as_pointer())
            builder.store(builder.load(lanes[k]), dst, align=8)
        return context.get_dummy_value()

    return types.none(vs, n, out), codegen


@jit_fast_inline
def _fold8(out, s):
    """Sum ``s`` of :func:`_tsum8` as ``(hi, lo)``: its 8 lanes folded by TwoSum in lane order
    (``hi``), their errors and the fold's added (``lo``); its value is ``hi + lo``."""
    a = 0.0
    c = 0.0
    for j in range(8):
        x = out[16 * s + j]
        t = a + x
        b = t - a
        c += (a - (t - b)) + (x - b)
        a = t
    for j in range(8):
        c += out[16 * s + 8 + j]
    return a, c


@jit_fast_leaf
def _prompt_metrics_row(z, correct, rare, row, e, T, lanes):
    """mu, rare mass, entropy and sum of -log p over rare correct strategies of softmax(z) into
    ``row[0:4]``, with the arithmetic of the simulator's metrics pass (:mod:`fgrpo_theory.sim.
    kmetrics`): ``e = exp(z - max z)`` by the vectorized polynomial (<= 1.01 ulp), ``p = e / S``,
    ``log p = (z - max z) - log S``, and every sum compensated (:func:`_tsum8`), so each is
    accurate to a few ulps of its value whatever K; ``log S`` is ``log1p`` of ``S - 1`` taken
    from the compensated parts (``S >= 1``, the largest term is exactly 1), so a near-
    deterministic policy's entropy keeps its accuracy too (``log`` of the rounded ``S``: 3e-9
    relative error with the other strategies 25 nats down). Scratch: ``e`` and the rows of ``T``
    (4 rows) of at least ``K8`` (K rounded up to a multiple of 8), ``lanes`` of 64. Until issue
    27 the pass called libm's exp twice per logit and summed with branchy Neumaier updates (2.9x
    the time at K = 64, 4.7x at K = 640); the metrics moved in their last bits
    (docs/precision.md)."""
    K = z.shape[0]
    K8 = (K + 7) // 8 * 8
    if e.shape[0] < K8 or T.shape[0] < 4 or T.shape[1] < K8 or lanes.shape[0] < 64:
        raise ValueError("_prompt_metrics_row: scratch arrays too small")
    m = _max(z)
    _vexp_block(z, e, m, K)
    for i in range(K, K8):
        e[i] = 0.0
    _tsum8((e,), K8, lanes)
    hi, lo = _fold8(lanes, 0)
    S = hi + lo
    inv_s = 1.0 / S
    ls = np.log1p((hi - 1.0) + lo)  # hi - 1 is exact for hi <= 2 (Sterbenz)
    t0 = T[0]
    t1 = T[1]
    t2 = T[2]
    t3 = T[3]
    # one loop per sum: each writes one array, which LLVM vectorizes
    for i in range(K):
        t0[i] = e[i] * inv_s if correct[i] != 0 else 0.0
    for i in range(K):
        t1[i] = e[i] * inv_s if (correct[i] != 0) & (rare[i] != 0) else 0.0
    for i in range(K):
        t2[i] = -(e[i] * inv_s) * ((z[i] - m) - ls)
    for i in range(K):
        t3[i] = -((z[i] - m) - ls) if (correct[i] != 0) & (rare[i] != 0) else 0.0
    for i in range(K, K8):
        t0[i] = 0.0
        t1[i] = 0.0
        t2[i] = 0.0
        t3[i] = 0.0
    _tsum8((t0, t1, t2, t3), K8, lanes)
    for s in range(4):
        hi, lo = _fold8(lanes, s)
        row[s] = hi + lo


# Precision dispatchers of the population kernel (``precision = "float32"``): float32 logits
# take the simulator's float32 primitives (:mod:`fgrpo_theory.sim.kfloat`: float32 exp fused with
# the block CDF, its sampler, the float32 SGD / Adam loops); the branch is a compile-time
# constant, so a float64 kernel is the float64 code above alone, bit for bit.


@jit_fast_inline
def _exp_p(z, e, m, cum):
    """``e = exp(z - m)``; returns ``sum(e)``. Float32: also the block CDF into ``cum``."""
    if _is_f32(z):
        return _exp32_entry(z, e, m, cum)
    return _exp_shift_v(z, e, m)


@jit_fast_inline
def _draw_p(e, S, cum, pre, correct, N, state, cnt, touched):
    """N i.i.d. draws by inverse CDF; returns (distinct, X): kcore._sample_iid bit for bit.

    For K > 16: the same block CDF (:func:`_block_cum`) and binary search over blocks; inside
    the block the first action whose running sum (:func:`_prefix_from_cum`) exceeds the target,
    or the block's last action, as kcore._walk stops there (:func:`_draw_blocks`). Float32
    reads the block CDF of :func:`_exp_p` (kfloat._draw32 with the walk inside the block
    replaced the same way). One call site of :func:`_prefix_from_cum` and of
    :func:`_draw_blocks` serves both precisions (each inlined copy is typed and compiled again,
    the float32 branch's too, although LLVM then drops it from a float64 kernel)."""
    K = e.shape[0]
    if _is_f32(e):  # kfloat._draw32's i.i.d. draws, the walk replaced as in float64
        nb = (K + _BLOCK - 1) // _BLOCK
        total = S
    elif K <= 16:
        return _draw_small(e, cum, correct, N, state, cnt, touched)
    else:
        nb, total = _block_cum(e, cum, K)
    _prefix_from_cum(e, cum, pre, K)
    return _draw_blocks(e, cum, pre, nb, total, correct, N, state, cnt, touched)


@jit_fast_inline
def _sgd_p(z, e, inv_s, cvec, C, inv_n, lr, wd):
    """One SGD step of a prompt's logits in their precision."""
    if _is_f32(z):
        _sgd32_entry(z, e, inv_s, cvec, C, inv_n, lr, wd)
    else:
        _sgd(z, e, inv_s, cvec, C, inv_n, lr, wd)


@jit_fast_inline
def _adam_p(z, e, inv_s, cvec, C, inv_n, lr, wd, dec, b1, b2, eps, t, mm, vv):
    """One Adam / AdamW step of a prompt's logits in their precision."""
    if _is_f32(z):
        _adam32_entry(z, e, inv_s, cvec, C, inv_n, lr, wd, dec, b1, b2, eps, t, mm, vv)
    else:
        _adam(z, e, inv_s, cvec, C, inv_n, lr, wd, dec, b1, b2, eps, t, mm, vv)
