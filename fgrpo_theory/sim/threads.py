"""The loop over runs on Python threads: each thread advances a contiguous block of runs in a
kernel that releases the GIL (the simulator's batch and one-run kernels are ``nogil``, not
``parallel=True``: Numba's parfor passes and their lowering were 22-35 % of a cold start's
compilation). Runs are independent, so the split changes no number."""

from __future__ import annotations

import threading


def rows(st, lo: int, hi: int):
    """Rows ``lo:hi`` of every array of the state ``st`` (views: the kernels advance them)."""
    return type(st)(*(a[lo:hi] for a in st))


#: per Python thread: the Numba thread count last set by :func:`choose_threads` (a choice,
#: never capped by :func:`default_threads`)
_chosen = threading.local()


def choose_threads(n: int) -> int:
    """Set this Python thread's Numba thread count to ``n`` (at most ``NUMBA_NUM_THREADS``) as
    a choice that :func:`default_threads` keeps (``numba.set_num_threads`` to Numba's default
    count cannot be told from the default); returns the count set."""
    import numba

    nt = max(1, min(int(n), numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(nt)
    _chosen.count = nt
    return nt


def default_threads() -> int:
    """Threads of a run whose caller names none: Numba's current setting, but at most the
    process's cgroup CPU limit rounded up (:func:`.cpus.cpu_quota`) while that setting is
    Numba's own default (one per CPU of the affinity mask): a container limited to 2 CPUs on a
    64-core host sees 64 CPUs in its affinity mask, and 64 threads there would only wait for
    their share of 2 CPUs (and each holds a block's buffers). A count set through
    ``NUMBA_NUM_THREADS`` (at Numba's import), Numba's config file or :func:`choose_threads`
    is kept; one set with ``numba.set_num_threads`` is kept unless it equals Numba's default.
    Results are bit-identical for any thread count."""
    import math
    import os

    import numba

    nt = numba.get_num_threads()
    config = numba.config
    if (
        nt != config.NUMBA_NUM_THREADS
        or config.NUMBA_NUM_THREADS != config.NUMBA_DEFAULT_NUM_THREADS
        or "NUMBA_NUM_THREADS" in os.environ
        or getattr(_chosen, "count", None) == nt
    ):
        return nt  # chosen by the user
    from .cpus import cpu_quota

    quota = cpu_quota()
    return nt if quota is None else max(1, min(nt, math.ceil(quota)))


def run_threads(threads) -> int:  # noqa: ANN001 - what the caller passed
    """The threads a run uses for its caller's ``threads``: :func:`default_threads` for None,
    else the integer, at most ``NUMBA_NUM_THREADS`` (no more run); anything but an integer >= 1
    is refused (``ValueError`` naming ``threads``)."""
    import numba
    import numpy as np

    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int | np.integer) or threads < 1:
        from .._validate import fail

        fail("threads", threads, "an integer >= 1")
    return min(int(threads), numba.config.NUMBA_NUM_THREADS)


def n_blocks(R: int) -> int:
    """How many blocks :func:`on_threads` splits ``R`` runs into (their sizes differ by one at
    most)."""
    import numba

    return max(1, min(R, numba.get_num_threads()))


def compile_for(kernel, args: tuple) -> None:  # noqa: ANN001 - a Numba dispatcher
    """Compile ``kernel`` for the types of ``args``, or load it (nothing if it is loaded): done
    before :func:`on_threads`, whose threads would otherwise all wait on the one compilation."""
    import numba

    kernel.compile(tuple(numba.typeof(a) for a in args))


def on_threads(block, R: int) -> None:
    """``block(lo, hi)`` over ``R`` runs split in contiguous blocks, one per Numba thread
    (``numba.get_num_threads()``; the batch kernels release the GIL), this thread taking the
    first. Runs are independent, so the split changes no number. On Ctrl-C in this thread the
    call raises at once; the other threads finish their block (a chunk of steps, or a kernel
    compile) in the background, writing only into this call's arrays."""
    nt = n_blocks(R)
    if nt == 1:
        block(0, R)
        return
    bounds = [(R * i) // nt for i in range(nt + 1)]
    errors: list[BaseException] = []

    def guarded(lo: int, hi: int) -> None:
        try:
            block(lo, hi)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            errors.append(exc)

    others = [
        threading.Thread(target=guarded, args=(bounds[i], bounds[i + 1]), daemon=True)
        for i in range(1, nt)
    ]
    for t in others:
        t.start()
    try:
        block(bounds[0], bounds[1])
    except KeyboardInterrupt:
        # Ctrl-C: not waiting for the other blocks (daemon threads; their runs are dropped with
        # this call's output): one of them may be compiling a kernel for many seconds
        raise
    except BaseException:
        for t in others:
            t.join()
        raise
    for t in others:
        t.join()  # a Ctrl-C while waiting ends the wait too
    if errors:
        raise errors[0]
