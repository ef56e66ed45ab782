"""Starting a local Dask cluster whose worker processes never see the terminal's Ctrl-C, and
undoing a start that failed or was interrupted (used by :class:`fgrpo_theory.distributed.
DaskExecutor` for ``"local-cluster:N"``; split from :mod:`fgrpo_theory.distributed`, which keeps
the executor and the sweeps).

The pieces: the workers are forked from Python's fork server, which preloads
:mod:`fgrpo_theory._forkserver_sigint` and so ignores SIGINT (and hands that to every worker);
the fork server itself starts with SIGINT blocked (a Ctrl-C while that new interpreter starts
killed it half way); a Ctrl-C while the cluster is being built is deferred until it is whole, and
then reported once the cluster is closed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .distributed import DaskExecutor

__all__ = ["start_local_cluster"]


def start_local_cluster(ex: DaskExecutor, distributed: Any) -> None:
    """Start the LocalCluster with worker processes that never see the terminal's Ctrl-C.

    The terminal sends Ctrl-C to every process of the foreground group, the workers
    included: a worker still importing or unpickling its start-up state printed a
    KeyboardInterrupt traceback, and one whose parent had already gone printed another.
    So the workers are forked from a fork server (Dask's ``forkserver`` method) that ignores
    SIGINT (:func:`_start_fork_server`): Python's fork server hands its children that
    disposition, so the workers ignore Ctrl-C and this process, which gets it, closes
    them. The fork server gets the environment Dask gives spawned workers
    (``distributed.nanny.pre-spawn-environ``: one OpenMP/BLAS thread and so on), and
    workers fork from it already holding Dask's imports (faster starts). A Ctrl-C while
    the cluster is still being built is acted on when it is whole (a second one stops the
    wait): the cluster is then closed cleanly before the interrupt propagates, since
    stopping half way left workers still unpickling their start-up state from a process that
    was gone (tracebacks), and a cluster in its ``init`` state that Dask's exit handler
    failed to close (another).
    """
    import multiprocessing
    import signal
    import threading

    import dask

    from ._sigint import deliver

    spec_cluster = getattr(getattr(distributed, "deploy", None), "SpecCluster", None)
    instances = getattr(spec_cluster, "_instances", None)
    before = set(instances) if instances is not None else set()
    children = set(multiprocessing.active_children())
    pressed: list[int] = []
    handler: Any = None  # the handler replaced (set below), to hand the Ctrl-C on to

    def defer(signum: int, frame: object) -> None:
        if pressed:  # a second Ctrl-C: stop waiting for the cluster
            pressed.append(signum)
            deliver(handler, frame)
            raise KeyboardInterrupt
        pressed.append(signum)

    main = threading.current_thread() is threading.main_thread()
    handler = signal.signal(signal.SIGINT, defer) if main else None
    # Python has no fork server on Windows: there the workers are spawned as Dask does
    fork = "forkserver" in multiprocessing.get_all_start_methods()
    method = "forkserver" if fork else dask.config.get(_MP_METHOD, "spawn")
    with dask.config.set({_MP_METHOD: method}):
        try:
            if fork:
                _start_fork_server(distributed)
            ex.cluster = distributed.LocalCluster(
                n_workers=ex.spec.n_workers,
                threads_per_worker=1,
                processes=True,
                # Every server on loopback only, never every interface: the scheduler, the
                # workers and the scheduler's HTTP server (Dask starts the latter even with
                # the dashboard off, on 0.0.0.0:8787 unless told otherwise), which gets a
                # free port; the dashboard pages are served there only when asked.
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",
                scheduler_port=0,
                silence_logs=logging.CRITICAL,
                scheduler_kwargs={
                    "allowed_failures": max(ex.retries, 1),
                    "dashboard": ex.dashboard,
                },
            )
        except BaseException as e:
            _forget_half_built_clusters(instances, before, children)
            if len(pressed) == 1:  # acted on now: the handler replaced too (not yet called)
                deliver(handler)
            if pressed and not isinstance(e, KeyboardInterrupt):
                # a Ctrl-C came first: whatever failed after it (a worker that got it
                # too), the user asked to stop, and that is what is reported
                raise KeyboardInterrupt from e
            if isinstance(e, RuntimeError):
                raise RuntimeError(
                    f"could not start the worker processes of {ex.spec.text!r} ({e}); a "
                    "script that starts a LocalCluster must do so under `if __name__ == "
                    '"__main__":` (workers are spawned processes that import the script)'
                ) from e
            raise
        else:
            ex.client = distributed.Client(ex.cluster)
        finally:
            if main:
                signal.signal(signal.SIGINT, handler)
    if pressed:  # pressed while the cluster started: start() closes it, then propagates
        deliver(handler)  # the handler replaced acts now (the console script's watchdog arms)
        raise KeyboardInterrupt


def _start_fork_server(distributed: Any) -> None:
    """Start Python's fork server (if not running) so that the workers forked from it ignore the
    terminal's Ctrl-C: it preloads :mod:`fgrpo_theory._forkserver_sigint` after Dask's own
    modules, and gets the environment Dask gives spawned workers
    (``distributed.nanny.pre-spawn-environ``: one OpenMP/BLAS thread and so on). This process's
    own handling of SIGINT is not touched (see :func:`start_local_cluster`)."""
    import os
    import sys
    from multiprocessing import forkserver, resource_tracker

    import dask

    ctx = distributed.utils.get_mp_context()  # registers Dask's imports to preload
    server = getattr(forkserver, "_forkserver", None)
    preload = list(getattr(server, "_preload_modules", None) or ["distributed"])
    if _SIGINT_PRELOAD not in preload:
        ctx.set_forkserver_preload([*preload, _SIGINT_PRELOAD])
    environ = {
        str(k): str(v)
        for k, v in (dask.config.get("distributed.nanny.pre-spawn-environ", {}) or {}).items()
    }
    saved = {k: os.environ.get(k) for k in environ}
    try:
        os.environ.update(environ)
        # Workers busy in a kernel when the cluster closes are killed (they ignore Ctrl-C), and
        # the named semaphores they held are then removed by Python's resource tracker, which
        # also warned about each ("There appear to be 12 leaked semaphore objects"): the one
        # tracker of this process is started, if it is not yet running, with that warning off.
        if "ignore::UserWarning" not in sys.warnoptions:
            sys.warnoptions.append("ignore::UserWarning")
            try:
                resource_tracker.ensure_running()
            finally:
                sys.warnoptions.remove("ignore::UserWarning")
        # The fork server is a new interpreter: a Ctrl-C while it imports ``site`` or its
        # preloaded modules killed it with "Fatal Python error: init_import_site" or a
        # traceback (and the cluster then failed to start). It starts with SIGINT blocked, a
        # mask it inherits through fork and exec, until it ignores SIGINT and unblocks it
        # (:mod:`fgrpo_theory._forkserver_sigint`); here a Ctrl-C in that window stays
        # pending and reaches this process's handler once unblocked.
        with _sigint_blocked():
            forkserver.ensure_running()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Block SIGINT in the calling thread for the ``with`` block (where the platform can)."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


#: Dask's configuration key for how worker processes are started.
_MP_METHOD = "distributed.worker.multiprocessing-method"
#: The module the fork server preloads to ignore SIGINT (and hand that to the workers).
_SIGINT_PRELOAD = "fgrpo_theory._forkserver_sigint"


def _forget_half_built_clusters(instances: Any, before: set, children: set) -> None:
    """Undo, quietly, what a failed or interrupted ``LocalCluster(...)`` left behind: the worker
    processes it started are killed (a worker still unpickling its start-up state when this
    process exits prints a traceback: its semaphores are gone), and its cluster object is closed
    and taken off Dask's list of clusters to close at exit (closing a cluster still in its
    ``init`` state raises, and Dask's exit handler printed that traceback). ``before`` and
    ``children``: the clusters and processes that existed before, which are left alone."""
    import multiprocessing

    for proc in multiprocessing.active_children():
        if proc not in children:
            try:
                proc.kill()
                proc.join(timeout=5)
            except BaseException:  # noqa: S110 - gone meanwhile
                pass
    if instances is None:
        return
    for cluster in [c for c in list(instances) if c not in before]:
        try:
            cluster.close(timeout=2)
        except BaseException:  # noqa: S110 - half built: nothing more to do
            pass
        instances.discard(cluster)
