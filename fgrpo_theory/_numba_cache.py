"""Where Numba keeps the compiled kernels of this package (the user's cache folder), and how they
are stamped, loaded and announced.

By default Numba writes a ``cache=True`` function's machine code next to its source, in
``__pycache__``; for an installed wheel that is site-packages, which a library must not write to
(and often cannot). Importing this module registers a cache locator that Numba consults first and
that answers only for this package's source files: their cache goes to ``<cache>/numba/``, where
``<cache>`` is :func:`user_cache_dir` (``$FGRPO_THEORY_CACHE_DIR``, else
``$XDG_CACHE_HOME/fgrpo-theory``, else ``~/.cache/fgrpo-theory``). Other packages' Numba code is
untouched, and a ``NUMBA_CACHE_DIR`` the user set chooses the folder instead.

Safety. Numba's cache index files are pickles, so whoever can write the cache folder can run
code in this process. :func:`kernel_cache_dir` therefore uses a folder only if it is owned by the
user and nobody else can write it or a folder above it
(:func:`fgrpo_theory._trust.owned_private_dir`); otherwise it says so in one line on stderr and
falls back to the default user cache folder if that one is safe, else to a fresh private
temporary folder (kernels are compiled again).

Staleness. Numba stamps a cache file with its own source file only, so a kernel that compiles
in a helper from another file, or a module-level constant imported from one (Numba freezes
globals into the machine code), would keep the old one after an edit there. This locator's stamp
therefore covers every kernel source of the package and every package module they import,
transitively (:func:`fgrpo_theory._imports.kernel_sources`, a static import graph): an edit to
any of them recompiles all kernels, which is what lets the kernels share one set of primitives
(:mod:`fgrpo_theory.sim.kcore`).
``tests/test_numba_cache.py`` edits a helper and a constant's module in a copy of the package and
checks the kernel that uses them is recompiled. With a ``NUMBA_CACHE_DIR`` set, the stamp is
still this one. If Numba's private locator API changes, registration is skipped and Numba's
default behaviour applies (a warning is not worth a broken import).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

__all__ = [
    "CACHE_ENV",
    "COMPILE_NOTICE",
    "QUIET_MODULES",
    "user_cache_dir",
    "register",
    "announce_compilation",
]

# The package's cache folder (figure tables, runs, SFT checkpoints, Numba code), re-exported.
from ._trust import CACHE_ENV, user_cache_dir  # noqa: E402

_PACKAGE_DIR = Path(__file__).resolve().parent
_registered = False
_announcing = False
_announced = False

#: The one line printed to stderr when a kernel of the package is compiled (not loaded from the
#: cache) for the first time in a process. Measured cold on the 2-core machine (28 Nov 2026): a
#: first simulate 4-8 s (the machine's speed varies by a third within an hour), a first
#: population 14-20 s.
COMPILE_NOTICE = (
    "fgrpo-theory: compiling the simulator kernels (first run only, 4-20 s; "
    "then cached in {where})..."
)


#: Modules whose kernels compile in well under a second (:mod:`fgrpo_theory._libm_loops`, a
#: loop of C-library calls): compiling them alone prints no notice, which promises a wait.
QUIET_MODULES = frozenset({f"{_PACKAGE_DIR.name}._libm_loops"})


@lru_cache(maxsize=1)
def kernel_cache_dir() -> Path:
    """The folder compiled kernels are cached in (see "Safety" in the module docstring)."""
    import sys
    import tempfile

    from ._trust import make_dir, owned_private_dir

    numba_dir = os.environ.get("NUMBA_CACHE_DIR")
    wanted = Path(numba_dir) if numba_dir else user_cache_dir() / "numba"
    default = _default_cache_dir() / "numba"
    first = None
    for candidate in dict.fromkeys([wanted, default]):
        why = make_dir(candidate) or owned_private_dir(candidate)
        if why is None:
            if candidate != wanted:
                print(
                    f"fgrpo-theory: kernel cache in {candidate}, not {wanted}: {first}",
                    file=sys.stderr,
                )
            return candidate
        if candidate == wanted:
            first = why
    try:
        fallback = Path(tempfile.mkdtemp(prefix="fgrpo-theory-numba-"))
    except OSError as e:  # a full or unwritable /tmp too: compile for this run, cache nothing
        global _warned_unusable
        _warned_unusable = True  # the line below says it all: no second line when saving fails
        tmp = os.environ.get("TMPDIR") or "the temporary folder"
        print(
            f"fgrpo-theory: kernel cache not usable ({wanted}: {first}; a temporary folder in "
            f"{tmp}: {e.strerror or e}); the run goes on, kernels are compiled for this run "
            "only",
            file=sys.stderr,
        )
        return NO_CACHE
    import atexit
    import shutil

    # for this run only: removed at exit (each run with no usable cache folder left one behind)
    atexit.register(shutil.rmtree, fallback, ignore_errors=True)
    print(
        f"fgrpo-theory: kernel cache in {fallback} for this run only, not {wanted}: {first}",
        file=sys.stderr,
    )
    return fallback


#: What :func:`kernel_cache_dir` returns when no folder is usable, not even a temporary one: a
#: path that can never be created (under a file), so every cache read or write of this run fails
#: with an ``OSError`` that :func:`_make_best_effort` turns into a miss, silently.
NO_CACHE = Path(os.devnull) / "fgrpo-theory-no-kernel-cache"


def _default_cache_dir() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "fgrpo-theory"


#: The memo of :func:`fgrpo_theory._imports.kernel_sources`, in the kernel cache folder.
_MEMO_NAME = "kernel-imports.json"


@lru_cache(maxsize=1)
def _kernels_digest() -> str:
    from ._imports import kernel_sources

    h = hashlib.sha256()
    for p in kernel_sources(kernel_cache_dir() / _MEMO_NAME):
        h.update(str(p.relative_to(_PACKAGE_DIR)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def register() -> None:
    """Register the package's cache locator with Numba (once; call before decorating kernels)."""
    global _registered
    if _registered:
        return
    _registered = True
    try:
        from numba.core import caching
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
            self._cache_path = str(kernel_cache_dir() / sub)

        def get_cache_path(self) -> str:
            return self._cache_path

        def ensure_cache_path(self) -> None:
            # with no usable folder this locator still claims the package's kernels (else
            # Numba would cache them next to the sources, or raise): nothing is read or written
            if kernel_cache_dir() != NO_CACHE:
                super().ensure_cache_path()

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
    _make_best_effort(caching, PackageCacheLocator)


