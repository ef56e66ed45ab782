"""Where Numba keeps the compiled kernels of this package: the user's cache folder.

By default Numba writes a ``cache=True`` function's machine code next to its source, in
``__pycache__``; for an installed wheel that is site-packages, which a library must not write to
(and often cannot). Importing this module registers a cache locator that Numba consults first and
that answers only for this package's source files: their cache goes to ``<cache>/numba/``, where
``<cache>`` is :func:`user_cache_dir` (``$FGRPO_THEORY_CACHE_DIR``, else
``$XDG_CACHE_HOME/fgrpo-theory``, else ``~/.cache/fgrpo-theory``). Other packages' Numba code is
untouched, and a ``NUMBA_CACHE_DIR`` the user set wins (Numba's own locator then serves it).

Numba keys each cache file on the content hash of its source file, so an edited kernel is
recompiled; the kernel modules keep their helpers in the same file because that hash does not
cover other files. If Numba's private locator API changes, registration is skipped and Numba's
default behaviour applies (a warning is not worth a broken import).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "user_cache_dir", "register"]

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
            self._cache_path = str(user_cache_dir() / "numba" / sub)

        def get_cache_path(self) -> str:
            return self._cache_path

        @classmethod
        def from_function(cls, py_func, py_file):  # noqa: ANN001, ANN206
            if config.CACHE_DIR:  # the user chose a folder: Numba's own locator serves it
                return None
            try:
                Path(py_file).resolve().relative_to(_PACKAGE_DIR)
            except (ValueError, OSError):
                return None
            return super().from_function(py_func, py_file)

    locators.insert(0, PackageCacheLocator)
