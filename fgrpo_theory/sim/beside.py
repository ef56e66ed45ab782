"""A cold start's two largest compilations side by side, in two processes.

A first ``simulate`` on the small-K dense path compiles two kernels that do not depend on each
other: the run loop (:func:`.ksmall.run_small`) and the metrics pass (:func:`.kmetrics._metrics`),
which the loop calls through its address (:func:`.kmetrics.call_metrics`). Numba compiles one
function at a time in a process (a global compiler lock), so :func:`compile_beside` has a helper
process compile one of them into the disk cache while this process compiles the other, then
this process loads the helper's machine code from the cache. It is the code this process would
have compiled (the same compiler, flags, sources and CPU: the cache's own checks), so the
numbers are the same.

The helper is started only where it can help: the process may run on two cores or more, and
kernels are cached in a folder (not the no-cache mode). Its output is discarded (this process
prints the compile notice). A helper that fails, or that has not finished after
:data:`HELPER_SECONDS`, is killed, and this process compiles the kernel itself, as it would
without a helper; so does a Ctrl-C, after killing it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

#: How long this process waits for the helper after its own compilation (then kills it).
HELPER_SECONDS = 300.0


def compile_beside(target: str, local: Callable[[], object]) -> None:
    """Run ``local()`` (a compilation in this process) while a helper process calls ``target``
    (``"package.module:function"``, a function of no arguments that compiles a kernel into the
    disk cache), then wait for the helper (see the module docstring for when there is none)."""
    helper = _start(target)
    try:
        local()
        if helper is not None:
            helper.wait(timeout=HELPER_SECONDS)
    except subprocess.TimeoutExpired:
        pass  # the caller compiles the kernel itself
    finally:
        if helper is not None and helper.poll() is None:
            helper.kill()
            helper.wait()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _start(target: str) -> subprocess.Popen | None:
    from .._numba_cache import NO_CACHE, kernel_cache_dir

    if _cores() < 2:
        return None
    folder = kernel_cache_dir()
    if folder == NO_CACHE:
        return None
    module, _, function = target.partition(":")
    top = getattr(sys.modules.get(module.split(".")[0]), "__file__", None)
    if top is None:  # (the target's package is this one, already imported)
        return None
    root = str(Path(top).resolve().parent.parent)  # where this very package is
    env = dict(os.environ, NUMBA_CACHE_DIR=str(folder))  # this process's cache folder
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = root + (os.pathsep + path if path else "")
    code = f"import importlib; importlib.import_module({module!r}).{function}()"
    try:
        return subprocess.Popen(
            [sys.executable, "-c", code],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return None
