"""Run simulator sweeps on a Dask distributed cluster.

A sweep is embarrassingly parallel over configurations: each configuration is one Dask task, run
by :func:`fgrpo_theory.sim.run_one` on a worker, and its long-format DataFrame comes back to the
client, which writes the configuration's Parquet file once, atomically (the simulator's own
layout). Because the simulator draws every run from its own seeded random stream, a sweep run on a
cluster is bit-for-bit identical to the same sweep run locally.

The scheduler is chosen by a string (the CLI's ``--scheduler``):

``"local"``
    no Dask at all: the simulator's own threads (the default).
``"local-cluster:N"``
    start a :class:`distributed.LocalCluster` of ``N`` worker processes with one thread each on
    this machine, and close it afterwards.
``"tcp://host:port"`` (or ``tls://``)
    connect a :class:`distributed.Client` to a running scheduler (``dask scheduler`` plus
    ``dask worker`` processes with ``fgrpo-theory`` installed).

Robustness: a task that raises is retried by Dask (``retries``); a task whose worker process dies
is rescheduled on another worker (the scheduler's ``allowed-failures``). Either way a
configuration's result arrives at the client at most once, and its file is written by an atomic
rename, so a retry can never duplicate rows. Configurations whose files already exist are skipped
when resuming.

Cores: every task limits its own Numba thread count (default one thread per task: Dask supplies
the parallelism, one task per worker thread), so workers never oversubscribe their cores. Each
worker process compiles the kernels at most once and usually just loads them from Numba's on-disk
cache. A script that starts a ``local-cluster`` must do so under ``if __name__ == "__main__":``
(the workers are spawned processes that import the script). A local cluster serves no dashboard
unless asked (``dashboard=True``), and then only on 127.0.0.1.

Before a :class:`distributed.Client` connects to a ``tcp://`` address, a raw socket reads the
first bytes the server sends (a Dask scheduler opens every connection with its handshake): a
service that is not Dask is refused in one line within ``connect_timeout`` seconds (default 5).

Dask is imported lazily: ``import fgrpo_theory.distributed`` works without it, and choosing a
non-local scheduler without ``dask[distributed]`` installed raises :class:`ValueError` telling the
user to ``pip install "fgrpo-theory[dask]"``.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._scheduler import (
    INSTALL_HINT,
    MAX_LOCAL_WORKERS,  # noqa: F401 (re-exported)
    SchedulerSpec,
    _as_spec,
    parse_scheduler,
    probe_dask_scheduler,
    require_distributed,
)
from ._validate import check_scalar, fail, format_value

if TYPE_CHECKING:
    import pandas as pd
    from distributed import Client, LocalCluster

__all__ = [
    "run_sweep_distributed",
    "sweep_executor",
    "INSTALL_HINT",
    "SchedulerSpec",
    "parse_scheduler",
    "require_distributed",
    "limit_numba_threads",
    "DaskExecutor",
    "open_executor",
]


def limit_numba_threads(n: int | None) -> int:
    """Limit the calling thread's Numba parallel thread count to ``n`` (capped at the pool size).

    Numba's thread count is thread-local, so each Dask worker thread limits its own tasks.

    Parameters
    ----------
    n : int or None
        Threads for parallel Numba kernels called from this thread; ``None`` changes nothing.

    Returns
    -------
    int
        The count in effect.
    """
    import numba

    if n is not None:
        from .sim.threads import choose_threads

        return choose_threads(n)  # (a choice: simulate does not cap it at a CPU limit)
    return numba.get_num_threads()


def _run_task(fn: Callable[..., Any], threads: int | None, args: tuple, kwargs: dict) -> Any:
    """What a worker runs: limit Numba's threads, then call ``fn(*args, **kwargs)``."""
    limit_numba_threads(threads)
    return fn(*args, **kwargs)


def _package_version() -> str:
    """Run on every worker when connecting: the fgrpo-theory version it imports."""
    from . import __version__

    return __version__


def _task_key(fn: Callable[..., Any], label: str | None) -> str:
    import uuid

    base = getattr(fn, "__name__", "task")
    return f"{base}-{label}-{uuid.uuid4().hex[:8]}" if label else f"{base}-{uuid.uuid4().hex}"


