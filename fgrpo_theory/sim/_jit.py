"""Numba decorator flavours and fast-math flag sets of every kernel of the package, defined once,
and the few LLVM intrinsics kernels share (a fused multiply-add, float64 <-> int64 bit casts).

Every kernel is cached on disk (``cache=True``; in the user cache folder, with a stamp that covers
every kernel source, see :mod:`fgrpo_theory._numba_cache`) and uses ``error_model="numpy"``.
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit as _njit
from numba import types
from numba.extending import intrinsic

from .._numba_cache import announce_compilation as _announce_compilation
from .._numba_cache import kernel_cache as _kernel_cache
from .._numba_cache import register as _register_cache

_register_cache()  # compiled code goes to the user cache folder, never site-packages
_announce_compilation()  # one stderr line when a kernel compiles (a cache miss), never silent

# No "reassoc" where a loop sums: a vectorized reduction's order can depend on the arrays'
# alignment in memory, which changes between calls (measured: last-bit differences between
# reruns). Element-wise loops whose only reduction is a max (exact in any order) may reassociate.
# error_model="numpy" everywhere: Python's error model puts a zero-division branch in every
# float division, which blocks vectorization (measured 4x on the Adam loop); no kernel divides
# by zero by construction (totals and sampled probabilities are positive).
FM = {"nsz", "arcp", "contract", "afn"}
# Small per-step helpers are inlined at Numba IR level (inline="always"): measured 2x on small K
# (calls cost reference-count traffic); they then take the caller's FM flags. _sgd and _adam stay
# separate functions so that they keep FM_EW and vectorize.
FM_EW = {"nsz", "arcp", "contract", "afn", "reassoc"}

# Every flavour sets ``fastmath`` explicitly: Numba compiles a callee whose fastmath is unset
# with its CALLER's flags (targetconfig's inherit_if_not_set), and its on-disk cache does not key
# on flags, so an "exact" function called from a fast-math kernel was compiled with FM (FMA
# contraction) or without, depending on whether it had first been compiled standalone; measured:
# population runs with idle-prompt Adam steps changed in the last bits with the order.
_COMMON = {"cache": True, "error_model": "numpy"}


def njit(*, cache: bool = False, **options):  # noqa: ANN201 - a decorator
    """Numba's ``njit(**options)``; ``cache=True`` gives the kernel its disk cache the way
    :func:`fgrpo_theory._numba_cache.kernel_cache` does (the same files as Numba's
    ``cache=True``, opened on first use and loaded without refreshing Numba's whole context)."""
    decorate = _njit(**options)
    if not cache:
        return decorate
    return lambda func: _kernel_cache(decorate(func))


#: exact IEEE arithmetic (random streams, sum-tree construction, idle Adam steps)
jit_exact = njit(fastmath=False, **_COMMON)
#: exact IEEE arithmetic, inlined into the caller at Numba IR level (the caller's flags apply)
jit_exact_inline = njit(fastmath=False, inline="always", **_COMMON)
#: a compiled function with the safe fast-math flags (per-run kernels, metrics)
jit_fast = njit(fastmath=FM, **_COMMON)
#: a compiled function that allocates no array, without reference counting: Numba increfs every
#: array argument at a call's entry and decrefs it at its exit (atomic operations, which the
#: reference-count pruning pass leaves in a function with loops and several exits: 13 % of the
#: default population kernel); ``_nrt=False`` is Numba's own switch for that (a private option),
#: and an allocation in such a function fails to compile. Its callees are inlined or leaf
#: functions too (a compiled callee that does not set the option inherits it, as fastmath)
jit_fast_leaf = njit(fastmath=FM, _nrt=False, **_COMMON)
#: a small per-step helper inlined into the caller
jit_fast_inline = njit(fastmath=FM, inline="always", **_COMMON)
#: an element-wise loop that may reassociate (its only reduction, if any, is order-free); it
#: allocates nothing and counts no references (see ``jit_fast_leaf``)
jit_elementwise = njit(fastmath=FM_EW, _nrt=False, **_COMMON)
#: a serial loop over a block of runs that releases the GIL: the simulator's batch kernels, run
#: on Python threads, one block of runs each (``runner._run_chunk``). Not ``parallel=True``:
#: Numba's parfor passes and their lowering were 22-35 % of a cold start's compilation.
jit_batch = njit(nogil=True, fastmath=False, **_COMMON)
#: the one-run kernels, also called run by run from Python threads (``runner.DIRECT_RUNS``; the
#: population model's ``pop_run`` always)
jit_run_fast = njit(fastmath=FM, nogil=True, **_COMMON)
jit_run_exact = njit(fastmath=False, nogil=True, **_COMMON)


@intrinsic
def _fma(typingctx, a, b, c):
    """``a * b + c`` with one rounding (``llvm.fma``: the FMA instruction on a CPU that has one,
    else libm's ``fma``; exact either way)."""
    if not all(x == types.float64 for x in (a, b, c)):
        return None

    def codegen(context, builder, signature, args):
        d = ir.DoubleType()
        fn = builder.module.declare_intrinsic("llvm.fma", [d], ir.FunctionType(d, [d, d, d]))
        return builder.call(fn, args)

    return types.float64(types.float64, types.float64, types.float64), codegen


@intrinsic
def _f64_bits(typingctx, x):
    """The int64 bit pattern of the float64 ``x`` (a register reinterpretation)."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _f64_from_bits(typingctx, bits):
    """The float64 whose bit pattern is the int64 ``bits``."""
    if not (isinstance(bits, types.Integer) and bits.bitwidth == 64):
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(bits), codegen
