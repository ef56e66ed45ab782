"""Timing and reporting helpers shared by the benchmark scripts (not part of the package).

Every benchmark script measures the simulator and a reference implementation IN THE SAME RUN, takes
the best of several repeats (the machine is shared, so the minimum is the least noisy estimate of
the cost), and prints one table: what was measured, the time or rate, the target, the ratio against
the reference and whether the target was met. Targets are reported, never asserted: a script exits
0 even when it prints ``MISSED``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "REPO",
    "Row",
    "Timing",
    "measure",
    "measure_many",
    "measure_rounds",
    "paired_ratio",
    "same_core",
    "RefWorker",
    "best_of",
    "header",
    "print_table",
    "load_module",
    "fmt_time",
    "fmt_rate",
    "parallel_headroom",
]

#: Repository root (the parent of ``benchmarks/``).
REPO = Path(__file__).resolve().parent.parent


def load_module(name: str):
    """Import ``benchmarks/<name>.py`` by path (``benchmarks/`` is not a package)."""
    path = Path(__file__).resolve().parent / f"{name}.py"
    mod_name = f"_fgrpo_bench_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    return mod


@dataclass
class Timing:
    """Best (smallest) wall-clock and process CPU time of repeated calls, in seconds.

    On a shared machine the wall time of a single-threaded call includes the time the process
    waited for a core; its CPU time does not, so ``cpu`` is the per-core cost of one thread.
    For multi-threaded calls only ``wall`` is meaningful.
    """

    wall: float
    cpu: float

    def __truediv__(self, k: float) -> Timing:
        return Timing(self.wall / k, self.cpu / k)


def measure_many(
    fns: list[Callable[[], object]], repeats: int = 5, min_time: float = 0.0
) -> list[Timing]:
    """Time several functions INTERLEAVED (f1, f2, ..., f1, f2, ...), best of ``repeats`` each.

    Interleaving exposes every function to the same background load, so their ratio is fairer
    than timing one after the other. ``min_time`` extends the repeats until each function has
    run at least that long in total. A function may return a :class:`Timing` (a call timed in
    a :class:`RefWorker`); that timing is used instead of the local clock.
    """
    rounds = measure_rounds(fns, repeats, min_time)
    return [
        Timing(min(r[i].wall for r in rounds), min(r[i].cpu for r in rounds))
        for i in range(len(fns))
    ]


def measure_rounds(
    fns: list[Callable[[], object]], repeats: int = 5, min_time: float = 0.0
) -> list[list[Timing]]:
    """Every round of :func:`measure_many`: ``rounds[r][i]`` is call ``r`` of ``fns[i]``."""
    rounds: list[list[Timing]] = []
    total = [0.0 for _ in fns]
    while len(rounds) < repeats or min(total) < min_time:
        row = []
        for i, fn in enumerate(fns):
            c0 = time.process_time()
            t0 = time.perf_counter()
            res = fn()
            dt = time.perf_counter() - t0
            dc = time.process_time() - c0
            if isinstance(res, Timing):  # measured elsewhere (a RefWorker subprocess)
                dt, dc = res.wall, res.cpu
            row.append(Timing(dt, dc))
            total[i] += dt
        rounds.append(row)
    return rounds


def paired_ratio(rounds: list[list[Timing]], ref: int, fn: int) -> float:
    """Median over rounds of ``fns[ref]``'s CPU time over ``fns[fn]``'s in the same round.

    Calls next to each other in a round run close together in time. The development machine's
    speed moves by up to 1.5x between phases of a fraction of a second to a few seconds, and the
    best of each function's calls can come from different phases.
    """
    return statistics.median(r[ref].cpu / r[fn].cpu for r in rounds)


@contextlib.contextmanager
def same_core() -> Iterator[None]:
    """Pin the calling thread to the core a one-thread :class:`RefWorker` pins itself to.

    Threads and processes started inside the block inherit that core (a :class:`RefWorker`
    started inside it runs there); threads started before it keep theirs, and only the calling
    thread's affinity is restored. Why: in 20 interleaved rounds of the population benchmark
    (2026-11-29) with this process on any core, the kernel was slow (49-58 ms against its usual
    39-41) in 9 rounds and the pinned JAX call beside it was slow too in 3 of them; with both on
    one core, in 2 runs of 12 rounds, the kernel was slow in 12 rounds and JAX in all 12. The two
    cores seem not always equally fast. Without ``sched_setaffinity`` (macOS) this does nothing.
    """
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(old)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


def _worker_init(torch_threads: int) -> None:
    # A one-thread reference is pinned to one core: XLA starts a thread pool whatever XLA_FLAGS
    # say (its CPU time per step was measured at twice its wall time), and a per-core comparison
    # must not hand a reference a second core. Threads then share that core, so CPU ~ wall.
    if torch_threads == 1 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.set_num_threads(torch_threads)


def _worker_call(module: str, func: str, args: tuple, kwargs: dict) -> Timing:
    fn = getattr(load_module(module), func)
    c0 = time.process_time()
    t0 = time.perf_counter()
    fn(*args, **kwargs)
    return Timing(time.perf_counter() - t0, time.process_time() - c0)


class RefWorker:
    """A clean subprocess that times reference implementations (NumPy, PyTorch, JAX).

    The simulator's Numba kernels run on an OpenMP thread pool whose threads keep spinning after a
    parallel region; measured in the same process, PyTorch (with its own OpenMP runtime) was
    found to slow down several-fold (0.93 ms -> 18.7 ms per step in one probe). So references run
    in a spawned process that never imports Numba or the simulator, one call at a time, so that
    their calls can be interleaved with the simulator's (see :func:`measure_many`). PyTorch gets
    ``torch.set_num_threads(torch_threads)`` and BLAS/OpenMP pools as many threads (1: the
    per-core comparison; NumPy's dot products would otherwise run on a multi-threaded BLAS).
    """

    def __init__(self, torch_threads: int = 1) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        # BLAS/OpenMP pools and XLA's CPU thread pool read these when they load, before any
        # initializer could run (the child imports the benchmark script, hence NumPy, first): set
        # them for the spawn only. XLA_FLAGS makes JAX run each operation on torch_threads threads.
        names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")
        saved = {k: os.environ.get(k) for k in names}
        os.environ.update({k: str(torch_threads) for k in names[:3]})
        # several threads: JAX sees one CPU device per thread (the seeds are split over them)
        os.environ["XLA_FLAGS"] = (
            f"--xla_force_host_platform_device_count={torch_threads}"
            if torch_threads > 1
            else "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        )
        try:
            self._pool = ctx.Pool(1, initializer=_worker_init, initargs=(torch_threads,))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def timed(self, module: str, func: str, *args: Any, **kwargs: Any) -> Callable[[], Timing]:
        """A function that runs ``module.func(*args, **kwargs)`` in the worker, returning its
        timing (arguments are sent once per call, outside the timed region)."""
        return lambda: self._pool.apply(_worker_call, (module, func, args, kwargs))

    def close(self) -> None:
        self._pool.terminate()
        self._pool.join()

    def __enter__(self) -> RefWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def measure(fn: Callable[[], object], repeats: int = 5, min_time: float = 0.0) -> Timing:
    """Best wall and CPU time of ``repeats`` calls of ``fn`` (see :func:`measure_many`)."""
    return measure_many([fn], repeats, min_time)[0]


def best_of(fn: Callable[[], object], repeats: int = 5, min_time: float = 0.0) -> float:
    """Smallest wall time (seconds) of ``repeats`` calls of ``fn``."""
    return measure(fn, repeats, min_time).wall


def parallel_headroom(threads: int = 2) -> float:
    """Speed-up of ``threads`` Numba threads over 1 on a trivially parallel compute loop, now.

    On an idle 2-core machine this is about 2; when other processes occupy the cores it drops
    towards 1, and multi-threaded figures measured at the same time must be read in that light.
    """
    import numba
    import numpy as np

    @numba.njit(parallel=True, cache=False)
    def spin(n, out):
        for r in numba.prange(out.shape[0]):
            x = 0.0
            for _ in range(n):
                x = x * 0.999999 + 1.0
            out[r] = x

    out = np.zeros(64)
    spin(10, out)
    old = numba.get_num_threads()
    try:
        res = []
        for th in (1, threads):
            numba.set_num_threads(th)
            res.append(best_of(lambda: spin(400_000, out), repeats=3))
    finally:
        numba.set_num_threads(old)
    return res[0] / res[1]


def fmt_time(seconds: float) -> str:
    """Format a duration with a sensible unit."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1.0:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds:.2f} s"


def fmt_rate(rate: float, unit: str) -> str:
    """Format a rate (per second) with an SI prefix."""
    for factor, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if rate >= factor:
            return f"{rate / factor:.2f} {prefix}{unit}/s"
    return f"{rate:.1f} {unit}/s"


def header(title: str) -> None:
    """Print the benchmark title and the machine it ran on."""
    import numba
    import numpy as np

    print(f"# {title}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"# python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__},"
        f" {os.cpu_count()} logical cores, {platform.machine()}; shared machine: best of repeats"
    )
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average {load}")
    print(f"# code: {_git_state()}")


def _git_state() -> str:
    """Commit of the checkout and whether the simulator's files differ from it."""
    import subprocess

    def git(*args: str) -> str:
        try:
            res = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        except OSError:
            return ""
        return res.stdout.strip() if res.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown commit"
    dirty = git("status", "--porcelain", "--", "fgrpo_theory/sim")
    return f"{commit}" + (" + uncommitted changes in fgrpo_theory/sim" if dirty else "")


@dataclass
class Row:
    """One line of a benchmark table.

    ``ok`` is True/False when the row has a target, None when it is informational.
    """

    what: str
    value: str
    target: str = ""
    ratio: str = ""
    ok: bool | None = None


def print_table(rows: list[Row]) -> int:
    """Print the rows as an aligned text table; return the number of missed targets."""
    head = ("measured", "value", "target", "ratio vs reference", "status")
    cells = [
        (r.what, r.value, r.target, r.ratio, {True: "met", False: "MISSED", None: ""}[r.ok])
        for r in rows
    ]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
    print(line)
    print("  ".join("-" * w for w in widths))
    for c in cells:
        print("  ".join(x.ljust(w) for x, w in zip(c, widths, strict=True)).rstrip())
    missed = sum(1 for r in rows if r.ok is False)
    if missed:
        print(f"MISSED: {missed} target(s) not met (reported, not asserted)")
    sys.stdout.flush()
    return missed
