"""Sweeps: run many configs, one result file per config, resumable and safe to share.

Each config's result is ``<out_dir>/<config_hash>.<fmt>``, written through a temporary file
``.<config_hash>.<fmt>.tmp-<PID>`` and a rename. A Parquet result stores in its metadata the
config hash, a digest of the simulator's source files (``fgrpo_theory/sim/*.py``) and a digest of
its rows; a CSV result stores the same in a sidecar ``.<config_hash>.csv.meta.json``. Resume
reuses a file only if all three match, otherwise it recomputes the config and says why in one line
on stderr. While a config runs, ``.<config_hash>.lock`` (created with ``O_CREAT | O_EXCL``, the
PID inside) keeps other sweeps on the same folder from computing it too; a lock whose process is
gone is taken over, and temporary files of dead processes are removed.

:func:`run_configs` is this machinery for any model's configs (the population simulator uses it
with its own config hash and code digest).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._validate import fail
from .config import SimConfig
from .grid import config_hash, expand_grid

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "run_sweep",
    "result_path",
    "check_out_dir",
    "write_atomic",
    "simulator_digest",
    "reusable_result",
    "result_metadata",
    "source_digest",
    "run_configs",
]

Executor = Callable[
    [Callable[[SimConfig], "pd.DataFrame"], list[SimConfig]], Iterable["pd.DataFrame"]
]

_META_HASH = "fgrpo_theory.config_hash"
_META_CODE = "fgrpo_theory.simulator_digest"
_META_ROWS = "fgrpo_theory.rows_digest"
#: Seconds between checks while another process holds a config's lock.
_POLL = 0.2


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


def result_path(
    out_dir: str | Path, cfg: Any, fmt: str = "parquet", key: Callable[[Any], str] = config_hash
) -> Path:
    """``<out_dir>/<key(cfg)>.<fmt>`` (``key``: the config hash; another model passes its own)."""
    return Path(out_dir) / f"{key(cfg)}.{fmt}"


def source_digest(files: Iterable[Path]) -> str:
    """SHA-256 (hex, 16 characters) of the names and bytes of ``files`` (sorted by path)."""
    h = hashlib.sha256()
    for f in sorted(Path(x) for x in files):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def simulator_digest() -> str:
    """SHA-256 (hex, 16 characters) of the names and bytes of the simulator's source files
    (``fgrpo_theory/sim/*.py``): results from other simulator code are never reused."""
    return source_digest(Path(__file__).resolve().parent.glob("*.py"))


def _rows_digest(df: pd.DataFrame) -> str:
    """Digest of a result's rows, the same for the frame written and the frame read back from
    either format: the SHA-256 of its CSV text (full float precision). A CSV read back changes
    dtypes (an empty text cell becomes NaN), so a digest of the in-memory values would call
    every CSV result edited and resume would never reuse one."""
    text = df.to_csv(index=False, lineterminator="\n")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _meta_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.meta.json")


def write_atomic(df: pd.DataFrame, path: Path, metadata: Mapping[str, str] | None = None) -> None:
    """Write Parquet or CSV (by suffix) to a temporary file in the same folder, then rename.

    ``metadata`` (string keys and values) goes into the Parquet schema metadata, or for CSV into
    a sidecar ``.<name>.meta.json`` written (atomically) before the CSV itself.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if path.suffix == ".csv":
            if metadata is not None:
                meta_tmp = _meta_path(path).with_name(f"{_meta_path(path).name}.tmp-{os.getpid()}")
                meta_tmp.write_text(json.dumps(dict(metadata), sort_keys=True), encoding="utf-8")
                os.replace(meta_tmp, _meta_path(path))
            df.to_csv(tmp, index=False)
        elif path.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pa.Table.from_pandas(df, preserve_index=False)
            if metadata:
                merged = dict(table.schema.metadata or {})
                merged.update({k.encode(): str(v).encode() for k, v in metadata.items()})
                table = table.replace_schema_metadata(merged)
            pq.write_table(table, tmp)
        else:
            fail("output", str(path), "a .parquet or .csv path")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _read_with_meta(path: Path) -> tuple[pd.DataFrame, dict[str, str]]:
    import pandas as pd

    if path.suffix == ".csv":
        df = pd.read_csv(path)
        try:
            meta = json.loads(_meta_path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = {}
        return df, {str(k): str(v) for k, v in dict(meta).items()}
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    raw = table.schema.metadata or {}
    meta = {k.decode(): v.decode() for k, v in raw.items() if k.startswith(b"fgrpo_theory.")}
    return table.to_pandas(), meta


def result_metadata(cfg_hash: str, code: str, df: pd.DataFrame) -> dict[str, str]:
    """What a result file stores for :func:`reusable_result`: config hash, code and rows digests."""
    return {_META_HASH: cfg_hash, _META_CODE: code, _META_ROWS: _rows_digest(df)}


def reusable_result(
    path: Path,
    cfg: Any,
    *,
    key: Callable[[Any], str] = config_hash,
    code: str | None = None,
) -> tuple[pd.DataFrame | None, str | None]:
    """``(df, None)`` if ``path`` holds a result that resume may reuse for ``cfg``, else
    ``(None, why)`` (``why`` is None when there is no file). ``key`` hashes the config and
    ``code`` is the digest of the code that must have written it (default: the simulator's)."""
    if not path.is_file():
        return None, None
    try:
        df, meta = _read_with_meta(path)
    except Exception as e:  # any unreadable file: pyarrow, pandas and OS errors alike
        return None, (
            f"{path} is not a readable result file ({type(e).__name__}); recomputing the config "
            "and replacing the file"
        )
    want = key(cfg)
    if meta.get(_META_HASH) != want:
        got = meta.get(_META_HASH, "no stored config hash")
        return None, f"{path} holds config {got}, not {want}; recomputing it"
    if meta.get(_META_CODE) != (simulator_digest() if code is None else code):
        return None, f"{path} was produced by other simulator code; recomputing it"
    if meta.get(_META_ROWS) != _rows_digest(df):
        return None, f"{path} was edited after it was written; recomputing it"
    return df, None


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock_pid(lock: Path) -> int | None:
    """The PID in ``lock``; None if unreadable or still empty (its writer has created it and not
    yet written its PID: read as PID 0, a "dead" owner, such a lock was taken over and its
    config computed twice by two sweeps on a loaded machine)."""
    try:
        text = lock.read_text(encoding="ascii").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def _remove_dead_temporaries(out: Path) -> None:
    """Remove ``.<name>.tmp-<PID>`` files whose process is gone (left by a killed run)."""
    for tmp in out.glob(".*.tmp-*"):
        pid = tmp.name.rpartition(".tmp-")[2]
        if pid.isdigit() and not _pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                tmp.unlink()


def _try_lock(lock: Path) -> bool:
    """Take ``lock`` (``O_CREAT | O_EXCL``, our PID inside); take over a lock of a dead process.

    Returns False while a live process holds it.
    """
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            pid = _lock_pid(lock)
            if pid is None or _pid_alive(pid):
                if pid is None and time.time() - _mtime(lock) > 10:
                    pid = 0  # empty or garbled for 10 s: its writer died before writing its PID
                else:
                    return False
            stale = lock.with_name(f"{lock.name}.stale-{os.getpid()}")
            try:
                os.replace(lock, stale)
            except FileNotFoundError:
                continue  # someone else took it over first: try again
            if _lock_pid(stale) not in (pid, None):  # raced: we moved a live lock, put it back
                with contextlib.suppress(OSError):
                    os.replace(stale, lock)
                return False
            with contextlib.suppress(OSError):
                stale.unlink()
            continue
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(f"{os.getpid()}\n")
        return True
    return False


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return time.time()


def _lock_path(out: Path, cfg: Any, key: Callable[[Any], str] = config_hash) -> Path:
    return out / f".{key(cfg)}.lock"


def _warn(message: str) -> None:
    print(f"fgrpo-theory: {message}", file=sys.stderr)


def run_sweep(
    sweep_or_configs: Mapping[str, Any] | SimConfig | Iterable[SimConfig],
    out_dir: str | Path | None = None,
    resume: bool = True,
    threads: int | None = None,
    progress: bool | None = None,
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
        Several sweeps may share the folder: a per-config lock file makes each config run once.
    resume : bool
        With ``out_dir``: reuse a config's file if its stored config hash equals its name, it was
        written by the same simulator code (:func:`simulator_digest`) and its rows are unchanged;
        otherwise recompute it, saying why in one line on stderr.
    threads : int, optional
        Numba threads per config (local execution only).
    progress : bool, optional
        Show a progress bar over configs on stderr (local execution only). Default: only when
        stderr is a terminal. The bar never writes to stdout.
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
    from .runner import run_one, simulate

    return run_configs(
        expand_grid(sweep_or_configs),
        out_dir,
        run_one=run_one,
        run_local=lambda cfg: simulate(cfg, threads=threads),
        key=config_hash,
        code=simulator_digest,
        resume=resume,
        progress=progress,
        executor=executor,
        fmt=fmt,
    )


def run_configs(
    configs: list[Any],
    out_dir: str | Path | None,
    *,
    run_one: Callable[[Any], pd.DataFrame],
    run_local: Callable[[Any], pd.DataFrame],
    key: Callable[[Any], str],
    code: Callable[[], str],
    resume: bool = True,
    progress: bool | None = None,
    executor: Executor | None = None,
    fmt: str = "parquet",
    label: str = "simulating",
) -> pd.DataFrame:
    """The engine of :func:`run_sweep` for any model's validated configs (also populations).

    ``run_one(cfg)`` is the top-level picklable function handed to ``executor``; ``run_local``
    runs a config in this process; ``key(cfg)`` names its file and lock; ``code()`` digests the
    source that produces results (checked before reuse). Everything else as in :func:`run_sweep`.
    """
    import pandas as pd

    if fmt not in ("parquet", "csv"):
        fail("fmt", fmt, "'parquet' or 'csv'")
    if not configs:
        fail("sweep", "[]", "at least one config")
    out = None if out_dir is None else check_out_dir(out_dir)
    if progress is None:
        progress = sys.stderr.isatty()
    results: list[pd.DataFrame | None] = [None] * len(configs)
    code_now = code() if out is not None else ""

    def _path(i: int) -> Path:
        return result_path(out, configs[i], fmt, key)

    def _reusable(i: int) -> tuple[pd.DataFrame | None, str | None]:
        return reusable_result(_path(i), configs[i], key=key, code=code_now)

    def _reuse(i: int) -> bool:
        if out is None or not resume:
            return False
        df, why = _reusable(i)
        if why is not None:
            _warn(why)
        results[i] = df
        return df is not None

    if out is not None:
        _remove_dead_temporaries(out)
    pending = [i for i in range(len(configs)) if not _reuse(i)]
    held: set[int] = set()

    def _store(i: int, df: pd.DataFrame) -> None:
        results[i] = df
        if out is not None:
            write_atomic(df, _path(i), result_metadata(key(configs[i]), code_now, df))
            _unlock(i)

    def _unlock(i: int) -> None:
        if i in held:
            held.discard(i)
            with contextlib.suppress(OSError):
                _lock_path(out, configs[i], key).unlink()

    def _claim(idx: list[int]) -> tuple[list[int], list[int]]:
        """Split ``idx`` into configs this process now computes and ones another process holds."""
        if out is None:
            return list(idx), []
        mine, busy = [], []
        for i in idx:
            if _try_lock(_lock_path(out, configs[i], key)):
                held.add(i)
                if resume and _path(i).is_file():
                    df, _ = _reusable(i)
                    if df is not None:  # finished by another process meanwhile
                        results[i] = df
                        _unlock(i)
                        continue
                mine.append(i)
            else:
                busy.append(i)
        return mine, busy

    def _run_executor(idx: list[int]) -> None:
        for i, df in zip(idx, executor(run_one, [configs[i] for i in idx]), strict=True):
            _store(i, df)

    def _run_local(idx: list[int], bar: Any) -> list[int]:
        """Run ``idx`` one config at a time, each locked just before it runs (so concurrent
        sweeps share the work); return the configs another live process holds."""
        busy = []
        for i in idx:
            mine, waiting = _claim([i])
            busy.extend(waiting)
            if mine:
                _store(i, run_local(configs[i]))
            if bar is not None and not waiting:
                bar.advance(task)
        return busy

    bar = task = None
    if executor is None and progress and pending:
        from rich.console import Console
        from rich.progress import Progress

        bar = Progress(transient=True, console=Console(stderr=True))
        bar.start()
        task = bar.add_task(label, total=len(pending))
    try:
        if executor is not None:  # called even with nothing to run, as before
            mine, busy = _claim(pending)
            _run_executor(mine)
        else:
            busy = _run_local(pending, bar)
        while busy:  # configs another live sweep is computing: take its result, or take over
            time.sleep(_POLL)
            still = []
            for i in busy:
                df, _ = _reusable(i)
                if df is not None:
                    results[i] = df
                    if bar is not None:
                        bar.advance(task)
                    continue
                if executor is not None:
                    mine, waiting = _claim([i])  # its lock is free, or its process is gone
                    if mine:
                        _run_executor(mine)
                    still.extend(waiting)
                else:
                    still.extend(_run_local([i], bar))
            busy = still
    finally:
        if bar is not None:
            bar.stop()
        for i in list(held):
            _unlock(i)
    return pd.concat(results, ignore_index=True)
