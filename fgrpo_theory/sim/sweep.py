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

from .._trust import folder_key, keyed_digest
from .._validate import fail
from .config import SimConfig
from .grid import config_hash, expand_grid
from .locks import (  # noqa: F401 (LOCK_* and the helpers re-exported)
    _MY_TOKENS,
    LOCK_GRACE,
    LOCK_HEARTBEAT,
    LOCK_TTL,
    _Heartbeat,
    _lock_path,
    _lock_state,
    _read_lock,
    _start_time,
    _try_lock,
)

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
_META_MAC = "fgrpo_theory.mac"
_META_SIZE = "fgrpo_theory.size_mac"
#: Seconds between checks while another process holds a config's lock.
_POLL = 0.2


def check_out_dir(out_dir: str | Path, name: str = "out_dir") -> Path:
    """Create ``out_dir`` if needed and check a file can be written there (before any work).

    The probe is a fresh temporary (``O_EXCL``, random name): nothing planted in a shared folder
    is ever written through.
    """
    from .._io import create_temp

    p = Path(out_dir)
    if p.exists() and not p.is_dir():
        fail(name, str(p), "a folder (it is a file)")
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd, probe = create_temp(p, "write-test")
        os.close(fd)
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


def _rows_text(df: pd.DataFrame) -> bytes:
    """A result's rows as CSV text (full float precision), the same for the frame written and the
    frame read back from either format (a CSV read back changes dtypes: an empty text cell
    becomes NaN, so a digest of the in-memory values would call every CSV result edited)."""
    return df.to_csv(index=False, lineterminator="\n").encode()


def _rows_digest(df: pd.DataFrame, key: bytes | None = None) -> str:
    """Digest of a result's rows: keyed (HMAC under the folder's key, see
    :mod:`fgrpo_theory._trust`) when ``key`` is given, so nobody without the key can forge it;
    else the plain SHA-256 (a single output file, never reused without a key)."""
    if key is not None:
        return keyed_digest(key, "rows", _rows_text(df))
    return hashlib.sha256(_rows_text(df)).hexdigest()[:16]


def _meta_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.meta.json")


def _folder_key(folder: Path) -> bytes | None:
    """The folder's key (created if missing), or None with one line on stderr saying why."""
    key, why = folder_key(folder)
    if why is not None:
        _warn(f"results in {folder} cannot be authenticated, so none is reused: {why}")
    return key


def write_atomic(
    df: pd.DataFrame,
    path: Path,
    metadata: Mapping[str, str] | None = None,
    key: bytes | None = None,
    name: str = "output",
) -> None:
    """Write Parquet or CSV (by suffix) to a fresh temporary file in the same folder, then rename.

    The temporary is created with ``O_EXCL | O_NOFOLLOW`` under a random name and written through
    its descriptor; the rename replaces whatever is at ``path`` (a symlink included) and never
    writes through it. ``metadata`` (string keys and values) goes into the Parquet schema
    metadata, or for CSV into a sidecar ``.<name>.meta.json`` written (atomically) before the CSV
    itself. ``key``: the folder's key, which tags the temporaries as this tool's.
    """
    from .._io import _temp_for, atomic_open

    path = Path(path)
    if path.suffix not in (".csv", ".parquet"):
        fail("output", str(path), "a .parquet or .csv path")
    meta = dict(metadata or {})
    if path.suffix == ".csv":
        if metadata is not None:
            size = str(len(df.to_csv(index=False).encode()))
            meta["fgrpo_theory.n_rows"] = str(len(df))
            meta["fgrpo_theory.file_bytes"] = size
            if key is not None and _META_MAC in meta:
                meta[_META_SIZE] = keyed_digest(key, "size", meta[_META_MAC], size)
            with atomic_open(_meta_path(path), "w", name=name, key=key) as fh:
                fh.write(json.dumps(meta, sort_keys=True))
        with atomic_open(path, "w", name=name, key=key, newline="") as fh:
            df.to_csv(fh, index=False)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    if meta:
        merged = dict(table.schema.metadata or {})
        merged.update({k.encode(): str(v).encode() for k, v in meta.items()})
        table = table.replace_schema_metadata(merged)
    with _temp_for(path, path, name, key) as (fd, _tmp), open(os.dup(fd), "wb") as fh:
        pq.write_table(table, fh)
        fh.flush()


