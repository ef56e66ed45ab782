"""A bit-exact, vectorizable replica of the C library's ``exp`` (glibc 2.28+ on x86-64 with FMA).

Numba compiles ``np.exp`` / ``math.exp`` of a float64 to a call of the process's libm ``exp``
(``llvm.exp.f64``; measured: equal bit for bit to ``exp`` called through ctypes). A call per
element keeps a loop scalar: LLVM has no vector ``exp`` without SVML. :func:`exp_lane` computes
the same bits with arithmetic LLVM vectorizes (two table gathers, FMAs, integer ops and selects),
so a loop over independent values (one logit per lane, seeds side by side) runs in SIMD lanes and
gives exactly the numbers the libm calls gave.

What it replicates: glibc's ``exp`` (the algorithm of ARM's optimized-routines), as this
machine's glibc 2.36 runs it: the ifunc picks ``__ieee754_exp_fma`` on CPUs with FMA and AVX2, a
build of the same C source where GCC fused multiply-adds. Read from its machine code
(``gdb``, ``disassemble __ieee754_exp_fma``), operation for operation, with
``N = 128``, ``k`` = the nearest integer to ``x N / ln 2`` and ``2^(k/N) = scale (1 + tail)``:

* ``kd + Shift = fma(x, N/ln2, Shift)``; ``r = fma(kd, -ln2lo/N, fma(kd, -ln2hi/N, x))``;
* ``tmp = fma(r2^2, fma(r, C5, C4), fma(fma(r, C3, C2), r2, r + tail))`` with ``r2 = r * r``;
* the common path (``2^-54 <= |x| < 512``): ``fma(scale, tmp, scale)``;
* ``512 <= |x| < 1024`` (the special case): ``k >= 0``: ``fma(s, tmp, s) 2^1009`` with
  ``s = scale 2^-1009``; ``k < 0``: ``s = scale 2^1022``, ``y = s + s tmp`` NOT fused, and when
  ``y < 1`` (a subnormal result) its correction ``hi = 1 + y``, ``lo = 1 - hi + y + (s - y +
  s tmp)``, ``y = (hi + lo) - 1``; then ``y 2^-1022``;
* ``|x| < 2^-54`` (0, tiny, subnormal): ``1 + x``; ``|x| >= 1024``: ``-inf`` and negative
  finite give ``+0``, positive finite ``+inf``, NaN and ``+inf`` give ``x + 1``.

:func:`exp_lane` computes every path and picks the result by ``select`` instructions, so it has
no branch at all: every input (not only the common range) gives libm's bits, in a vector loop.
The constants are libm's (``__exp_data`` in its ``.rodata``: ``N/ln2``, the split of ``ln2/N``,
the shift ``1.5 2^52`` and the minimax coefficients C2..C5, written below as their bit
patterns). The table is computed here (:func:`_table`: ``2^(k/N)`` to 50 digits by seven
correctly rounded square roots of 2 and products, rounded to the double ``H``, and the tail
``2^(k/N) / H - 1`` rounded); ``tests/test_kexp.py`` checks it against libm's ``.rodata`` and
against mpmath, and the replica against libm bit for bit (10^7 inputs in the callers' range
[-745, 0] and [-30, 0], random bit patterns, hand cases, 1.3e5 arguments where ``k`` depends on
the first FMA). Dropping any FMA or the special case's separate roundings fails those tests,
except the last FMA of ``tmp`` (its product ``r^4 (C4 + r C5)`` is below 1e-9 of ``tmp``:
fusing it or not changes a result with odds of order 1e-12, an estimate; kept as the machine
code has it).

Another libc (musl, macOS), another glibc variant (a CPU without FMA takes ``__exp_sse2`` /
``__exp_avx``, compiled without fused multiply-adds) or a libm whose polynomial changes gives
other last bits: callers use the replica only where :func:`exp_lane_matches_libm` (a check over
~6e5 inputs, run once per process) says it equals libm's ``exp`` here.

:func:`exp_lane` is compiled strict (``fastmath=False``) and deliberately NOT inlined at Numba IR
level: an IR-inlined helper takes its caller's fast-math flags, and ``contract`` would fuse the
special case's ``s + s tmp``, ``reassoc`` would undo its compensated sum. As its own function,
LLVM inlines it into the caller's loop with its strict per-instruction flags and vectorizes it
there (measured: zmm instructions in fast-math and strict callers alike, equal bits).
"""

