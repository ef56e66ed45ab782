"""Registry of the experiments behind every figure, and the runner used by ``fgrpo-theory figures``.

The registry discovers its figures: every module of this package whose name does not start with
``_`` and that defines the module contract (see ``experiments/README.md``):

- ``TITLE: str`` (one line), ``IN_PAPER: bool``, ``COST_SECONDS: float`` (estimated wall time with
  full settings on a 2-core machine; ``figures all`` runs cheap figures first, ties by name;
  with several workers, :func:`run_all` plans an order from these costs);
- ``PARAMS``: its declared parameters (a frozen dataclass instance);
- ``compute(params, fast=False) -> pandas.DataFrame``: a tidy table computed by the library;
  ``fast=True`` reduces seeds, steps or grid sizes;
- ``plot(df, params) -> matplotlib.figure.Figure``: draws from that table only.

Figure modules outside the package are found in the folders listed in the environment variable
``FGRPO_THEORY_FIGURES_PATH`` (separated by ``os.pathsep``; each ``*.py`` there not starting with
``_`` is one figure), or passed to :func:`discover` as ``extra``.

:func:`run` caches the table (:mod:`.cache`), draws it in the paper style and writes
``<out>/<name>.pdf`` and ``.png`` with byte-identical output on reruns. Fast-mode figures carry a
"FAST PREVIEW" banner. :func:`run_all` runs several, one after another or ``workers`` at a time in
worker processes (the same files either way).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from fgrpo_theory._validate import fail

__all__ = [
    "CONTRACT",
    "PATH_ENV",
    "Experiment",
    "discover",
    "experiments",
    "names",
    "get",
    "RunResult",
    "stored_problem",
    "run",
    "shares_runs",
    "run_all",
]

#: Names every figure module defines.
CONTRACT = ("TITLE", "IN_PAPER", "COST_SECONDS", "PARAMS", "compute", "plot")
#: Environment variable listing extra folders of figure modules.
PATH_ENV = "FGRPO_THEORY_FIGURES_PATH"
_PACKAGE = __package__ or "fgrpo_theory_experiments"
_EXTRA_PREFIX = "fgrpo_theory_figures_extra"


@dataclass(frozen=True)
class Experiment:
    """One figure: its name (file stem), title, whether it is in the paper, estimated cost."""

    name: str
    title: str
    in_paper: bool
    cost_seconds: float
    module_name: str
    path: Path

    def load(self) -> ModuleType:
        """The experiment's module (imported)."""
        return _import(self.module_name, self.path)


def _import(module_name: str, path: Path) -> ModuleType:
    loaded = sys.modules.get(module_name)
    if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() == path:
        return loaded
    if module_name.startswith(_PACKAGE + "."):
        return importlib.import_module(module_name)
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[module_name]
        raise
    return mod


def _candidates(extra: Iterable[str | Path]) -> list[tuple[str, str, Path]]:
    """``(name, module name, file)`` of every non-underscore module: package, then extras."""
    here = Path(__file__).resolve().parent
    out = [
        (m.name, f"{_PACKAGE}.{m.name}", here / f"{m.name}.py")
        for m in pkgutil.iter_modules([str(here)])
        if not m.name.startswith("_") and not m.ispkg
    ]
    for folder in extra:
        folder = Path(folder)
        if not folder.is_dir():
            fail(PATH_ENV, str(folder), "a list of existing folders")
        for f in sorted(folder.glob("*.py")):
            if not f.name.startswith("_"):
                out.append((f.stem, f"{_EXTRA_PREFIX}.{f.stem}", f.resolve()))
    return out


def discover(extra: Iterable[str | Path] | None = None) -> tuple[Experiment, ...]:
    """Every figure module, cheapest first (ties by name).

    ``extra``: folders of additional figure modules; default: the folders in
    ``$FGRPO_THEORY_FIGURES_PATH``. A module that defines none of :data:`CONTRACT` is a helper
    (``registry``, ``cache``) and is skipped; one that defines only part of it is an error.
    """
    if extra is None:
        env = os.environ.get(PATH_ENV, "")
        extra = [p for p in env.split(os.pathsep) if p]
    found: dict[str, Experiment] = {}
    for name, module_name, path in _candidates(extra):
        mod = _import(module_name, path)
        have = [c for c in CONTRACT if hasattr(mod, c)]
        if not have:
            continue
        if len(have) < len(CONTRACT):
            missing = ", ".join(c for c in CONTRACT if c not in have)
            raise ValueError(f"figure module {path} must define {missing}")
        if name in found:
            raise ValueError(f"figure name {name!r} is defined twice ({found[name].path}, {path})")
        cost = mod.COST_SECONDS
        if isinstance(cost, bool) or not isinstance(cost, int | float) or not 0 <= cost < 1e9:
            fail(f"COST_SECONDS of figure module {path}", cost, "a number of seconds in [0, 1e9)")
        found[name] = Experiment(
            name, str(mod.TITLE), bool(mod.IN_PAPER), float(cost), module_name, path
        )
    return tuple(sorted(found.values(), key=lambda e: (e.cost_seconds, e.name)))


