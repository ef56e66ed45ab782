"""Cache of experiment DataFrames under ``experiments/data/`` (gitignored).

A cached table is keyed by a SHA-256 hash of the experiment's name, its parameters (as canonical
JSON), ``fgrpo_theory.__version__``, the fast flag and a digest of the source code that computes it
(the library without its plotting and CLI modules, the experiment's module and the shared
``experiments/_*.py`` helpers), so editing a formula or the simulator never serves a stale table.
Parameters that point at files (the Fig. 2 simulation configs) contribute the file's contents, so
editing a config invalidates its cache too.
The folder can be moved with the ``FGRPO_CACHE_DIR`` environment variable (the tests use this).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import fgrpo_theory

__all__ = [
    "DATA_DIR",
    "cache_dir",
    "canonical_params",
    "source_digest",
    "library_sources",
    "experiment_sources",
    "params_key",
    "cache_path",
    "cached",
]

#: Default cache folder (inside the source tree for an editable install; gitignored).
DATA_DIR = Path(__file__).resolve().parent / "data"

_EXP_DIR = Path(__file__).resolve().parent
_PKG_DIR = Path(fgrpo_theory.__file__).resolve().parent
#: Library modules that never change a computed table.
_NOT_COMPUTING = {"plotting.py"}


def cache_dir() -> Path:
    """The cache folder: ``$FGRPO_CACHE_DIR`` if set, else :data:`DATA_DIR`."""
    env = os.environ.get("FGRPO_CACHE_DIR")
    return Path(env) if env else DATA_DIR


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
    """SHA-256 (hex) of the names and bytes of ``files``, in sorted order."""
    h = hashlib.sha256()
    for f in sorted(set(files)):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def library_sources(subpackages: tuple[str, ...] = ("sim", "advantages")) -> list[Path]:
    """The library's computing modules: top-level ``fgrpo_theory/*.py`` (not plotting) and the
    given subpackages (not the CLI)."""
    files = [f for f in _PKG_DIR.glob("*.py") if f.name not in _NOT_COMPUTING]
    for sub in subpackages:
        files.extend((_PKG_DIR / sub).glob("*.py"))
    return sorted(files)


def experiment_sources(name: str) -> list[Path]:
    """An experiment's module and the shared ``experiments/_*.py`` helpers."""
    return sorted([_EXP_DIR / f"{name}.py", *_EXP_DIR.glob("_*.py")])


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
    return cache_dir() / f"{name}{suffix}-{params_key(name, params, fast, code)}.parquet"


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

    ``code`` is a digest of the source that computes the table (see :func:`source_digest`). A
    freshly computed table is written atomically, then read back, so a figure drawn after a
    cache miss and one drawn from the cache see identical data.
    """
    path = cache_path(name, params, fast, code)
    if path.is_file() and not force:
        return pd.read_parquet(path), True
    df = compute()
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{name}.compute() returned {type(df).__name__}, not a DataFrame")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    df.reset_index(drop=True).to_parquet(tmp, index=False)
    tmp.replace(path)
    return pd.read_parquet(path), False