#: Largest sidecar (``.<name>.csv.meta.json``) read; a bigger one is not this tool's.
_MAX_META_BYTES = 1 << 16


def _read_meta(path: Path) -> dict[str, str]:
    """The stored metadata of a result file, without reading its rows: the Parquet footer's
    ``fgrpo_theory.*`` keys, or the CSV's sidecar (at most 64 KiB)."""
    if path.suffix == ".csv":
        try:
            with open(_meta_path(path), "rb") as fh:
                raw = fh.read(_MAX_META_BYTES + 1)
            meta = json.loads(raw) if len(raw) <= _MAX_META_BYTES else {}
        except (OSError, ValueError):
            meta = {}
        return {str(k): str(v) for k, v in dict(meta).items()} if isinstance(meta, dict) else {}
    import pyarrow.parquet as pq

    md = pq.read_metadata(path)
    raw = md.metadata or {}
    meta = {k.decode(): v.decode() for k, v in raw.items() if k.startswith(b"fgrpo_theory.")}
    meta["_num_rows"] = str(md.num_rows)
    return meta


def _read_rows(path: Path) -> pd.DataFrame:
    import pandas as pd

    if path.suffix == ".csv":
        return pd.read_csv(path)
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pandas()


def _meta_mac(key: bytes, cfg_hash: str, code: str, rows: str, n_rows: int) -> str:
    return keyed_digest(key, "result", cfg_hash, code, rows, str(int(n_rows)))


def result_metadata(
    cfg_hash: str, code: str, df: pd.DataFrame, key: bytes | None = None
) -> dict[str, str]:
    """What a result file stores for :func:`reusable_result`: config hash, code and rows digests
    and, with the folder's ``key``, a keyed digest binding them together with the row count."""
    rows = _rows_digest(df, key)
    meta = {_META_HASH: cfg_hash, _META_CODE: code, _META_ROWS: rows}
    if key is not None:
        meta[_META_MAC] = _meta_mac(key, cfg_hash, code, rows, len(df))
    return meta


def reusable_result(
    path: Path,
    cfg: Any,
    *,
    key: Callable[[Any], str] = config_hash,
    code: str | None = None,
    folder_key: bytes | None = None,
) -> tuple[pd.DataFrame | None, str | None]:
    """``(df, None)`` if ``path`` holds a result that resume may reuse for ``cfg``, else
    ``(None, why)`` (``why`` is None when there is no file). ``key`` hashes the config and
    ``code`` is the digest of the code that must have written it (default: the simulator's).

    ``folder_key`` is the key of the folder (:mod:`fgrpo_theory._trust`); without it nothing is
    reusable. The stored metadata are checked first (a Parquet footer or a CSV sidecar, a few
    bytes): a file whose keyed digest does not verify is never read further, so a foreign file
    costs nothing however large its rows would be; then the rows' keyed digest is checked.
    """
    import hmac

    if not path.is_file():
        return None, None
    if folder_key is None:
        return None, f"{path} cannot be authenticated (no key for its folder); recomputing it"
    try:
        meta = _read_meta(path)
    except Exception as e:  # any unreadable file: pyarrow, pandas and OS errors alike
        return None, (
            f"{path} is not a readable result file ({type(e).__name__}); recomputing the config "
            "and replacing the file"
        )
    want = key(cfg)
    if meta.get(_META_HASH) != want:
        got = meta.get(_META_HASH, "no stored config hash")
        return None, f"{path} holds config {got}, not {want}; recomputing it"
    code_now = simulator_digest() if code is None else code
    if meta.get(_META_CODE) != code_now:
        return None, f"{path} was produced by other simulator code; recomputing it"
    forged = f"{path} was not written by this tool for this folder (its digest does not verify)"
    stored_rows, stored_mac = meta.get(_META_ROWS, ""), meta.get(_META_MAC, "")
    try:
        n_rows = int(meta.get("_num_rows", meta.get("fgrpo_theory.n_rows", "-1")))
    except ValueError:
        n_rows = -1
    mac = _meta_mac(folder_key, want, code_now, stored_rows, n_rows)
    if not hmac.compare_digest(stored_mac, mac):
        return None, f"{forged}; recomputing it"
    if path.suffix == ".csv":
        size = meta.get("fgrpo_theory.file_bytes", "")
        if not hmac.compare_digest(
            meta.get(_META_SIZE, ""), keyed_digest(folder_key, "size", stored_mac, size)
        ):
            return None, f"{forged}; recomputing it"
        if size != str(path.stat().st_size):  # checked before a byte of it is parsed
            return None, f"{path} was edited after it was written; recomputing it"
    try:
        df = _read_rows(path)
    except Exception as e:
        return None, f"{path} is not a readable result file ({type(e).__name__}); recomputing it"
    if not hmac.compare_digest(stored_rows, _rows_digest(df, folder_key)):
        return None, f"{path} was edited after it was written; recomputing it"
    return df, None


