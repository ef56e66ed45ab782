"""A cold start's two largest compilations side by side, in two processes.

A first ``simulate`` compiles two kernels that do not depend on each other: its run loop
(:func:`.ksmall.run_small` at small K, else :func:`.kernels.run_steps`) and the metrics pass
(:func:`.kmetrics._metrics`), which the loop calls through its address
(:func:`.kmetrics.metrics_into`). Numba compiles one function at a time in a process (a global
compiler lock), so :func:`compile_beside` has a helper process compile one of them into the disk
cache while this process compiles the other, then this process loads the helper's machine code
from the cache. It is the code this process would have compiled (the same interpreter, package,
sources, environment and CPU: the cache's own checks), so the numbers are the same.

The helper is started only where it can help: the process may run on two cores or more (its
affinity mask, and its cgroups' CPU quota if one is set: :func:`.cpus.cpu_quota`), kernels
are cached in a folder (not the no-cache mode), and Python is not frozen into an application.
On Linux, in a process that runs no other Python thread, the helper is a fork of this process
(:func:`_fork`), which has Numba and the package imported already: it used 0.7-0.9 s less CPU
than a fresh ``python`` (3 cold runs of ``simulate`` each, 2-core machine). Elsewhere (macOS,
where a fork that does not exec is unsafe; a process with threads, one of which a fork could
catch holding a lock) it is a fresh ``python``. This process prints the compile notice; the
helper's output is discarded. A helper that fails, imports another copy of the package, or has
not finished :data:`HELPER_SECONDS` after this process's own compilation is killed, and this
process compiles the kernel itself, as it would without a helper; a Ctrl-C kills it too.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .._local_cluster import _sigint_blocked

#: How long this process waits for the helper after its own compilation (then kills it and
#: compiles the kernel itself). The helper takes about 3 s on an idle machine.
HELPER_SECONDS = 30.0

#: The helper's program: ``-P`` (no current folder on the path), this package found where the
#: parent found it, else nothing is compiled (exit 3).
_HELPER = """import importlib, importlib.util, os, signal, sys
if hasattr(signal, "pthread_sigmask"):  # started with SIGINT blocked (compile_beside)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
top, root, origin, module, function = sys.argv[1:]
def found():
    spec = importlib.util.find_spec(top)
    return spec is not None and os.path.realpath(spec.origin or "") == origin
if not found():
    sys.path.insert(0, root)
    importlib.invalidate_caches()
    if not found():
        sys.exit(3)
getattr(importlib.import_module(module), function)()
"""


def sum_tree_then_metrics() -> None:
    """The helper's work when the run loop is :func:`.kernels.run_steps` on the sum tree: the
    tree's two kernels that the loop calls (:mod:`.sumtree`), then the metrics pass.

    The parent's compilation of the loop reaches those two 1.2-1.7 s after it starts and
    compiles them (0.4 s) unless it finds them in the disk cache. Measured on the 2-core machine
    (Nov 2026): the helper had them there in time, and the parent then waited 0.0-1.5 s for the
    helper's metrics pass instead (6 cold runs); with the two compiled in the parent, 3
    interleaved cold runs were no faster or slower within the machine's noise. Either way the
    loop links the same code: a kernel loaded from the cache brings the module it was compiled
    into for linking, as a fresh one does. The signatures below are those ``run_steps`` asks
    for (``tests/test_sim_beside.py`` checks the loop then compiles neither)."""
    from numba import types

    from .kmetrics import metrics_address
    from .sumtree import tree_build, tree_leaf_range

    f64 = types.Array(types.float64, 1, "C")
    tree_build.compile((f64, f64, types.int64))
    tree_leaf_range.compile((f64, types.int64, types.int64))
    metrics_address()


def compile_beside(target: str, local: Callable[[], object]) -> None:
    """Run ``local()`` (a compilation in this process) while a helper process calls ``target``
    (``"package.module:function"``, a function of no arguments that compiles a kernel into the
    disk cache), then wait for the helper (see the module docstring for when there is none)."""
    helper = None
    try:
        # a Ctrl-C while the helper starts waits until this process holds the helper (it then
        # kills it); in a fork it would otherwise run this process's handler (see _fork)
        with _sigint_blocked():
            helper = _start(target)
        local()
        if helper is not None:
            helper.wait(timeout=HELPER_SECONDS)
    except subprocess.TimeoutExpired:
        pass  # the caller compiles the kernel itself
    finally:
        if helper is not None and helper.poll() is None:
            helper.kill()
            helper.wait()


def _cores() -> float:
    """The CPUs this process may use: its affinity mask, or fewer under a cgroup CPU quota
    (there a helper would only take CPU time from this process)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1
    from .cpus import cpu_quota

    quota = cpu_quota()
    return n if quota is None else min(n, quota)