def _in_order(futures: list[cf.Future], progress: bool = False) -> Iterator[Any]:
    bar = None
    console = None
    if progress and futures:
        from rich.console import Console

        console = Console(stderr=True)
    # a bar only on a terminal: a transient bar on a pipe or file leaves an empty line
    if console is not None and console.is_terminal:
        from rich.progress import Progress

        bar = Progress(console=console, transient=True)
        task = bar.add_task(f"{len(futures)} tasks on the cluster", total=len(futures))
        for fut in futures:  # Progress is thread-safe; callbacks run in the client's threads
            fut.add_done_callback(lambda _f: bar.advance(task))
        bar.start()
    try:
        for fut in futures:
            yield fut.result()
    finally:
        for fut in futures:
            fut.cancel()
        if bar is not None:
            bar.stop()


def _label(item: Any) -> str | None:
    """A readable Dask key part for a task: the config hash for a SimConfig."""
    from .sim.config import SimConfig
    from .sim.grid import config_hash

    return config_hash(item) if isinstance(item, SimConfig) else None


class DaskExecutor(cf.Executor):
    """A :class:`concurrent.futures.Executor` that runs each call as one retried Dask task.

    Use it as a context manager: entering connects to (or starts) the cluster, leaving closes the
    client and any cluster it started. ``submit`` returns ordinary
    :class:`concurrent.futures.Future` objects, so code written for a thread or process pool (and
    :func:`concurrent.futures.as_completed`) works unchanged.

    Parameters
    ----------
    scheduler : str or SchedulerSpec
        ``"local-cluster:N"`` or ``"tcp://host:port"`` (see :func:`parse_scheduler`; ``"local"``
        is refused here: use :func:`open_executor`, which returns ``None`` for it).
    threads_per_task : int
        Numba threads each task may use (default 1: Dask supplies the parallelism, one task per
        worker thread, so workers never oversubscribe their cores).
    retries : int
        How many times Dask re-runs a task that raised; also the number of worker deaths a task
        may survive on a cluster this executor starts (the scheduler's ``allowed-failures``).
    connect_timeout : float
        Seconds to wait for a ``tcp://`` scheduler before giving up with a ValueError.
    dashboard : bool
        Serve the Dask dashboard of a cluster this executor starts, on 127.0.0.1 only (default:
        no dashboard).
    name : str
        Parameter name used in error messages.

    Examples
    --------
    >>> with DaskExecutor("local-cluster:2") as ex:                    # doctest: +SKIP
    ...     futures = [ex.submit(pow, 2, k) for k in range(4)]
    ...     [f.result() for f in futures]
    [1, 2, 4, 8]
    """

    def __init__(
        self,
        scheduler: str | SchedulerSpec = "local-cluster:2",
        *,
        threads_per_task: int = 1,
        retries: int = 3,
        connect_timeout: float = 5.0,
        dashboard: bool = False,
        name: str = "--scheduler",
    ) -> None:
        spec = _as_spec(scheduler, name)
        if spec.kind == "local":
            fail(name, spec.text, "a Dask scheduler for DaskExecutor ('local' needs no executor)")
        if isinstance(threads_per_task, bool) or not isinstance(threads_per_task, int):
            fail("threads_per_task", threads_per_task, "an integer >= 1")
        if threads_per_task < 1:
            fail("threads_per_task", threads_per_task, ">= 1")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            fail("retries", retries, "an integer >= 0")
        check_scalar("connect_timeout", connect_timeout, lo=0.0, lo_open=True)
        self.spec = spec
        self.threads_per_task = int(threads_per_task)
        self.retries = int(retries)
        self.connect_timeout = float(connect_timeout)
        self.dashboard = bool(dashboard)
        self.name = name
        self.client: Client | None = None
        self.cluster: LocalCluster | None = None
        #: Seconds spent starting the cluster or connecting to it.
        self.startup_seconds = float("nan")
        self._executor: cf.Executor | None = None
        #: Number of tasks submitted so far (each configuration is one task).
        self.tasks_submitted = 0
        #: Show a progress bar (on stderr) while :meth:`__call__` waits for a sweep's tasks.
        self.progress = False

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> DaskExecutor:
        """Connect to (or start) the cluster; called by ``__enter__``. Idempotent.

        Whatever ends the start (an error, Ctrl-C) closes what was started before it propagates
        (``__exit__`` does not run when ``__enter__`` raises)."""
        if self.client is not None:
            return self
        distributed = require_distributed(self.spec, self.name)
        t0 = time.perf_counter()
        try:
            if self.spec.kind == "local-cluster":
                self._start_local_cluster(distributed)
            else:
                self._connect(distributed)
        except BaseException:
            self.shutdown(wait=False, cancel_futures=True)
            raise
        self.startup_seconds = time.perf_counter() - t0
        self._executor = self.client.get_executor(retries=self.retries, pure=False)
        return self

    def _start_local_cluster(self, distributed: Any) -> None:
        """Start the LocalCluster (``self.cluster``, ``self.client``) with worker processes that
        never see the terminal's Ctrl-C: :func:`fgrpo_theory._local_cluster.start_local_cluster`.
        """
        from ._local_cluster import start_local_cluster

        start_local_cluster(self, distributed)

    def _connect(self, distributed: Any) -> None:
        """Connect to a running scheduler: the probe, the client and the first worker share one
        deadline of ``connect_timeout`` seconds (an unreachable address fails within it)."""
        deadline = time.monotonic() + self.connect_timeout

        def left() -> float:
            return max(deadline - time.monotonic(), 0.05)

        probe_dask_scheduler(self.spec.address, self.connect_timeout, self.name)
        if self.spec.address.startswith("tls://") and not _tls_configured():
            # Client would raise TypeError and leave a half-built client whose finalizer
            # prints a traceback 10 s later: refused here, in one line
            fail(
                self.name,
                self.spec.text,
                "a tcp:// address, or a tls:// one with TLS certificates in Dask's "
                "configuration (distributed.comm.tls.client.cert and .key)",
            )
        try:
            self.client = distributed.Client(
                self.spec.address, timeout=left(), set_as_default=False
            )
        except (OSError, TimeoutError) as e:
            fail(
                self.name,
                self.spec.text,
                f"a reachable Dask scheduler (no answer within "
                f"{format_value(self.connect_timeout)} s: {type(e).__name__})",
            )
        except Exception as e:  # e.g. a non-Dask service answering on that port
            fail(
                self.name,
                self.spec.text,
                f"the address of a Dask scheduler (connecting failed: {type(e).__name__})",
            )
        try:  # a scheduler without workers would leave every task pending forever
            self.client.wait_for_workers(1, timeout=left())
        except (OSError, TimeoutError):
            self.close_client()
            fail(
                self.name,
                self.spec.text,
                f"a Dask scheduler with at least one worker (none joined within "
                f"{format_value(self.connect_timeout)} s)",
            )
        self._check_worker_versions()

    def _check_worker_versions(self) -> None:
        """Refuse workers that cannot import this package or run another version of it.

        Configuration hashes include the package version, so mixed versions would file results
        under names that do not match their contents.
        """
        from . import __version__

        assert self.client is not None
        try:
            versions = self.client.run(_package_version)
        except Exception as e:
            self.close_client()
            fail(
                self.name,
                self.spec.text,
                f"a cluster whose workers can import fgrpo_theory ({type(e).__name__} on a "
                "worker: install fgrpo-theory in the workers' environment)",
            )
        bad = sorted({v for v in versions.values() if v != __version__})
        if bad:
            self.close_client()
            fail(
                self.name,
                self.spec.text,
                f"a cluster whose workers run fgrpo-theory {__version__} like this client "
                f"(workers run {', '.join(bad)})",
            )

    def close_client(self) -> None:
        """Close the client (not a cluster it did not start)."""
        if self.client is not None:
            try:
                self.client.close()
            finally:
                self.client = None

    def __enter__(self) -> DaskExecutor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown(wait=False, cancel_futures=True)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Close the client, and the LocalCluster if this executor started it. Idempotent."""
        if self._executor is not None:
            try:
                self._executor.shutdown(wait=wait and not cancel_futures)
            finally:
                self._executor = None
        self.close_client()
        if self.cluster is not None:
            try:
                self.cluster.close()
            finally:
                self.cluster = None

    # -- work ---------------------------------------------------------------------------------
    @property
    def n_workers(self) -> int:
        """Number of workers currently connected."""
        if self.client is None:
            return 0
        return len(self.client.scheduler_info(n_workers=-1)["workers"])

    @property
    def total_threads(self) -> int:
        """Worker threads across the cluster (how many tasks run at once)."""
        if self.client is None:
            return 0
        return sum(self.client.nthreads().values())

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future:
        """Run ``fn(*args, **kwargs)`` as one Dask task (retried, Numba threads limited).

        ``fn`` and its arguments must be picklable and importable on the workers (for a remote
        cluster: ``fgrpo-theory`` installed in the workers' environment).
        """
        return self.submit_labeled(None, fn, *args, **kwargs)

    def submit_labeled(
        self, label: str | None, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> cf.Future:
        """Like :meth:`submit`, with ``label`` (e.g. a config hash) in the task's Dask key."""
        if self._executor is None:
            self.start()
        assert self._executor is not None
        self.tasks_submitted += 1
        return self._executor.submit(
            _run_task, fn, self.threads_per_task, args, kwargs, key=_task_key(fn, label)
        )

    def __call__(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Any]:
        """The simulator's sweep hook: ``fn(item)`` for every item, results in item order.

        This is the ``executor`` contract of :func:`fgrpo_theory.sim.run_sweep`: all items are
        submitted at once (one Dask task each, in this order, so they also tend to finish in this
        order), and results are yielded lazily in item order as they arrive, so the caller writes
        each configuration's file while later ones still run. A task that raises after its
        retries re-raises here; the remaining tasks are then cancelled.
        """
        futures = [self.submit_labeled(_label(item), fn, item) for item in items]
        return _in_order(futures, self.progress)

    def map_unordered(
        self, fn: Callable[[Any], Any], items: Iterable[Any]
    ) -> Iterator[tuple[int, Any]]:
        """Yield ``(index, fn(item))`` in completion order; the first task error is raised."""
        futures = {self.submit(fn, item): i for i, item in enumerate(items)}
        try:
            for fut in cf.as_completed(futures):
                yield futures[fut], fut.result()
        finally:
            for fut in futures:
                fut.cancel()


def open_executor(
    scheduler: str | SchedulerSpec = "local", *, name: str = "--scheduler", **options: Any
) -> DaskExecutor | None:
    """Return ``None`` for ``"local"`` (the simulator's own threads), else a :class:`DaskExecutor`
    built with ``options`` (its ``threads_per_task``, ``retries``, ``connect_timeout``,
    ``dashboard``).

    The executor is not started: use it in a ``with`` block. Parsing errors, and a missing
    ``dask[distributed]`` for a non-local scheduler, raise :class:`ValueError` immediately.
    """
    spec = _as_spec(scheduler, name)
    if spec.kind == "local":
        return None
    require_distributed(spec, name)
    return DaskExecutor(spec, name=name, **options)


def sweep_executor(
    scheduler: str | SchedulerSpec = "local", **options: Any
) -> AbstractContextManager[DaskExecutor | None]:
    """Context manager for :func:`fgrpo_theory.sim.run_sweep`'s ``executor`` argument.

    Yields ``None`` for ``"local"`` (run_sweep then uses the simulator's own threads), otherwise a
    started :class:`DaskExecutor`, closed (with any LocalCluster it started) on exit; ``name`` and
    ``options`` are :func:`open_executor`'s. This is the one line a sweep runner needs::

        with sweep_executor(scheduler) as ex:
            df = run_sweep(sweep, out_dir, executor=ex)
    """
    ex = open_executor(scheduler, **options)
    return nullcontext() if ex is None else ex


@contextmanager
def executor_for_configs(
    spec: SchedulerSpec,
    configs: list[Any],
    out_dir: str | Path | None,
    *,
    resume: bool,
    fmt: str,
    key: Callable[[Any], str],
    code: Callable[[], str],
    threads_per_task: int | None,
    retries: int,
    connect_timeout: float,
    progress: bool | None,
) -> Iterator[DaskExecutor | None]:
    """The :func:`sweep_executor` a sweep of ``configs`` runs on, with no cluster started when
    resume would reuse every result file in ``out_dir`` (named by ``key``, written by the code
    whose digest is ``code()``): a finished sweep is read back locally."""
    from ._trust import folder_key
    from .sim.sweep import result_path, reusable_result

    if spec.kind != "local":
        require_distributed(spec)
        fkey = folder_key(out_dir)[0] if out_dir is not None and Path(out_dir).is_dir() else None
        if fkey is not None and resume:
            digest = code()
            paths = [(result_path(out_dir, c, fmt, key), c) for c in configs]
            if all(
                reusable_result(p, c, key=key, code=digest, folder_key=fkey)[0] is not None
                for p, c in paths
            ):
                spec = parse_scheduler("local")  # nothing to run: no cluster to start
    with sweep_executor(
        spec,
        threads_per_task=1 if threads_per_task is None else threads_per_task,
        retries=retries,
        connect_timeout=connect_timeout,
    ) as ex:
        if ex is not None:
            ex.progress = bool(progress)
        yield ex


def _tls_configured() -> bool:
    """Whether Dask's configuration names a client certificate for tls:// connections."""
    import dask

    return bool(dask.config.get("distributed.comm.tls.client.cert", None))


def run_sweep_distributed(
    sweep_or_configs: Any,
    out_dir: str | Path | None = None,
    scheduler: str | SchedulerSpec = "local-cluster:2",
    *,
    resume: bool = True,
    threads_per_task: int | None = None,
    retries: int = 3,
    connect_timeout: float = 5.0,
    progress: bool = False,
    fmt: str = "parquet",
) -> pd.DataFrame:
    """Run a simulator sweep with one Dask task per configuration.

    :func:`fgrpo_theory.sim.run_sweep` with a :func:`sweep_executor`: same validation, same
    on-disk layout (``<out_dir>/<config_hash>.<fmt>``, each written once, atomically, by this
    process when the configuration's result arrives), same resume rule (configurations whose
    file exists are read, not run) and the same DataFrame as a local run, bit for bit.

    Parameters
    ----------
    sweep_or_configs : mapping, SimConfig or iterable of SimConfig
        What :func:`fgrpo_theory.sim.run_sweep` accepts.
    out_dir : path, optional
        Result folder (created if needed). Only this (client) process writes to it, so workers
        need no shared file system.
    scheduler : str or SchedulerSpec
        ``"local"``, ``"local-cluster:N"`` or ``"tcp://host:port"`` (see
        :func:`parse_scheduler`).
    resume : bool
        Skip configurations whose result file exists in ``out_dir``.
    threads_per_task : int, optional
        Numba threads per task on the workers (default 1: one task per worker thread); with
        ``"local"`` it is the simulator's ``threads`` (default: Numba's setting).
    retries : int
        Dask retries of a failed task (and worker deaths tolerated on a cluster started here).
    connect_timeout : float
        Seconds to wait for a ``tcp://`` scheduler.
    progress : bool
        Show a progress bar on stderr (tasks completed, on a cluster).
    fmt : {"parquet", "csv"}
        File format in ``out_dir``.

    Returns
    -------
    pandas.DataFrame
        The long-format results of every configuration, in configuration order.

    Examples
    --------
    >>> sweep = {"K": 6, "N": [4, 8], "gamma": [0.0, 1.0], "steps": 50, "seeds": 4}
    >>> df = run_sweep_distributed(sweep, "results/", "local-cluster:2")  # doctest: +SKIP
    """
    from .sim import expand_grid, run_sweep
    from .sim.grid import config_hash
    from .sim.sweep import simulator_digest

    spec = _as_spec(scheduler, "--scheduler")
    configs = expand_grid(sweep_or_configs)  # validate before starting any cluster
    with executor_for_configs(
        spec,
        configs,
        out_dir,
        resume=resume,
        fmt=fmt,
        key=config_hash,
        code=simulator_digest,
        threads_per_task=threads_per_task,
        retries=retries,
        connect_timeout=connect_timeout,
        progress=progress,
    ) as ex:
        return run_sweep(
            configs,
            out_dir,
            resume=resume,
            threads=threads_per_task if ex is None else None,
            progress=progress,
            executor=ex,
            fmt=fmt,
        )
