"""``empty`` and ``zeros`` for the kernels: ``np.empty`` and ``np.zeros`` without Numba's
separately compiled implementations.

A kernel that calls ``np.empty`` (or ``np.zeros``, ``np.empty_like``, ...) makes Numba compile
the call's implementation and the allocator it calls (``_call_allocator``) as functions of their
own, each with an environment that names its module, ``numba.np.arrayobj``. Loading such a
kernel from the disk cache rebuilds those environments, which imports that module: 0.055-0.068 s
of every warm process that runs a kernel (2-core machine, Nov 2026), whatever else it does. A
cold start compiles those functions again, about 0.04 s each. The two intrinsics below emit the
allocation into the calling kernel itself.

They make the same array as NumPy's functions in Numba: the same checks in the same order (a
dimension that does not fit an ``intp``, a negative dimension, a size that overflows: the same
``ValueError`` texts), the same allocator (``NRT_MemInfo_alloc_aligned`` with Numba's preferred
alignment for the dtype; a failed allocation raises ``MemoryError``), C order, and for ``zeros``
all bytes 0 as ``np.zeros``' ``memset`` leaves them. ``tests/test_kalloc.py`` checks shapes,
strides, dtypes, alignment, contents and errors against ``np.empty`` and ``np.zeros`` compiled by
Numba.

The dtype is always given: a NumPy scalar type (``np.float64``, ``np.int64``, ``np.uint8``,
``np.bool_``) or an array's ``.dtype``. The shape is an integer or a tuple of integers (of any
widths; ``()`` gives a 0-d array), as ``np.empty`` takes it; a dtype string is not typed.
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["empty", "zeros"]


def _signature(shape, dtype):  # noqa: ANN001, ANN202 - Numba types
    """The array type and signature of ``empty(shape, dtype)``, or None (not typed)."""
    if isinstance(shape, types.Integer):
        ndim = 1
    elif isinstance(shape, types.BaseTuple) and all(isinstance(t, types.Integer) for t in shape):
        ndim = len(shape)  # (the empty tuple: a 0-d array)
    else:
        return None
    if isinstance(dtype, types.NumberClass):
        elem = dtype.instance_type
    elif isinstance(dtype, types.DType):
        elem = dtype.dtype
    else:
        return None
    return types.Array(elem, ndim, "C")(shape, dtype)


def _codegen(zero: bool):  # noqa: ANN202 - Numba's codegen
    def codegen(context, builder, sig, args):  # noqa: ANN001, ANN202 - Numba's signature
        # (Numba's array helpers are imported when a kernel compiles, never when one loads)
        from numba.np.arrayobj import _parse_shape, get_itemsize, make_array, populate_array

        arrty = sig.return_type
        shapes = _parse_shape(context, builder, sig.args[0], args[0])
        ary = make_array(arrty)(context, builder)
        datatype = context.get_data_type(arrty.dtype)
        itemsize = context.get_constant(types.intp, get_itemsize(context, arrty))
        nitems = context.get_constant(types.intp, 1)
        overflow = cgutils.false_bit
        for s in shapes:
            mult = builder.smul_with_overflow(nitems, s)
            nitems = builder.extract_value(mult, 0)
            overflow = builder.or_(overflow, builder.extract_value(mult, 1))
        strides = [itemsize] if shapes else []
        for s in reversed(shapes[1:]):
            strides.append(builder.mul(strides[-1], s))
        strides.reverse()
        mult = builder.smul_with_overflow(nitems, itemsize)
        size = builder.extract_value(mult, 0)
        overflow = builder.or_(overflow, builder.extract_value(mult, 1))
        with builder.if_then(overflow, likely=False):
            context.call_conv.return_user_exc(
                builder,
                ValueError,
                ("array is too big; `arr.size * arr.dtype.itemsize` is larger than"
                 " the maximum possible size.",),
            )  # fmt: skip
        align = context.get_preferred_array_alignment(arrty.dtype)
        meminfo = context.nrt.meminfo_alloc_aligned(builder, size=size, align=align)
        data = context.nrt.meminfo_data(builder, meminfo)
        if zero:
            cgutils.memset(builder, data, size, 0)
        intp_t = context.get_value_type(types.intp)
        populate_array(
            ary,
            data=builder.bitcast(data, datatype.as_pointer()),
            shape=cgutils.pack_array(builder, shapes, ty=intp_t),
            strides=cgutils.pack_array(builder, strides, ty=intp_t),
            itemsize=itemsize,
            meminfo=meminfo,
        )
        return ary._getvalue()

    return codegen


@intrinsic
def empty(typingctx, shape, dtype):  # noqa: ANN001, ANN201, ARG001 - Numba's signature
    """``np.empty(shape, dtype)`` in a kernel (see the module docstring)."""
    sig = _signature(shape, dtype)
    return None if sig is None else (sig, _codegen(zero=False))


@intrinsic
def zeros(typingctx, shape, dtype):  # noqa: ANN001, ANN201, ARG001 - Numba's signature
    """``np.zeros(shape, dtype)`` in a kernel (see the module docstring)."""
    sig = _signature(shape, dtype)
    return None if sig is None else (sig, _codegen(zero=True))