def _start(target: str) -> subprocess.Popen | _Forked | None:
    from .._numba_cache import NO_CACHE, announce_now, kernel_cache_dir

    if _cores() < 2 or getattr(sys, "frozen", False):
        return None
    folder = kernel_cache_dir()
    if folder == NO_CACHE:
        return None
    module, _, function = target.partition(":")
    if _can_fork():
        forked = _fork(module, function)
        if forked is not None:
            announce_now()
        return forked
    top = module.split(".")[0]
    spec = getattr(sys.modules.get(top), "__spec__", None)
    origin = getattr(spec, "origin", None)
    if origin is None:
        return None
    origin = os.path.realpath(origin)
    root = str(Path(origin).parent.parent)  # the folder this package was found in
    env = dict(os.environ, NUMBA_CACHE_DIR=str(folder))  # this process's cache folder
    try:
        helper = subprocess.Popen(
            [sys.executable, "-P", "-c", _HELPER, top, root, origin, module, function],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    announce_now()  # a kernel compiles (in the helper) while this process may wait for it
    return helper


def _can_fork() -> bool:
    """Whether the helper may be a fork of this process: Linux, and no other Python thread
    (one could hold a lock, such as a module's import lock, that the fork would never see
    released). Native threads (a BLAS pool, Numba's threading layer) are left alone: the fork
    compiles, it runs no parallel code."""
    import threading

    return sys.platform.startswith("linux") and threading.active_count() == 1


class _Forked:
    """A forked helper, with the part of :class:`subprocess.Popen`'s interface that
    :func:`compile_beside` uses (``poll``, ``wait`` with a timeout, ``kill``, ``returncode``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self._reap(os.WNOHANG)

    def wait(self, timeout: float | None = None) -> int | None:
        if timeout is None:
            return self._reap(0)
        end = time.monotonic() + timeout
        while self.poll() is None:  # (a 5 ms poll: the wait is seconds long, not a hot loop)
            if time.monotonic() >= end:
                raise subprocess.TimeoutExpired(f"helper {self.pid}", timeout)
            time.sleep(0.005)
        return self.returncode

    def _reap(self, flags: int) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, flags)
            except ChildProcessError:  # reaped elsewhere (SIGCHLD ignored): as Popen, 0
                pid, status = self.pid, 0
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:  # already reaped
                pass


def _fork(module: str, function: str) -> _Forked | None:
    """Fork a helper that calls ``module.function()`` and exits (0 if it returned, else 1).

    Called with SIGINT blocked (:func:`compile_beside`): a Ctrl-C that reached the fork before
    it reset its handler ran this process's handler there (measured: a KeyboardInterrupt out of
    a fork hook, and a fork that left this function and ran the caller's ``except
    KeyboardInterrupt``). The fork keeps only standard input, output and error, on
    ``/dev/null``: another descriptor this process holds (an output FIFO's write end) would keep
    a reader waiting for the fork if this process died first. The fork freezes the objects it
    inherits out of its garbage collector (``gc.freeze``; the collector is off from before the
    fork until then), so a cycle this process had not yet collected is not finalized a second
    time there; this process's collector is left as it was. It ends with ``os._exit``: no exit
    handlers, and no flush of this process's buffered output."""
    import warnings

    collecting = gc.isenabled()
    gc.disable()  # no collection in the fork before it has frozen what it inherited
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns when the process has native threads (a BLAS pool): the child
            # compiles and exits, it never uses them
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        pid = None
    if pid != 0:  # this process: its collector as it was
        if collecting:
            gc.enable()
        return None if pid is None else _Forked(pid)
    code = 1
    try:
        gc.freeze()  # this process's objects: never collected, nor finalized, in the fork
        if collecting:
            gc.enable()
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # (close_range: one system call)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        # a Ctrl-C ends the fork as it ends this process; an ignored one (a Dask worker's)
        # stays ignored
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        import importlib

        getattr(importlib.import_module(module), function)()
        code = 0
    finally:
        os._exit(code)