def _remove_dead_temporaries(out: Path, key: bytes | None) -> None:
    """Remove this tool's temporaries of dead processes (left by a killed run): only files whose
    name carries a tag under the folder's key (:func:`fgrpo_theory._io.remove_stale_temps`)."""
    from .._io import remove_stale_temps

    if key is not None:
        remove_stale_temps(out, key)


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
    best_effort: bool = False,
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
    best_effort : bool
        ``out_dir`` is a cache: a result that cannot be written there (a full disk) costs one
        line on stderr and the sweep goes on without writing (by default it is an error).

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
        best_effort=best_effort,
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
    best_effort: bool = False,
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
    fkey = _folder_key(out) if out is not None else None

    def _path(i: int) -> Path:
        return result_path(out, configs[i], fmt, key)

    def _reusable(i: int) -> tuple[pd.DataFrame | None, str | None]:
        return reusable_result(_path(i), configs[i], key=key, code=code_now, folder_key=fkey)

    def _reuse(i: int) -> bool:
        if out is None or not resume:
            return False
        df, why = _reusable(i)
        if why is not None:
            _warn(why)
        results[i] = df
        return df is not None

    if out is not None:
        _remove_dead_temporaries(out, fkey)
    pending = [i for i in range(len(configs)) if not _reuse(i)]
    held: set[int] = set()

    unwritable: list[str] = []

    def _store(i: int, df: pd.DataFrame) -> None:
        results[i] = df
        if out is not None:
            if not unwritable:
                meta = result_metadata(key(configs[i]), code_now, df, fkey)
                try:
                    write_atomic(df, _path(i), meta, fkey)
                except (ValueError, OSError) as e:
                    if not best_effort:
                        raise
                    unwritable.append(str(e))
                    _warn(f"cannot write results to {out}; going on without writing ({e})")
            _unlock(i)

    def _unlock(i: int) -> None:
        if i in held:
            held.discard(i)
            lock = _lock_path(out, configs[i], key)
            rec = _read_lock(lock)[1]
            if rec is not None and rec["pid"] == os.getpid() and rec["token"] in _MY_TOKENS:
                # removed before its token: another thread of this process judges a lock naming
                # this process by its token (stale without it), and took over, moved aside and
                # put back the lock between a discard and the unlink (a review's stress test)
                with contextlib.suppress(OSError):
                    lock.unlink()
                _MY_TOKENS.discard(rec["token"])

    announced: set[int] = set()

    def _announce(idx: list[int]) -> None:
        """One line on stderr per config found locked: who holds it and how long we may wait."""
        for i in idx:
            if i not in announced:
                announced.add(i)
                lock = _lock_path(out, configs[i], key)
                _, holder, _ = _lock_state(lock)
                _warn(
                    f"waiting for config {key(configs[i])}: {lock} is held by {holder}; a lock "
                    f"not refreshed for {LOCK_TTL:g} s (or of a process gone) is taken over"
                )

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

    beat = None
    if out is not None and pending:
        beat = _Heartbeat(lambda: [_lock_path(out, configs[i], key) for i in list(held)])
    bar = task = None
    if executor is None and progress and pending:
        from rich.console import Console
        from rich.progress import Progress

        console = Console(stderr=True)
        # a bar only on a terminal: a transient bar on a pipe or file leaves an empty line
        if console.is_terminal:
            bar = Progress(transient=True, console=console)
            bar.start()
            task = bar.add_task(label, total=len(pending))
    try:
        if executor is not None:  # called even with nothing to run, as before
            mine, busy = _claim(pending)
            _run_executor(mine)
        else:
            busy = _run_local(pending, bar)
        while busy:  # configs another live sweep is computing: take its result, or take over
            _announce(busy)
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
        if beat is not None:
            beat.stop()
        if bar is not None:
            bar.stop()
        for i in list(held):
            _unlock(i)
    return pd.concat(results, ignore_index=True)
