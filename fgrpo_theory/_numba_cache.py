"""Where Numba keeps the compiled kernels of this package: the user's cache folder.

By default Numba writes a ``cache=True`` function's machine code next to its source, in
``__pycache__``; for an installed wheel that is site-packages, which a library must not write to
(and often cannot). Importing this module registers a cache locator that Numba consults first and
that answers only for this package's source files: their cache goes to ``<cache>/numba/``, where
``<cache>`` is :func:`user_cache_dir` (``$FGRPO_THEORY_CACHE_DIR``, else
``$XDG_CACHE_HOME/fgrpo-theory``, else ``~/.cache/fgrpo-theory``). Other packages' Numba code is
untouched, and a ``NUMBA_CACHE_DIR`` the user set chooses the folder instead.

Staleness. Numba stamps a cache file with its own source file only, so a kernel that compiles
in a helper from another file, or a module-level constant imported from one (Numba freezes
globals into the machine code), would keep the old one after an edit there. This locator's stamp
therefore covers every kernel source of the package and every package module they import,
transitively (:func:`kernel_sources`): an edit to any of them recompiles all kernels, which is
what lets the kernels share one set of primitives (:mod:`fgrpo_theory.sim.kcore`).
``tests/test_numba_cache.py`` edits a helper and a constant's module in a copy of the package and
checks the kernel that uses them is recompiled. With a ``NUMBA_CACHE_DIR`` set, the stamp is
still this one. If Numba's private locator API changes, registration is skipped and Numba's
default behaviour applies (a warning is not worth a broken import).
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from functools import lru_cache
from pathlib import Path

__all__ = ["CACHE_ENV", "user_cache_dir", "register", "kernel_sources"]

#: Environment variable that overrides the cache folder (figure tables, runs, Numba code).
CACHE_ENV = "FGRPO_THEORY_CACHE_DIR"

_PACKAGE_DIR = Path(__file__).resolve().parent
_registered = False


def user_cache_dir() -> Path:
    """The cache folder: ``$FGRPO_THEORY_CACHE_DIR``, else ``$XDG_CACHE_HOME/fgrpo-theory``,
    else ``~/.cache/fgrpo-theory``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "fgrpo-theory"


_KERNEL_MARKS = re.compile(r"^(from numba import |import numba|@njit|@numba\.|@jit_)", re.M)


def _package_imports(path: Path) -> set[Path]:
    """The package's modules that ``path`` imports at module level (``from .x import y``,
    ``from ..x import y``, ``from . import x``, ``import fgrpo_theory.x``), as files."""
    rel = path.relative_to(_PACKAGE_DIR).with_suffix("")
    pkg = list(rel.parts[:-1])
    found: set[Path] = set()

    def add(parts: list[str]) -> None:
        if not parts:
            return
        base = _PACKAGE_DIR.joinpath(*parts)
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.is_file():
                found.add(cand)

    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            mod = node.module.split(".") if node.module else []
            if node.level:
                parts = pkg[: len(pkg) - node.level + 1] + mod
            elif mod and mod[0] == _PACKAGE_DIR.name:
                parts = mod[1:]
            else:
                continue
            add(parts)
            for alias in node.names:  # "from . import kernels": a module
                add([*parts, alias.name])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                head, _, rest = alias.name.partition(".")
                if head == _PACKAGE_DIR.name:
                    add(rest.split(".") if rest else [])
    return found


@lru_cache(maxsize=1)
def kernel_sources() -> tuple[Path, ...]:
    """The files a compiled kernel may depend on: every module of the package that imports
    ``numba`` or decorates a function with ``njit`` or a flavour of :mod:`fgrpo_theory.sim._jit`,
    and every package module those import, transitively (helpers and module-level constants,
    which Numba compiles in)."""
    todo = [p for p in _PACKAGE_DIR.rglob("*.py") if _KERNEL_MARKS.search(p.read_text("utf-8"))]
    seen: set[Path] = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo.extend(_package_imports(p) - seen)
    return tuple(sorted(seen))


@lru_cache(maxsize=1)
def _kernels_digest() -> str:
    h = hashlib.sha256()
    for p in kernel_sources():
        h.update(str(p.relative_to(_PACKAGE_DIR)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def register() -> None:
    """Register the package's cache locator with Numba (once; call before decorating kernels)."""
    global _registered
    if _registered:
        return
    _registered = True
    try:
        from numba.core import caching, config
    except ImportError:  # pragma: no cover - numba is a dependency
        return
    base = getattr(caching, "_CacheLocator", None)
    mixin = getattr(caching, "_SourceFileBackedLocatorMixin", None)
    impl = getattr(caching, "CacheImpl", None)
    locators = getattr(impl, "_locator_classes", None)
    if base is None or mixin is None or not isinstance(locators, list):
        return

    class PackageCacheLocator(mixin, base):  # type: ignore[misc, valid-type]
        """This package's kernels cache under ``<user cache>/numba/`` (see the module docstring)."""

        def __init__(self, py_func, py_file):  # noqa: ANN001 - Numba's signature
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            sub = self.get_suitable_cache_subpath(py_file)
            root = Path(config.CACHE_DIR) if config.CACHE_DIR else user_cache_dir() / "numba"
            self._cache_path = str(root / sub)

        def get_cache_path(self) -> str:
            return self._cache_path

        def get_source_stamp(self):  # noqa: ANN201 - any picklable object
            # the file's own stamp (Numba's) and the digest of every kernel source: an edit to a
            # helper in another kernel file recompiles the kernels that compiled it in
            return (super().get_source_stamp(), _kernels_digest())

        @classmethod
        def from_function(cls, py_func, py_file):  # noqa: ANN001, ANN206
            try:
                Path(py_file).resolve().relative_to(_PACKAGE_DIR)
            except (ValueError, OSError):
                return None
            return super().from_function(py_func, py_file)

    locators.insert(0, PackageCacheLocator)