def experiments() -> tuple[Experiment, ...]:
    """:func:`discover` over the package and ``$FGRPO_THEORY_FIGURES_PATH``."""
    return discover()


def names() -> list[str]:
    """Names of all experiments, in run order."""
    return [e.name for e in experiments()]


def get(name: str) -> Experiment:
    """Look an experiment up by name (``ValueError`` listing the valid names otherwise)."""
    by_name = {e.name: e for e in experiments()}
    if name not in by_name:
        fail("figure name", name, "one of " + ", ".join(by_name))
    return by_name[name]


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` did for one figure."""

    name: str
    paths: tuple[Path, ...]
    cache_hit: bool
    seconds: float
    rows: int
    #: where the table came from: "stored" (experiments/stored/), "cache" or "computed"
    source: str = "computed"


def _is_stored(mod: ModuleType, fast: bool) -> bool:
    return bool(getattr(mod, "STORED", False)) and not fast


def stored_problem(
    name: str | Experiment, *, fast: bool = False, recompute: bool = False
) -> str | None:
    """Why :func:`run` would refuse ``name`` (a stored experiment whose stored table does not
    match the code and whose table is not in the user's cache either), else None.

    Cheap: reads the stored file's footer and the cache's, never computes.
    """
    from . import stored
    from .cache import cached_table, module_sources

    exp = name if isinstance(name, Experiment) else get(name)
    mod = exp.load()
    if not _is_stored(mod, fast) or recompute:
        return None
    code = module_sources(exp.path)
    st = stored.status(exp.name, mod.PARAMS, code)
    if st.ok:
        if stored.load(exp.name, mod.PARAMS, code) is not None:
            return None
        st = stored.StoredStatus(
            exp.name, False, "the stored table is damaged (its rows do not match their digest)"
        )
    if cached_table(exp.name, mod.PARAMS, fast=False, code=code) is not None:
        return None
    minutes = max(1, round((st.seconds or float(mod.COST_SECONDS)) / 60))
    return (
        f"figure {exp.name}: {st.reason}; recompute it with "
        f"'fgrpo-theory figures {exp.name} --recompute' (about {minutes} min on 2 cores)"
    )


def run(
    name: str | Experiment,
    out_dir: str | Path = "figures",
    formats: tuple[str, ...] | str = ("pdf", "png"),
    *,
    fast: bool = False,
    force: bool = False,
    recompute: bool = False,
    dpi: int = 300,
) -> RunResult:
    """Compute (or load from cache) one experiment's table, draw it and save the figure files.

    Parameters
    ----------
    name : str or Experiment
        Experiment name (see :func:`names`) or a discovered :class:`Experiment`.
    out_dir : str or Path
        Output folder; files are ``<out_dir>/<name>.<fmt>``.
    formats : tuple of str or str
        Figure formats (``"pdf"``, ``"png"``, ``"svg"``), or a comma-separated string.
    fast : bool
        Reduced settings (fewer seeds, steps or grid points); the figure is marked FAST PREVIEW.
    force : bool
        Recompute even if a cached table exists (simulations included); implies ``recompute``.
    recompute : bool
        For an experiment with ``STORED = True``: compute its full table even when the stored
        table (:mod:`.stored`) matches, and write the stored file when this is a checkout.
        Without it, a stored experiment is plotted from its stored table when that matches the
        code and parameters, else from the user's cache, else ``ValueError`` naming the command
        that recomputes it (:func:`stored_problem`).
    dpi : int
        Raster resolution (>= 200).
    """
    from fgrpo_theory.plotting import mark_fast_preview, paper_style, save_figure

    from . import _sim, stored
    from .cache import cached, module_sources

    exp = name if isinstance(name, Experiment) else get(name)
    mod = exp.load()
    params = mod.PARAMS
    code = module_sources(exp.path)
    t0 = time.perf_counter()
    recompute = recompute or force
    df = None
    source = "computed"
    if _is_stored(mod, fast) and not recompute:
        df = stored.load(exp.name, params, code)
        source = "stored"
        if df is None:
            problem = stored_problem(exp, fast=fast)
            if problem is not None:
                raise ValueError(problem)
    if df is None:
        _sim.RESUME = not force  # --force also reruns cached simulations
        try:
            df, hit = cached(
                exp.name,
                params,
                lambda: mod.compute(params, fast=fast),
                fast=fast,
                force=recompute,
                code=code,
            )
        finally:
            _sim.RESUME = True
        source = "cache" if hit else "computed"
        if _is_stored(mod, fast) and recompute and stored.writable():
            stored.write(exp.name, params, code, df, time.perf_counter() - t0)
    with paper_style():
        fig = mod.plot(df, params)
        if fast:
            mark_fast_preview(fig)
        paths = save_figure(fig, Path(out_dir) / exp.name, formats, dpi=dpi)
    return RunResult(
        exp.name, tuple(paths), source != "computed", time.perf_counter() - t0, len(df), source
    )


#: Most worker processes :func:`run_all` starts (the limit of ``population.map_configs``).
MAX_WORKERS = 256


def shares_runs(exp: Experiment) -> bool:
    """Whether the experiment reads and writes the shared run cache (``<cache>/sim/``, module
    attribute ``SHARED_RUNS = True``): :func:`run_all` never runs two such experiments at the
    same time, so a simulation they share is computed once and then read."""
    return bool(getattr(exp.load(), "SHARED_RUNS", False))


#: What :func:`run_all` expects a stored experiment to take when it is drawn from its table
#: (not recomputed): 1-24 s measured on the 2-core machine (28-29 Nov 2026), not its
#: ``COST_SECONDS``, which is the time to recompute it.
STORED_DRAW_SECONDS = 10.0


def _planned_seconds(exp: Experiment, fast: bool, from_stored: bool) -> float:
    """The cost :func:`run_all` plans with: ``STORED_DRAW_SECONDS`` for a stored experiment
    drawn from its stored table (``from_stored``: neither recompute nor force), else its
    ``COST_SECONDS``."""
    if from_stored and _is_stored(exp.load(), fast):
        return STORED_DRAW_SECONDS
    return exp.cost_seconds


def _run_job(
    exp: Experiment, out_dir: Path, formats: tuple[str, ...] | str, kw: dict, skip: bool
) -> RunResult | None:
    """:func:`run`; with ``skip``, None where the figure needs PyTorch and it is missing."""
    try:
        return run(exp, out_dir, formats, **kw)
    except ModuleNotFoundError as e:
        if e.name != "torch" or not skip:
            raise
        return None


def run_all(
    exps: Iterable[Experiment],
    out_dir: str | Path = "figures",
    formats: tuple[str, ...] | str = ("pdf", "png"),
    *,
    workers: int = 1,
    skip_missing_torch: bool = False,
    on_start: Callable[[Experiment], None] | None = None,
    on_done: Callable[[Experiment, RunResult | None], None] | None = None,
    **kw: Any,
) -> dict[str, RunResult | None]:
    """:func:`run` for every experiment of ``exps`` (``formats`` and the keyword arguments
    ``kw`` as for it).

    ``workers = 1``: one after another in this process, in the given order. ``workers > 1``:
    that many at a time, each in a worker process of its own (spawned once), two experiments
    sharing runs (:func:`shares_runs`) never at the same time. The order is planned from the
    costs (``COST_SECONDS``; ``STORED_DRAW_SECONDS`` for a stored experiment drawn from its
    table) to end as early as possible (:func:`._schedule.choose`). Every
    experiment still uses every core; running two at once fills the gaps where one runs on one
    core (compiling, building tables, drawing). The files are the same for any ``workers``.
    ``on_start(exp)`` and ``on_done(exp, result)`` are called in this process. A figure that
    needs PyTorch where it is not installed raises ``ModuleNotFoundError``, or gives the result
    None with ``skip_missing_torch``. A failing experiment stops the others (their workers and
    every process those started are killed) and its error is raised here, naming the figure
    (in a ``ValueError``'s message, else in a note). Returns the results by name.
    """
    from fgrpo_theory._validate import check_integer

    exps = list(exps)
    workers = check_integer("workers", workers, 1, MAX_WORKERS)
    results: dict[str, RunResult | None] = {}
    start = on_start or (lambda e: None)
    done = on_done or (lambda e, r: None)
    if workers == 1 or len(exps) <= 1:
        for exp in exps:
            start(exp)
            results[exp.name] = _run_job(exp, Path(out_dir), formats, kw, skip_missing_torch)
            done(exp, results[exp.name])
        return results
    job = (Path(out_dir), formats, kw, skip_missing_torch)
    return _run_pool(exps, job, workers, start, done, results)


def _worker_init() -> None:
    """A figure worker's start: its own process group (so that stopping it stops the processes
    it starts, such as a population figure's pool), a thread that kills that group when the
    parent process ends (a killed ``figures`` leaves nothing running), and the experiments
    package made importable (a checkout used without installing loads it by path) before any
    task is unpickled."""
    import multiprocessing as mp
    import signal
    import threading
    from multiprocessing.connection import wait

    from fgrpo_theory.cli._experiments import experiments_package

    if hasattr(os, "setpgrp"):
        os.setpgrp()
    parent = mp.parent_process()

    def watch() -> None:
        wait([parent.sentinel])
        if hasattr(os, "killpg"):
            os.killpg(0, signal.SIGKILL)
        os._exit(1)

    if parent is not None:
        threading.Thread(target=watch, daemon=True).start()
    experiments_package()


def _kill(procs, manager=None) -> None:
    """Kill the worker processes ``procs`` and every process of their groups, then reap them.

    ``manager``: the executor's thread, which reaps them too when it sees them die; it is waited
    for, since a worker reaped by it is not yet marked ended while it holds the status (a
    ``join`` here returns first, and ``multiprocessing.active_children()`` still lists it)."""
    import signal

    for p in procs:
        try:
            if hasattr(os, "killpg"):
                os.killpg(p.pid, signal.SIGKILL)
            else:
                p.kill()
        except OSError:  # not in a group of its own yet, or gone: the process alone
            p.kill()
    for p in procs:
        p.join(10.0)
    if manager is not None and manager.ident is not None:  # (None: never started)
        manager.join(10.0)
    for p in procs:  # ended now: this sees the status whichever thread reaped it
        p.join(1.0)


def _run_pool(exps, job, workers, start, done, results):
    """:func:`run_all` with ``workers`` worker processes (see there)."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    from ._schedule import Job, choose

    kw = job[2]
    cheap = not (kw.get("recompute") or kw.get("force"))
    fast = kw.get("fast", False)
    jobs = {e.name: Job(e.name, _planned_seconds(e, fast, cheap), shares_runs(e)) for e in exps}
    pending = {e.name: e for e in exps}
    running: dict = {}  # future -> (experiment, when it started)
    ctx = mp.get_context("spawn")  # no fork of a process that may hold Numba threads
    ex = ProcessPoolExecutor(min(workers, len(exps)), mp_context=ctx, initializer=_worker_init)
    try:
        while pending or running:
            while len(running) < workers:
                now = time.monotonic()
                left = [
                    (max(jobs[e.name].cost - (now - t0), 1.0), jobs[e.name].shared)
                    for e, t0 in running.values()
                ]  # (a job past its estimate: still about a second left)
                nxt = choose([jobs[n] for n in pending], left, workers)
                if nxt is None:
                    break
                exp = pending.pop(nxt.name)
                start(exp)
                running[ex.submit(_run_job, exp, *job)] = (exp, now)
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in sorted(finished, key=lambda f: running[f][0].name):
                exp = running.pop(f)[0]
                try:
                    results[exp.name] = f.result()  # a worker's error is raised here
                except ValueError as e:  # (the command line prints its message alone)
                    if f"figure {exp.name}" in str(e):
                        raise
                    raise ValueError(f"figure {exp.name}: {e}") from e
                except Exception as e:
                    e.add_note(f"(in figure {exp.name})")
                    raise
                done(exp, results[exp.name])
    except BaseException:
        procs = list(getattr(ex, "_processes", {}).values())  # (the executor's own workers)
        manager = getattr(ex, "_executor_manager_thread", None)
        ex.shutdown(wait=False, cancel_futures=True)
        _kill(procs, manager)
        raise
    ex.shutdown()
    return results
