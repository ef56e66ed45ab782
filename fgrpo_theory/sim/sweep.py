"""Sweeps: run many configs, one result file per config, resumable."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._validate import fail
from .config import SimConfig, config_hash, expand_grid

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["run_sweep", "result_path", "check_out_dir", "write_atomic"]

Executor = Callable[
    [Callable[[SimConfig], "pd.DataFrame"], list[SimConfig]], Iterable["pd.DataFrame"]
]


def check_out_dir(out_dir: str | Path, name: str = "out_dir") -> Path:
    """Create ``out_dir`` if needed and check a file can be written there (before any work)."""
    p = Path(out_dir)
    if p.exists() and not p.is_dir():
        fail(name, str(p), "a folder (it is a file)")
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError:
        fail(name, str(p), "a writable folder")
    return p


def result_path(out_dir: str | Path, cfg: SimConfig, fmt: str = "parquet") -> Path:
    """``<out_dir>/<config_hash>.<fmt>``."""
    return Path(out_dir) / f"{config_hash(cfg)}.{fmt}"


def write_atomic(df: pd.DataFrame, path: Path) -> None:
    """Write Parquet or CSV (by suffix) to a temporary file in the same folder, then rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if path.suffix == ".csv":
            df.to_csv(tmp, index=False)
        elif path.suffix == ".parquet":
            df.to_parquet(tmp, index=False)
        else:
            fail("output", str(path), "a .parquet or .csv path")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _read(path: Path) -> pd.DataFrame:
    import pandas as pd

    return pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)


def run_sweep(
    sweep_or_configs: Mapping[str, Any] | SimConfig | Iterable[SimConfig],
    out_dir: str | Path | None = None,
    resume: bool = True,
    threads: int | None = None,
    progress: bool = True,
    executor: Executor | None = None,
    fmt: str = "parquet",
) -> pd.DataFrame:
    """Run every config of a sweep and return the concatenated long-format DataFrame.

    Parameters
    ----------
    sweep_or_configs : mapping, SimConfig or iterable of SimConfig
        A sweep mapping (list-valued fields form a grid, see :func:`expand_grid`) or configs.
        Everything is validated before any work.
    out_dir : path, optional
        Folder for one result file per config, named ``<config_hash>.<fmt>``, each written
        atomically (temporary file + rename), so an interrupted sweep never leaves a partial file.
    resume : bool
        With ``out_dir``: read configs whose file exists instead of running them.
    threads : int, optional
        Numba threads per config (local execution only).
    progress : bool
        Show a rich progress bar over configs (local execution only).
    executor : callable, optional
        Hook for other backends (e.g. Dask). Contract: ``executor(run_one, configs)`` returns an
        iterable of DataFrames, one per config, **in the order of** ``configs``; it may be lazy.
        ``run_one`` (:func:`fgrpo_theory.sim.run_one`) is a top-level picklable function and
        configs are picklable frozen dataclasses. Only configs still to run are passed; this
        function writes each result as the iterable yields it. A Dask client can be plugged in
        as ``lambda fn, cfgs: client.gather(client.map(fn, cfgs))``. Default: run locally, in
        order, with :func:`simulate`.
    fmt : {"parquet", "csv"}
        File format in ``out_dir``.

    Returns
    -------
    pandas.DataFrame
        All configs' rows (finished files and new runs), in config order.
    """
    import pandas as pd

    from .runner import run_one, simulate

    if fmt not in ("parquet", "csv"):
        fail("fmt", fmt, "'parquet' or 'csv'")
    configs = expand_grid(sweep_or_configs)
    if not configs:
        fail("sweep", "[]", "at least one config")
    out = None if out_dir is None else check_out_dir(out_dir)
    results: list[pd.DataFrame | None] = [None] * len(configs)
    todo: list[int] = []
    for i, cfg in enumerate(configs):
        if out is not None and resume and result_path(out, cfg, fmt).is_file():
            results[i] = _read(result_path(out, cfg, fmt))
        else:
            todo.append(i)

    def _store(i: int, df: pd.DataFrame) -> None:
        results[i] = df
        if out is not None:
            write_atomic(df, result_path(out, configs[i], fmt))

    if executor is not None:
        for i, df in zip(todo, executor(run_one, [configs[i] for i in todo]), strict=True):
            _store(i, df)
    elif todo:
        bar = None
        if progress:
            from rich.progress import Progress

            bar = Progress(transient=True)
            bar.start()
            task = bar.add_task("simulating", total=len(todo))
        try:
            for i in todo:
                _store(i, simulate(configs[i], threads=threads))
                if bar is not None:
                    bar.advance(task)
        finally:
            if bar is not None:
                bar.stop()
    return pd.concat(results, ignore_index=True)
