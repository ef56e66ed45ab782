"""The simulator's exact metrics pass: Q_pos, M_ret (P-26), entropy, subset masses and subset
mean NLLs of ``softmax(z)`` at a logged step (or a threshold check), O(K), in loops LLVM
vectorizes.

Two passes over the logits in blocks of :data:`MB` actions (the block's values stay in L1):

1. ``m = max z`` and ``S = sum_i exp(z_i - m)``;
2. ``lp_i = (z_i - m) - log S``, ``p_i = exp(lp_i)``, and the sums ``-sum p lp`` (entropy),
   ``sum_{correct} p`` (Q_pos), ``sum_{correct} max(p0 - p, 0)`` (the lost mass of M_ret), and per
   subset ``sum_S p`` and ``sum_S -lp`` (its mean NLL is the latter over ``|S|``).

The exps are the vectorized polynomial of :func:`~.kcore._vexp_shift` (<= 1.01 ulp from libm's
``exp``); every sum is compensated: ``MB`` lanes (action ``i`` goes to lane ``i % MB``), each an
error-free running sum (Knuth's TwoSum, no branch; one element-wise loop per block, which
vectorizes), folded in a fixed order at the end (:func:`_tsum_block`, :func:`_tfold`), so a sum is
accurate to about one ulp of its value whatever K, and bit-reproducible (a fixed order; no
``reassoc`` flag). Measured against an mpmath oracle in ``tests/test_sim_metrics.py``.

Until issue 27 the pass called libm's scalar ``exp`` twice per logit and summed with branchy
Neumaier updates (1.45 ms per logged row at K = 128,000, 2.7x a jitted JAX version); the logged
metrics moved in their last bits with this pass (docs/precision.md), the runs themselves did not
(the metrics never feed back into a run).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from .._numba_cache import on_disk
from ._jit import _f64_bits, _f64_from_bits, jit_fast, jit_fast_inline
from .kalloc import empty
from .kcore import _max_inline
from .kfloat import _as_f64

M_QPOS, M_MRET, M_ENT, M_GROUPS, M_ACTIVE, M_RESAMPLES, M_SUB0 = 0, 1, 2, 3, 4, 5, 6

#: Actions per block of the metrics pass, and lanes of each compensated sum.
MB = 256


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
#: 2**52 + 1023: ``n + _BIAS`` has the biased exponent ``n + 1023`` of ``2**n`` in its low bits
_BIAS = 4503599627371519.0


@jit_fast_inline
def _vexp_block(zb, eb, m, n):
    """``eb[:n] = exp(zb[:n] - m)`` (``zb <= m``): the arithmetic of :func:`~.kcore._vexp_shift`
    bit for bit (Cody-Waite reduction, degree-13 Taylor polynomial, <= 1.01 ulp), with the
    scale ``2**k`` built without a float-to-integer conversion (AVX2 has no vector one, so it
    was 4 scalar conversions per vector): ``k + 2**52 + 1023`` is exact, its low bits are the
    biased exponent, shifted into place (bit casts, no instruction)."""
    for i in range(n):
        x0 = zb[i] - m
        x = x0 if x0 > -708.0 else -708.0
        k = np.floor(x * _LOG2E + 0.5)
        r = (x - k * _LN2_HI) - k * _LN2_LO
        p = 1.0 / 6227020800
        p = p * r + 1.0 / 479001600
        p = p * r + 1.0 / 39916800
        p = p * r + 1.0 / 3628800
        p = p * r + 1.0 / 362880
        p = p * r + 1.0 / 40320
        p = p * r + 1.0 / 5040
        p = p * r + 1.0 / 720
        p = p * r + 1.0 / 120
        p = p * r + 1.0 / 24
        p = p * r + 1.0 / 6
        p = p * r + 1.0 / 2
        p = p * r + 1.0
        p = p * r + 1.0
        scale = _f64_from_bits(_f64_bits(k + _BIAS) << 52)
        eb[i] = (p if x0 > -708.0 else 0.0) * scale


@jit_fast_inline
def _two_sum(a, c, i, x):
    """``a[i] += x`` by TwoSum, its exact rounding error added to ``c[i]``."""
    ai = a[i]
    t = ai + x
    b = t - ai
    c[i] += (ai - (t - b)) + (x - b)
    a[i] = t


@jit_fast
def _tsum_block(v, n, a, c):
    """Add ``v[:n]`` to the compensated sum with lanes ``a`` (``MB`` lane sums) and ``c`` (their
    exact rounding errors, summed): element ``i`` goes to lane ``i``, by TwoSum (``a + x = t +
    err`` exactly, no branch), in one element-wise loop that vectorizes. (A function of its own,
    not inlined: one compiled loop serves every sum but the three of :func:`_tsum3`; a cold
    compile of the pass took 4.0 s CPU with every loop inlined.)"""
    for i in range(n):
        _two_sum(a, c, i, v[i])


@jit_fast_inline
def _tsum3(pb, lb, cb, qb, n, A, C):
    """The block's terms of the entropy (``-p lp``, row 0), Q_pos (``p`` of the correct
    actions, row 1) and the lost mass of M_ret (``max(p0 - p, 0)`` of the correct actions, row
    2) added to their lanes: one element-wise loop, which vectorizes."""
    a0 = A[0]
    c0 = C[0]
    a1 = A[1]
    c1 = C[1]
    a2 = A[2]
    c2 = C[2]
    for i in range(n):
        p = pb[i]
        _two_sum(a0, c0, i, -p * lb[i])
        ok = cb[i] != 0
        _two_sum(a1, c1, i, p if ok else 0.0)
        d = qb[i] - p
        _two_sum(a2, c2, i, d if ok and d > 0.0 else 0.0)


@jit_fast_inline
def _tfold(A, C, s):
    """The value of the compensated sum in row ``s``: the lanes folded with TwoSum in a fixed
    order, then their errors added."""
    a = 0.0
    c = 0.0
    for j in range(A.shape[1]):
        x = A[s, j]
        t = a + x
        b = t - a
        c += (a - (t - b)) + (x - b)
        a = t
    for j in range(A.shape[1]):
        c += C[s, j]
    return a + c


@jit_fast
def _metrics(z, correct, submask, p0, sum_p0c, row):
    """Q_pos, M_ret (P-26), entropy, subset masses and subset mean NLLs of softmax(z) into
    ``row`` (slots ``M_QPOS``, ``M_MRET``, ``M_ENT``, ``M_SUB0 + j``, ``M_SUB0 + 2 n_sub + j``);
    see the module docstring. The mean NLL of a subset S (issue 11 item 3) is ``(1/|S|) sum_{k
    in S} -log p_k = logsumexp(z) - (1/|S|) sum_{k in S} z_k``, summed from the same ``log p_k``
    as the entropy (exact for any |S|, also a single action)."""
    z = _as_f64(z)  # float32 logits (precision = "float32"): float64 metrics of their softmax
    K = z.shape[0]
    n_sub = submask.shape[0]
    ns = 3 + 2 * n_sub  # sums: entropy, Q_pos, lost mass, then per subset mass and -log p
    # empty and loops, not zeros, and no min() (here, in run_small and in run_steps): each
    # overload Numba compiles for a first simulate costs 0.1-0.2 s of its cold start
    A = empty((ns, MB), np.float64)
    C = empty((ns, MB), np.float64)
    for s in range(ns):
        for j in range(MB):
            A[s, j] = 0.0
            C[s, j] = 0.0
    E = empty(K, np.float64)  # exp(z - m)
    pb = empty(MB, np.float64)  # the block's probabilities
    vb = empty(MB, np.float64)  # a block of terms of a subset's sum
    lb = empty(MB, np.float64)  # its log-probabilities
    size = empty(n_sub, np.float64)  # subset sizes (exact integers)
    for j in range(n_sub):
        size[j] = 0.0
    m = _max_inline(z)
    for lo in range(0, K, MB):
        n = MB if K - lo > MB else K - lo
        eb = E[lo : lo + n]
        _vexp_block(z[lo : lo + n], eb, m, n)
        _tsum_block(eb, n, A[0], C[0])
    S = _tfold(A, C, 0)
    inv_s = 1.0 / S
    ls = np.log(S)
    A[0, :] = 0.0
    C[0, :] = 0.0
    for lo in range(0, K, MB):
        n = MB if K - lo > MB else K - lo
        # slices: indices from 0 (an offset index keeps a negative-index select that blocks
        # vectorization, kfloat._block_sum32)
        zb = z[lo : lo + n]
        eb = E[lo : lo + n]
        cb = correct[lo : lo + n]
        qb = p0[lo : lo + n]
        for i in range(n):
            pb[i] = eb[i] * inv_s
            lb[i] = (zb[i] - m) - ls
        _tsum3(pb, lb, cb, qb, n, A, C)
        for j in range(n_sub):
            mb = submask[j, lo : lo + n]
            cnt = 0
            for i in range(n):
                cnt += mb[i]
            if cnt == 0:  # (adding zeros leaves a TwoSum sum exactly as it is)
                continue
            size[j] += cnt
            for i in range(n):
                vb[i] = pb[i] if mb[i] else 0.0
            _tsum_block(vb, n, A[3 + j], C[3 + j])
            for i in range(n):
                vb[i] = -lb[i] if mb[i] else 0.0
            _tsum_block(vb, n, A[3 + n_sub + j], C[3 + n_sub + j])
    # one inlined fold in a loop over the sums, not one per sum (the same folds of the same
    # lanes; the pass compiled in 0.87x the time, median of 8 alternating cold compiles each
    # way, 0.62-1.09x). The lost mass is divided after the loop: in it, "arcp" lets LLVM hoist
    # 1 / sum_p0c and multiply, which rounds differently (seen: M_ret moved by 1 ulp in a third
    # of the threshold rows)
    lost = 0.0
    for s in range(ns):
        v = _tfold(A, C, s)
        if s == 0:
            row[M_ENT] = v
        elif s == 1:
            row[M_QPOS] = v
        elif s == 2:
            lost = v
        elif s < 3 + n_sub:  # subset s - 3: its mass
            row[M_SUB0 + s - 3] = v
        else:  # subset j = s - 3 - n_sub: its mean NLL
            row[M_SUB0 + n_sub + s - 3] = v / size[s - 3 - n_sub]
    row[M_MRET] = 1.0 - lost / sum_p0c


_F64 = types.Array(types.float64, 1, "C")
#: The argument types of :func:`_metrics` that :func:`call_metrics` takes: float64 logits, the
#: uint8 correct mask and subset masks, float64 ``p0``, ``sum_p0c`` and the row.
METRICS_ARGS = (
    _F64, types.Array(types.uint8, 1, "C"), types.Array(types.uint8, 2, "C"), _F64,
    types.float64, _F64,
)  # fmt: skip


def metrics_address(
    while_compiling: Callable[[], object] | None = None, helper: str | None = None
) -> int:
    """The address of :func:`_metrics` compiled for :data:`METRICS_ARGS` (compiled, or loaded
    from the disk cache, on the process's first call), for :func:`call_metrics`.

    ``while_compiling``: the caller's own compilation, run first. If the pass is neither loaded
    nor on disk, a helper process compiles it meanwhile (:func:`.beside.compile_beside`: a cold
    start's two largest compilations side by side); ``helper`` names the function the helper
    calls (``"module:function"``, one that ends by calling this one), else this one."""
    if while_compiling is not None:
        if METRICS_ARGS not in _metrics.overloads and on_disk(_metrics, METRICS_ARGS) is False:
            from .beside import compile_beside  # (in here: not part of the kernels' stamp)

            compile_beside(helper or f"{__name__}:metrics_address", while_compiling)
        else:
            while_compiling()
    _metrics.compile(METRICS_ARGS)
    cres = _metrics.overloads[METRICS_ARGS]
    addr = cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
    if not addr:  # never called through a null address
        raise RuntimeError("the metrics pass has no address in the JIT (a bug)")
    return addr


@intrinsic
def call_metrics(typingctx, addr, z, correct, submask, p0, sum_p0c, row):
    """``_metrics(z, correct, submask, p0, sum_p0c, row)`` called through its address ``addr``
    (:func:`metrics_address`), with Numba's calling convention: the caller's module does not
    link :func:`_metrics` in, so compiling the caller does not optimize and emit the metrics
    pass again (0.9 s of a cold first ``simulate``, in ``ksmall.run_small``). The same machine
    code runs either way, and an error it returns is returned by the caller. Typed only for
    :data:`METRICS_ARGS`, the types the address was compiled for."""
    args = (z, correct, submask, p0, sum_p0c, row)
    if addr != types.int64 or args != METRICS_ARGS:
        return None

    def codegen(context, builder, signature, llargs):
        conv = context.call_conv
        fnty = conv.get_function_type(types.none, METRICS_ARGS)
        fn = builder.inttoptr(llargs[0], fnty.as_pointer())
        retty = conv.get_return_type(types.none).pointee
        # (in the entry block: an alloca in the caller's loop would grow the stack per call)
        ret = cgutils.alloca_once(builder, retty)
        builder.store(ir.Constant(retty, None), ret)
        exc = cgutils.alloca_once(builder, fnty.args[1].pointee)
        packed = list(conv._get_arg_packer(METRICS_ARGS).as_arguments(builder, llargs[1:]))
        code = builder.call(fn, [ret, exc, *packed])
        # an error the pass returns (a failed allocation's MemoryError) leaves the caller with
        # it, as a direct call does (BaseContext.call_internal)
        status = conv._get_return_status(builder, code, builder.load(exc))
        with cgutils.if_unlikely(builder, status.is_error):
            conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.none(types.int64, *METRICS_ARGS), codegen


def metrics_into(met, z, correct, submask, p0, sum_p0c, row) -> None:  # noqa: ANN001
    """In a kernel: :func:`_metrics` into ``row``, called through the address ``met``
    (:func:`call_metrics`) when ``met`` is an int64 and the arguments are :data:`METRICS_ARGS`,
    else directly (linked into the kernel: ``met`` None, or float32 logits). Decided at compile
    time. An int64 ``met`` must be :func:`metrics_address`'s, never 0."""
    _metrics(z, correct, submask, p0, sum_p0c, row)


@overload(metrics_into, inline="always")
def _metrics_into(met, z, correct, submask, p0, sum_p0c, row):  # noqa: ANN001, ANN202
    if met == types.int64 and (z, correct, submask, p0, sum_p0c, row) == METRICS_ARGS:

        def through(met, z, correct, submask, p0, sum_p0c, row):  # noqa: ANN001, ANN202
            call_metrics(met, z, correct, submask, p0, sum_p0c, row)

        return through

    def direct(met, z, correct, submask, p0, sum_p0c, row):  # noqa: ANN001, ANN202
        _metrics(z, correct, submask, p0, sum_p0c, row)

    return direct