class _KernelCache:
    """The disk cache of one kernel of this package, as :func:`kernel_cache` describes it: Numba's
    ``FunctionCache``, created on the kernel's first compile or load, loading without Numba's
    whole-context refresh."""

    __slots__ = ("_py_func", "_cache")

    def __init__(self, py_func) -> None:  # noqa: ANN001 - a function
        self._py_func = py_func
        self._cache = None

    def _real(self):  # noqa: ANN202 - a Numba cache
        if self._cache is None:
            self._cache = _cache_class()(self._py_func)
        return self._cache

    def load_overload(self, sig, target_context):  # noqa: ANN001, ANN201 - Numba's signature
        return self._real().load_overload(sig, target_context)

    def save_overload(self, sig, data):  # noqa: ANN001, ANN201 - Numba's signature
        return self._real().save_overload(sig, data)

    def __getattr__(self, name: str):  # noqa: ANN204 - cache_path, flush, enable, _cache_path...
        return getattr(self._real(), name)

    def __repr__(self) -> str:
        state = "open" if self._cache is not None else "not opened yet"
        return f"<kernel cache of {self._py_func.__qualname__} ({state})>"


@lru_cache(maxsize=1)
def _cache_class() -> type:
    """Numba's ``FunctionCache`` whose load initializes only Numba's runtime (NRT), not the
    whole target context, when Numba's private API allows; else ``FunctionCache`` itself.

    Numba's ``Cache.load_overload`` first calls ``target_context.refresh()``, which imports and
    installs every lowering registry Numba has (``numba.np.arraymath`` imports
    ``scipy.linalg`` to check for BLAS, ``numba.np.arrayobj``, the typed containers, ...):
    0.3-0.4 s of CPU, a third of a warm ``simulate``'s start-up, for work only a compilation
    needs. Rebuilding cached machine code (``CompileResult._rebuild``: unserialize the object
    code, link it, look up its entry point) needs the runtime's symbols, which
    ``rtsys.initialize`` registers (the first thing ``refresh`` does), and nothing from the
    registries; a cache miss compiles, and Numba's compiler refreshes the context itself first.
    """
    from numba.core import caching

    base = caching.FunctionCache
    try:
        from numba.core.runtime import rtsys
    except ImportError:  # pragma: no cover - Numba changed
        return base
    initialize = getattr(rtsys, "initialize", None)
    if initialize is None or not hasattr(base, "_load_overload"):  # pragma: no cover
        return base

    class PackageFunctionCache(base):  # type: ignore[misc, valid-type]
        def load_overload(self, sig, target_context):  # noqa: ANN001, ANN201
            initialize(target_context)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
            return None  # the guard swallowed an OSError (it printed one line)

    return PackageFunctionCache


def kernel_cache(dispatcher):  # noqa: ANN001, ANN201 - a Numba dispatcher, returned
    """Give ``dispatcher`` (a kernel of this package, decorated without ``cache=True``) its disk
    cache, as ``cache=True`` would, with two differences that only change start-up time:

    - the cache object is created when the kernel is first compiled or loaded, not when it is
      decorated (creating one per kernel stamps it, :func:`kernel_sources`, and stats its file:
      about 40 % of importing the kernels; most kernels of a process are never called from
      Python: the helpers compile into their callers);
    - loading it from disk does not refresh Numba's whole target context
      (:func:`_cache_class`).

    ``register`` must have run (the locator). Returns ``dispatcher``.
    """
    dispatcher._cache = _KernelCache(dispatcher.py_func)
    return dispatcher


