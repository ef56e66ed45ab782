"""Cache of experiment tables in the user's cache directory (never in site-packages).

Folder (:func:`cache_dir`): ``$FGRPO_THEORY_CACHE_DIR`` if set, else
``$XDG_CACHE_HOME/fgrpo-theory``, else ``~/.cache/fgrpo-theory``.

A cached table is keyed by a SHA-256 hash of the experiment's name, its parameters (as canonical
JSON), ``fgrpo_theory.__version__``, the fast flag and a digest of the source of every project
module the experiment imports (:func:`import_closure`: a static import graph over
``fgrpo_theory`` and the experiments package, following imports inside functions too, drawing-
and CLI-only modules excepted), so editing a formula, a shared table or the simulator never serves
a stale table. Parameters that point at files (the Fig. 2 simulation configs) contribute the
file's contents, so editing a config invalidates its cache too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import fgrpo_theory
from fgrpo_theory import _imports, _trust
from fgrpo_theory._imports import module_file
from fgrpo_theory._trust import user_cache_dir

__all__ = [
    "CACHE_ENV",
    "cache_dir",
    "canonical_params",
    "source_digest",
    "import_closure",
    "module_sources",
    "params_key",
    "cache_path",
    "cached",
    "cached_table",
]

#: Environment variable that overrides the cache folder.
CACHE_ENV = _trust.CACHE_ENV

_EXP_DIR = Path(__file__).resolve().parent
_PKG_DIR = Path(fgrpo_theory.__file__).resolve().parent
#: Project packages whose modules the cache key follows: import name -> folder.
_ROOTS = {"fgrpo_theory": _PKG_DIR, __package__ or "fgrpo_theory_experiments": _EXP_DIR}
#: Modules that draw or parse and never change a computed table (not followed).
_NOT_COMPUTING = ("fgrpo_theory.plotting", "fgrpo_theory.cli")


def cache_dir() -> Path:
    """The cache folder: ``$FGRPO_THEORY_CACHE_DIR``, else ``$XDG_CACHE_HOME/fgrpo-theory``,
    else ``~/.cache/fgrpo-theory`` (the library's :func:`fgrpo_theory._trust.user_cache_dir`,
    where the compiled kernels are kept too)."""
    return user_cache_dir()


def canonical_params(params: Any) -> Any:
    """Turn parameters (dataclass, dict, tuple, NumPy values, Path) into plain JSON data.

    A :class:`~pathlib.Path` becomes ``{"path": name, "sha256": hash of its bytes}`` so a cached
    result depends on the file's contents, not on where the repository lives.
    """
    if dataclasses.is_dataclass(params) and not isinstance(params, type):
        return {
            f.name: canonical_params(getattr(params, f.name)) for f in dataclasses.fields(params)
        }
    if isinstance(params, dict):
        return {str(k): canonical_params(v) for k, v in sorted(params.items())}
    if isinstance(params, list | tuple):
        return [canonical_params(v) for v in params]
    if isinstance(params, np.ndarray):
        return [canonical_params(v) for v in params.tolist()]
    if isinstance(params, np.generic):
        return params.item()
    if isinstance(params, Path):
        digest = hashlib.sha256(params.read_bytes()).hexdigest() if params.is_file() else None
        return {"path": params.name, "sha256": digest}
    if isinstance(params, float):
        return repr(params)  # exact: 0.1 and 0.1000000001 hash differently
    if params is None or isinstance(params, bool | int | str):
        return params
    raise TypeError(f"cannot hash parameter of type {type(params).__name__}: {params!r}")


def source_digest(files: list[Path]) -> str:
    """SHA-256 (hex) of the project-relative names and bytes of ``files``, in the order of those
    names, so the digest is the same wherever the project lives (a checkout, where experiments/
    sorts before fgrpo_theory/, or site-packages, where it sorts after: stored tables
    committed from a checkout must verify in an installed wheel)."""
    h = hashlib.sha256()
    for name, f in sorted({(_display_name(f), f) for f in files}):
        h.update(name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _display_name(f: Path) -> str:
    for name, root in _ROOTS.items():
        if f.is_relative_to(root):
            return name + "/" + f.relative_to(root).as_posix()
    return f.name


def import_closure(start: str | Path) -> list[Path]:
    """Source files of every project module reachable from ``start`` (a module name or a file).

    Static (:func:`fgrpo_theory._imports.import_closure` over ``fgrpo_theory`` and the
    experiments package): follows ``import`` and ``from ... import`` statements anywhere in a file
    (imports inside functions included), relative imports resolved, and the enclosing packages an
    import runs. A module that loads names lazily (a module ``__getattr__``: a package's
    ``__init__`` or a plain module) contributes all the modules of its package where a file may
    read a name that ``__getattr__`` would produce. Modules under
    ``fgrpo_theory.plotting`` and ``fgrpo_theory.cli`` are not followed (they draw or parse and
    never compute a cached table).
    """
    first = Path(start) if isinstance(start, Path) else module_file(start, _ROOTS, _NOT_COMPUTING)
    if first is None or not first.is_file():
        raise ValueError(f"module must be a project module or file; got {str(start)!r}")
    return _imports.import_closure([first], _ROOTS, exclude=_NOT_COMPUTING)


def module_sources(start: str | Path) -> str:
    """:func:`source_digest` of :func:`import_closure` of ``start``."""
    return source_digest(import_closure(start))


def params_key(name: str, params: Any, fast: bool, code: str = "") -> str:
    """Hex key (16 characters) of ``(name, params, package version, fast, code digest)``."""
    payload = {
        "name": name,
        "params": canonical_params(params),
        "version": fgrpo_theory.__version__,
        "fast": bool(fast),
        "code": code,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_path(name: str, params: Any, fast: bool, code: str = "") -> Path:
    """Where the DataFrame of ``(name, params, fast, code)`` is cached (a Parquet file)."""
    suffix = "-fast" if fast else ""
    return cache_dir() / "tables" / f"{name}{suffix}-{params_key(name, params, fast, code)}.parquet"


def _warn(message: str) -> None:
    import sys

    print(f"fgrpo-theory: {message}", file=sys.stderr)


def _table_mac(key: bytes, name: str, rows: str, n_rows: int) -> str:
    from fgrpo_theory._trust import keyed_digest

    return keyed_digest(key, "table", name, rows, str(int(n_rows)))


def _verified(path: Path, key: bytes) -> pd.DataFrame | None:
    """The cached table at ``path`` if its keyed digests verify (the footer first, a few bytes:
    a foreign file is never read further), else None."""
    import hmac

    import pyarrow.parquet as pq

    from fgrpo_theory._trust import keyed_digest

    try:
        md = pq.read_metadata(path)
        meta = {k.decode(): v.decode() for k, v in (md.metadata or {}).items()}
        rows = meta.get("fgrpo_theory.rows_digest", "")
        mac = _table_mac(key, path.name, rows, md.num_rows)
        if not hmac.compare_digest(meta.get("fgrpo_theory.mac", ""), mac):
            return None
        df = pd.read_parquet(path)
    except Exception:  # unreadable, truncated, empty: recomputed
        return None
    text = df.to_csv(index=False, lineterminator="\n").encode()
    if not hmac.compare_digest(rows, keyed_digest(key, "rows", text)):
        return None
    return df


def cached_table(
    name: str, params: Any, *, fast: bool = False, code: str = ""
) -> pd.DataFrame | None:
    """The verified cached table of ``(name, params, fast, code)``, or None (never computes)."""
    from fgrpo_theory._trust import folder_key

    path = cache_path(name, params, fast, code)
    if not path.is_file():
        return None
    key, _ = folder_key(path.parent)
    return None if key is None else _verified(path, key)


def cached(
    name: str,
    params: Any,
    compute: Callable[[], pd.DataFrame],
    *,
    fast: bool = False,
    force: bool = False,
    code: str = "",
) -> tuple[pd.DataFrame, bool]:
    """Return ``(df, hit)``: the cached DataFrame if present (and not ``force``), else compute it.

    ``code`` is a digest of the source that computes the table (see :func:`module_sources`). A
    cached table is used only if its keyed digests verify under the cache folder's key
    (:mod:`fgrpo_theory._trust`): a forged, edited, truncated or empty file is recomputed and
    replaced. The cache is best-effort: a folder that cannot be written (a full disk, no
    permission) costs one line on stderr, never the run. A freshly computed table goes through
    Parquet in memory, so a figure drawn after a cache miss and one drawn from the cache see
    identical data.
    """
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from fgrpo_theory._io import write_atomic
    from fgrpo_theory._trust import folder_key, keyed_digest, make_dir

    path = cache_path(name, params, fast, code)
    key = None
    why = make_dir(path.parent, 0o755)  # never a missing home folder
    if why is None:
        key, why = folder_key(path.parent)
    if key is not None and not force and path.is_file():
        df = _verified(path, key)
        if df is not None:
            return df, True
        _warn(f"cached table {path} does not verify; recomputing it")
    df = compute()
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{name}.compute() returned {type(df).__name__}, not a DataFrame")
    df = df.reset_index(drop=True)
    table = pa.Table.from_pandas(df, preserve_index=False)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    back = pd.read_parquet(io.BytesIO(buf.getvalue()))
    if key is None:
        _warn(f"the table cache is not used: {why}")
        return back, False
    text = back.to_csv(index=False, lineterminator="\n").encode()
    rows = keyed_digest(key, "rows", text)
    meta = dict(table.schema.metadata or {})
    meta[b"fgrpo_theory.rows_digest"] = rows.encode()
    meta[b"fgrpo_theory.mac"] = _table_mac(key, path.name, rows, len(back)).encode()
    buf = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(meta), buf)
    try:
        write_atomic(path, buf.getvalue(), name="cache", key=key)
    except (ValueError, OSError) as e:
        _warn(f"cannot write the cached table {path}; continuing without it ({e})")
    return back, False
