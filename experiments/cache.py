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

import ast
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
from fgrpo_theory import _numba_cache
from fgrpo_theory._numba_cache import user_cache_dir

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
]

#: Environment variable that overrides the cache folder.
CACHE_ENV = _numba_cache.CACHE_ENV

_EXP_DIR = Path(__file__).resolve().parent
_PKG_DIR = Path(fgrpo_theory.__file__).resolve().parent
#: Project packages whose modules the cache key follows: import name -> folder.
_ROOTS = {"fgrpo_theory": _PKG_DIR, __package__ or "fgrpo_theory_experiments": _EXP_DIR}
#: Modules that draw or parse and never change a computed table (not followed).
_NOT_COMPUTING = ("fgrpo_theory.plotting", "fgrpo_theory.cli")


def cache_dir() -> Path:
    """The cache folder: ``$FGRPO_THEORY_CACHE_DIR``, else ``$XDG_CACHE_HOME/fgrpo-theory``,
    else ``~/.cache/fgrpo-theory`` (the library's :func:`fgrpo_theory._numba_cache.user_cache_dir`,
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
    """SHA-256 (hex) of the project-relative names and bytes of ``files``, in sorted order."""
    h = hashlib.sha256()
    for f in sorted(set(files)):
        h.update(_display_name(f).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _display_name(f: Path) -> str:
    for name, root in _ROOTS.items():
        if f.is_relative_to(root):
            return name + "/" + f.relative_to(root).as_posix()
    return f.name


def _module_file(name: str) -> Path | None:
    """The file of project module ``name`` (package ``__init__.py`` or ``.py``), else None."""
    parts = name.split(".")
    root = _ROOTS.get(parts[0])
    if root is None or _excluded(name):
        return None
    base = root.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def _module_name(f: Path) -> tuple[str | None, bool]:
    """``(dotted name, is_package)`` of a project file; ``(None, False)`` outside the project."""
    for name, root in _ROOTS.items():
        if f.is_relative_to(root):
            parts = [name, *f.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                return ".".join(parts[:-1]), True
            return ".".join(parts), False
    return None, False


def _excluded(name: str) -> bool:
    return any(name == x or name.startswith(x + ".") for x in _NOT_COMPUTING)


def _imports(f: Path) -> tuple[set[str], set[str]]:
    """Modules ``f`` may import (at module level or in any function), as absolute names, and the
    packages whose attributes it may use (``import P`` or ``from P import name``)."""
    mod, is_pkg = _module_name(f)
    package = (mod if is_pkg else mod.rpartition(".")[0]) if mod else ""
    found: set[str] = set()
    used: set[str] = set()
    for node in ast.walk(ast.parse(f.read_bytes(), filename=str(f))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
            used.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if not package:
                    continue
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
            used.add(base)
    # importing a.b.c runs a/__init__ and a/b/__init__ too
    found = {".".join(n.split(".")[: i + 1]) for n in found for i in range(n.count(".") + 1)}
    return found, used


def import_closure(start: str | Path) -> list[Path]:
    """Source files of every project module reachable from ``start`` (a module name or a file).

    Static: follows ``import`` and ``from ... import`` statements anywhere in a file (imports
    inside functions included), relative imports resolved. A package whose ``__init__`` loads
    names lazily (a module ``__getattr__``) contributes all of its modules when its attributes are
    used. Modules under ``fgrpo_theory.plotting`` and ``fgrpo_theory.cli`` are not followed (they
    draw or parse and never compute a cached table).
    """
    first = Path(start) if isinstance(start, Path) else _module_file(start)
    if first is None or not first.is_file():
        raise ValueError(f"module must be a project module or file; got {str(start)!r}")
    seen: set[Path] = set()
    stack = [first.resolve()]
    while stack:
        f = stack.pop()
        if f in seen:
            continue
        seen.add(f)
        found, used = _imports(f)
        for name in found:
            g = _module_file(name)
            if g is None:
                continue
            stack.append(g)
            lazy = g.name == "__init__.py" and "__getattr__" in g.read_text(encoding="utf-8")
            if lazy and name in used:
                for h in sorted(g.parent.rglob("*.py")):
                    sub, _ = _module_name(h)
                    if sub is not None and not _excluded(sub):
                        stack.append(h)
    return sorted(seen)


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
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        df.reset_index(drop=True).to_parquet(tmp, index=False)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return pd.read_parquet(path), False