from __future__ import annotations

import struct
import threading
from decimal import Context, Decimal

import numpy as np
from numba import types
from numba.extending import intrinsic

from ._jit import _f64_bits, _f64_from_bits, _fma, jit_exact, jit_exact_inline

__all__ = ["exp_lane", "exp_lane_matches_libm", "exp_array"]

#: table size (glibc's EXP_TABLE_BITS = 7)
N = 128


def _f(bits: int) -> float:
    """The float64 whose IEEE bit pattern is ``bits``."""
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


# libm's __exp_data constants (glibc 2.36, read from its .rodata; see the module docstring)
_INVLN2N = _f(0x40671547652B82FE)  # N / ln 2
_NEGLN2HIN = _f(0xBF762E42FEFA0000)  # -ln2/N, high part (16 trailing zero bits: kd * it exact)
_NEGLN2LON = _f(0xBD0CF79ABC9E3B3A)  # -ln2/N, low part
_C2 = _f(0x3FDFFFFFFFFFFDBD)  # ~ 1/2
_C3 = _f(0x3FC555555555543C)  # ~ 1/6
_C4 = _f(0x3FA55555CF172B91)  # ~ 1/24
_C5 = _f(0x3F81111167A4D017)  # ~ 1/120
_SHIFT = _f(0x4338000000000000)  # 1.5 * 2^52: x N/ln2 + _SHIFT rounds to an integer
_P1009 = _f(0x7F00000000000000)  # 2^1009
_M1022 = _f(0x0010000000000000)  # 2^-1022
_INF = float("inf")


def _table() -> tuple[np.ndarray, np.ndarray]:
    """``(tail, sbits)``: ``2^(k/N) ~= H_k (1 + tail[k])`` with ``H_k`` = ``2^(k/N)`` rounded to
    double and ``sbits[k]`` = the bit pattern of ``H_k`` minus ``k << 45`` (the exponent bits
    ``k/N`` adds back, see :func:`exp_lane`), as int64."""
    ctx = Context(prec=50)
    root = Decimal(2)
    for _ in range(7):  # 2^(1/128), each square root correctly rounded to 50 digits
        root = ctx.sqrt(root)
    tail = np.empty(N)
    sbits = np.empty(N, dtype=np.int64)
    p = Decimal(1)
    for k in range(N):
        h = float(p)  # correctly rounded (Decimal -> float goes through the exact string)
        tail[k] = float(ctx.divide(ctx.subtract(p, Decimal(h)), Decimal(h)))
        sbits[k] = struct.unpack("<q", struct.pack("<d", h))[0] - (k << 45)
        p = ctx.multiply(p, root)
    return tail, sbits


_TAIL, _SBITS = _table()


@intrinsic
def _select(typingctx, c, a, b):
    """``a if c else b`` as an LLVM ``select`` (both computed, no branch)."""
    if not (c == types.boolean and a == types.float64 and b == types.float64):
        return None

    def codegen(context, builder, signature, args):
        return builder.select(args[0], args[1], args[2])

    return types.float64(types.boolean, types.float64, types.float64), codegen


@jit_exact_inline
def _reduce(x):
    """``(ki, sbits, tmp)`` of glibc's exp: ``ki`` the bits of ``k + Shift``, ``sbits`` the bits
    of ``scale`` (wrapped: only valid without its special case) and ``tmp`` with ``exp(x) ~=
    scale (1 + tmp)``; with glibc's fused multiply-adds."""
    kds = _fma(x, _INVLN2N, _SHIFT)
    ki = _f64_bits(kds)  # k in the low bits of the shifted value
    kd = kds - _SHIFT
    r = _fma(kd, _NEGLN2LON, _fma(kd, _NEGLN2HIN, x))
    j = ki & (N - 1)
    sbits = _SBITS[j] + (ki << 45)  # wraps like glibc's uint64 arithmetic
    r2 = r * r
    lo2 = _fma(_fma(r, _C3, _C2), r2, r + _TAIL[j])
    return ki, sbits, _fma(r2 * r2, _fma(r, _C5, _C4), lo2)


