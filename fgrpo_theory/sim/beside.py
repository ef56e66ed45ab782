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
affinity mask, and its cgroups' CPU quota if one is set: :func:`cpu_quota`), kernels
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


#: Where Linux mounts the cgroup file systems (v2: one tree; v1: a tree per controller).
CGROUP = Path("/sys/fs/cgroup")
#: The cgroups of this process, one line per hierarchy (``0::/path`` for v2, ``3:cpu,cpuacct:/path``
#: for a v1 hierarchy).
PROC_CGROUP = Path("/proc/self/cgroup")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _ratio(quota: str | None, period: str | None) -> float | None:
    try:
        q, p = int(quota or ""), int(period or "")
    except ValueError:  # "max" (v2): no limit; or nothing readable
        return None
    return q / p if q > 0 and p > 0 else None  # v1 writes -1 for no limit


def _limit(folder: Path, v2: bool) -> float | None:
    """The CPU limit set in one cgroup folder, or None."""
    if v2:
        text = _read(folder / "cpu.max")
        quota, _, period = (text or "").partition(" ")
        return _ratio(quota, period)
    return _ratio(_read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us"))


def cpu_quota(root: Path | None = None, proc: Path | None = None) -> float | None:
    """The CPUs this process's cgroups let it use on average: the smallest CPU quota over its
    period (as ``docker --cpus``, a Kubernetes CPU limit or systemd's ``CPUQuota=`` set it) of
    its cgroup and every cgroup above it, in the v2 tree or the v1 ``cpu`` hierarchy; None for
    no limit, or none readable. A process limited to one CPU still sees every core of its host
    in its affinity mask. ``root``, ``proc``: :data:`CGROUP` and :data:`PROC_CGROUP` (tests)."""
    root = CGROUP if root is None else root
    text = _read(PROC_CGROUP if proc is None else proc)
    places = []  # (the hierarchy's folder, this process's path in it, v2)
    for line in (text or "").splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        parts = [p for p in path.strip().split("/") if p and p not in (".", "..")]
        if line.startswith("0::"):
            places.append((root, parts, True))
        elif "cpu" in controllers.split(","):
            for name in dict.fromkeys([controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu"]):
                places.append((root / name, parts, False))
    if not places:  # no /proc (or nothing in it): the mount's top, as a container sees it
        places = [(root, [], True), (root / "cpu", [], False)]
    limits = []
    for top, parts, v2 in places:
        for depth in range(len(parts), -1, -1):
            limit = _limit(top.joinpath(*parts[:depth]), v2)
            if limit is not None:
                limits.append(limit)
    return min(limits) if limits else None


def _cores() -> float:
    """The CPUs this process may use: its affinity mask, or fewer under a cgroup CPU quota
    (there a helper would only take CPU time from this process)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1
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
