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
This process prints the compile notice; the helper's output is discarded. A helper that fails,
imports another copy of the package, or has not finished :data:`HELPER_SECONDS` after this
process's own compilation is killed, and this process compiles the kernel itself, as it would
without a helper; a Ctrl-C kills it too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

#: How long this process waits for the helper after its own compilation (then kills it and
#: compiles the kernel itself). The helper takes about 3 s on an idle machine.
HELPER_SECONDS = 30.0

#: The helper's program: ``-P`` (no current folder on the path), this package found where the
#: parent found it, else nothing is compiled (exit 3).
_HELPER = """import importlib, importlib.util, os, sys
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


def _start(target: str) -> subprocess.Popen | None:
    from .._numba_cache import NO_CACHE, announce_now, kernel_cache_dir

    if _cores() < 2 or getattr(sys, "frozen", False):
        return None
    folder = kernel_cache_dir()
    if folder == NO_CACHE:
        return None
    module, _, function = target.partition(":")
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