def on_disk(dispatcher, sig) -> bool | None:  # noqa: ANN001 - a Numba dispatcher, its types
    """Whether the disk cache holds ``dispatcher``'s machine code for the argument types ``sig``
    (a tuple, as passed to ``dispatcher.compile``), for this machine and these sources, without
    loading it; None when Numba's private cache API is not the one read here."""
    try:
        cache = dispatcher._cache._real()
        key = cache._index_key(sig, dispatcher.targetctx.codegen())
        with cache._guard_against_spurious_io_errors():
            return key in cache._cache_file._load_index()
    except Exception:  # noqa: BLE001 - Numba's private API changed: unknown
        return None
    return None  # the guard swallowed an OSError (it printed one line)


def _make_best_effort(caching, locator_class: type) -> None:  # noqa: ANN001 - a module
    """Reading and writing this package's kernel cache never ends a run: an ``OSError`` there (a
    full disk, a folder that became unwritable or unreadable) costs one line on stderr naming the
    folder, once per process, and the kernel is used from memory (it is compiled again in a later
    process). Numba itself tolerates such errors only on Windows, in its
    ``_guard_against_spurious_io_errors``, which wraps every cache load and save: this wraps it
    for this package's caches and leaves other packages' caches to Numba. The compiled kernel is
    registered with its dispatcher before Numba saves it, so swallowing a failed save changes no
    result; a half-saved cache (an index naming a data file that was not written) reads as a miss.
    """
    import contextlib

    cache_class = getattr(caching, "Cache", None)
    guard = getattr(cache_class, "_guard_against_spurious_io_errors", None)
    if guard is None or getattr(guard, "_fgrpo_best_effort", False):  # pragma: no cover
        return

    @contextlib.contextmanager
    def best_effort(self):  # noqa: ANN001, ANN202 - Numba's signature
        locator = getattr(getattr(self, "_impl", None), "locator", None)
        if not isinstance(locator, locator_class):
            with guard(self):
                yield
            return
        try:
            yield
        except OSError as e:
            _cache_not_usable(getattr(self, "_cache_path", None) or _compile_cache_dir(), e)

    best_effort._fgrpo_best_effort = True  # type: ignore[attr-defined]
    cache_class._guard_against_spurious_io_errors = best_effort


_warned_unusable = False


def _cache_not_usable(where: str | os.PathLike[str], e: OSError) -> None:
    global _warned_unusable
    if _warned_unusable:
        return
    _warned_unusable = True
    import sys

    why = e.strerror or str(e) or type(e).__name__
    print(
        f"fgrpo-theory: kernel cache in {where} not usable ({why}); "
        "the run goes on, kernels are compiled again next time",
        file=sys.stderr,
        flush=True,
    )


def _compile_cache_dir() -> Path:
    """Where this package's kernels are cached: the folder the locator uses (the notice named
    the unusable wanted folder when a fallback was in use)."""
    return kernel_cache_dir()


def announce_now() -> None:
    """Print :data:`COMPILE_NOTICE` to stderr unless this process has printed it: a kernel of
    this package is about to compile, here or in a helper process this one waits for."""
    global _announced
    if _announced:
        return
    _announced = True
    import sys

    where = _compile_cache_dir()
    where = "no folder (none is usable)" if where == NO_CACHE else where
    print(COMPILE_NOTICE.format(where=where), file=sys.stderr, flush=True)


def announce_compilation() -> None:
    """Print :data:`COMPILE_NOTICE` to stderr, once per process, when Numba starts compiling a
    kernel of this package (a cache miss; a kernel loaded from the cache says nothing).

    Numba broadcasts a ``"numba:compile"`` event only after its disk cache missed, so the line
    appears exactly when the user is about to wait. Kernels of other packages, and those of
    :data:`QUIET_MODULES` (no wait to announce), are ignored. If
    Numba's event API changes, nothing is printed (never a broken import).
    """
    global _announcing
    if _announcing:
        return
    _announcing = True
    try:
        from numba.core import event
    except ImportError:  # pragma: no cover - numba is a dependency
        return
    base = getattr(event, "Listener", None)
    if base is None or not hasattr(event, "register"):  # pragma: no cover - Numba changed
        return

    class _Notice(base):  # type: ignore[misc, valid-type]
        def on_start(self, ev):  # noqa: ANN001 - Numba's signature
            func = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
            module = getattr(func, "__module__", "") or ""
            if module.split(".")[0] != _PACKAGE_DIR.name or module in QUIET_MODULES:
                return
            announce_now()

        def on_end(self, ev):  # noqa: ANN001 - Numba's signature
            return None

    event.register("numba:compile", _Notice())