@jit_exact
def exp_lane(x):
    """libm's ``exp(x)`` bit for bit for every float64 ``x`` (see the module docstring), with no
    branch: a loop of calls vectorizes once LLVM inlines it."""
    ix = _f64_bits(x)
    abstop = (ix >> 52) & 0x7FF
    ki, sbits, tmp = _reduce(x)
    scale = _f64_from_bits(sbits)
    common = _fma(scale, tmp, scale)
    # 512 <= |x| < 1024, k >= 0: scaled down by 2^1009 and back, so 2^(k/N) does not overflow
    sp = _f64_from_bits(sbits - (1009 << 52))
    big_pos = _fma(sp, tmp, sp) * _P1009
    # ... k < 0: scaled up by 2^1022; a subnormal result rounds once, in the last product
    sn = _f64_from_bits(sbits + (1022 << 52))
    p = sn * tmp
    y = sn + p
    hi = y + 1.0
    lo = (sn - y) + p
    ys = (((1.0 - hi) + y) + lo + hi) - 1.0  # glibc's "y == 0 -> +0": t - 1 is +0 already
    big_neg = _select(y < 1.0, ys, y) * _M1022
    big = _select((ki & 0x80000000) == 0, big_pos, big_neg)
    # |x| >= 1024, inf, NaN
    huge = _select(ix < 0, 0.0, _INF)
    huge = _select((abstop == 0x7FF) & (x != -_INF), x + 1.0, huge)
    res = _select(abstop == 0x408, big, common)
    res = _select(abstop < 0x3C9, x + 1.0, res)
    return _select(abstop > 0x408, huge, res)


@jit_exact
def exp_array(x, out):
    """``out[i] = exp_lane(x[i])``: the vectorized loop (float64 arrays of equal size)."""
    for i in range(x.size):
        out[i] = exp_lane(x[i])


@jit_exact
def _libm_mismatches(x):
    """How many ``x[i]`` give other bits than libm's ``exp`` from :func:`exp_lane`."""
    bad = 0
    for i in range(x.size):
        bad += _f64_bits(exp_lane(x[i])) != _f64_bits(np.exp(x[i]))
    return bad


#: hand cases of the self-check: zeros, the tiny / common / special-case / overflow boundaries,
#: subnormal results, infinities, NaN
HAND_CASES = (
    0.0, -0.0, 5e-324, -5e-324, 2.0**-1022, -(2.0**-1022), 2.0**-54, -(2.0**-54),
    _f(0x3C8FFFFFFFFFFFFF), -_f(0x3C8FFFFFFFFFFFFF), 1e-10, -1e-10, 1.0, -1.0,
    511.9999999999999, 512.0, -512.0, -511.9999999999999, 709.78, 709.782712893384,
    709.7827128933841, 710.0, -708.39, -708.4, -709.0, -720.0, -744.44, -745.1332191019411,
    -745.1332191019412, -745.2, -746.0, 1023.9999999999999, 1024.0, -1024.0, -1023.999,
    1e300, -1e300, _INF, -_INF, float("nan"), -float("nan"), _f(0x7FF0000000000001),
)  # fmt: skip


def self_check_inputs() -> np.ndarray:
    """The inputs :func:`exp_lane_matches_libm` checks: the hand cases, 2^18 uniform in
    [-745.2, 0], 2^17 in [-30, 0], 2^17 in [-1100, 1100] and 2^17 random bit patterns
    (a fixed seed)."""
    rng = np.random.default_rng(20240527)
    return np.concatenate(
        [
            np.array(HAND_CASES),
            rng.uniform(-745.2, 0.0, 1 << 18),
            rng.uniform(-30.0, 0.0, 1 << 17),
            rng.uniform(-1100.0, 1100.0, 1 << 17),
            rng.integers(0, 1 << 64, 1 << 17, dtype=np.uint64, endpoint=False).view(np.float64),
        ]
    )


_VERDICT: list[bool] = []  # the self-check's answer, once per process
_VERDICT_LOCK = threading.Lock()


def exp_lane_matches_libm() -> bool:
    """Whether :func:`exp_lane` gives libm's ``exp`` bits on :func:`self_check_inputs` in this
    process (libc, CPU, Numba target): decided once per process, whichever threads ask at once
    (the first computes under a lock, the others wait for its answer), whether the replica may
    stand in for ``np.exp`` here. 15-30 ms once compiled (the inputs and one loop of the replica
    and libm's ``exp`` over them)."""
    if not _VERDICT:
        with _VERDICT_LOCK:
            if not _VERDICT:
                _VERDICT.append(int(_libm_mismatches(self_check_inputs())) == 0)
    return _VERDICT[0]
