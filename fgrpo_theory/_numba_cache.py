"""Where Numba keeps the compiled kernels of this package (the user's cache folder), and the static
import graph that says which sources a cached result depends on.

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
transitively (:func:`kernel_sources`): an edit to any of them recompiles all kernels, which is
what lets the kernels share one set of primitives (:mod:`fgrpo_theory.sim.kcore`).
``tests/test_numba_cache.py`` edits a helper and a constant's module in a copy of the package and
checks the kernel that uses them is recompiled. With a ``NUMBA_CACHE_DIR`` set, the stamp is
still this one. If Numba's private locator API changes, registration is skipped and Numba's
default behaviour applies (a warning is not worth a broken import).

The static import graph (:func:`import_closure`, read with :mod:`ast`, nothing imported) is the
one the figure cache of the experiments package keys on too, over the whole file and the
packages an import runs; the kernels' stamp reads only what runs at import and the modules
named.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path

__all__ = [
    "CACHE_ENV",
    "COMPILE_NOTICE",
    "user_cache_dir",
    "register",
    "announce_compilation",
    "kernel_sources",
    "import_closure",
    "file_imports",
    "module_file",
    "module_name",
]

#: Environment variable that overrides the cache folder (figure tables, runs, Numba code).
CACHE_ENV = "FGRPO_THEORY_CACHE_DIR"

_PACKAGE_DIR = Path(__file__).resolve().parent
_registered = False
_announcing = False
_announced = False

#: The one line printed to stderr when a kernel of the package is compiled (not loaded from the
#: cache) for the first time in a process. Measured cold on the 2-core machine: 11-24 s.
COMPILE_NOTICE = (
    "fgrpo-theory: compiling the simulator kernels (first run only, about 20 s; "
    "then cached in {where})..."
)


def user_cache_dir() -> Path:
    """The cache folder: ``$FGRPO_THEORY_CACHE_DIR``, else ``$XDG_CACHE_HOME/fgrpo-theory``,
    else ``~/.cache/fgrpo-theory``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "fgrpo-theory"


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


#: Import name of a project package -> its folder (what the static import graph resolves).
Roots = Mapping[str, Path]
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _excluded(name: str, exclude: Iterable[str]) -> bool:
    return any(name == x or name.startswith(x + ".") for x in exclude)


def module_file(name: str, roots: Roots, exclude: Iterable[str] = ()) -> Path | None:
    """The file of module ``name`` (a package's ``__init__.py``, else ``<name>.py``) under
    ``roots``; None outside them, for a name that is no file (``from m import function``), or
    for a name in or under one of ``exclude``."""
    parts = name.split(".")
    root = roots.get(parts[0])
    if root is None or _excluded(name, exclude):
        return None
    base = root.joinpath(*parts[1:])
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    return None


def module_name(path: Path, roots: Roots) -> tuple[str | None, bool]:
    """``(dotted name, is_package)`` of a file under ``roots``; ``(None, False)`` outside them."""
    for name, root in roots.items():
        if path.is_relative_to(root):
            parts = [name, *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                return ".".join(parts[:-1]), True
            return ".".join(parts), False
    return None, False


def _import_nodes(tree: ast.AST, in_functions: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif in_functions or not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))


def file_imports(path: Path, roots: Roots, *, in_functions: bool) -> tuple[set[str], set[str]]:
    """What ``path`` imports, as absolute module names, and the modules whose lazily loaded
    attributes it may use.

    A ``from P import x`` names ``P`` and ``P.x`` (``x`` may be a module); relative imports are
    resolved against the file's place under ``roots``. ``in_functions``: also the imports inside
    function bodies (else those that run when the module is imported).

    Used: a project module ``P`` is used when the file takes from it a name that is neither one of
    its submodules nor bound at the top level of its file (:func:`_bound_names`), so could be
    produced by a module ``__getattr__``: ``from P import x``, or ``P.x`` after ``import P``
    (attribute chains are followed through submodules: ``import a`` then ``a.b.f`` names ``a.b``
    and uses it if ``f`` is not bound there), or ``P`` itself passed around. A module outside
    ``roots`` is used whenever it is imported.
    """
    mod, is_pkg = module_name(path, roots)
    package = (mod if is_pkg else mod.rpartition(".")[0]) if mod else ""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    found: set[str] = set()
    used: set[str] = set()
    bound: dict[str, str] = {}  # a name ``import`` binds -> the module it is
    for node in _import_nodes(tree, in_functions):
        if isinstance(node, ast.Import):
            for a in node.names:
                found.add(a.name)
                if module_file(a.name, roots) is None:
                    used.add(a.name)
                bound[a.asname or a.name.partition(".")[0]] = a.name if a.asname else (
                    a.name.partition(".")[0])  # fmt: skip
            continue
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
        if any(_lazy_attribute(base, a.name, roots) for a in node.names):
            used.add(base)
    if bound:
        for chain in _attribute_chains(tree, set(bound)):
            name = bound[chain[0]]
            for attr in chain[1:]:
                if module_file(f"{name}.{attr}", roots) is None:
                    break
                name = f"{name}.{attr}"
                found.add(name)
            else:
                attr = None  # the chain ends on a module: a module object passed around
            if attr is None or _lazy_attribute(name, attr, roots):
                used.add(name)
    return found, used


#: Attributes the import system sets on every module (never from a module ``__getattr__``).
_MODULE_ATTRIBUTES = frozenset(
    {"__file__", "__name__", "__path__", "__package__", "__spec__", "__loader__", "__doc__",
     "__dict__", "__cached__"}
)  # fmt: skip


def _lazy_attribute(module: str, attr: str, roots: Roots) -> bool:
    """Whether ``module.attr`` may come from a module ``__getattr__``: True for ``*``, for a
    module outside ``roots``, and for a name neither a submodule nor bound in the module's file."""
    f = module_file(module, roots)
    if attr == "*" or f is None:
        return True
    if attr in _MODULE_ATTRIBUTES:
        return False
    return module_file(f"{module}.{attr}", roots) is None and attr not in _bound_names(f)


def _bound_names(path: Path) -> frozenset[str]:
    """Names a module's own top-level statements bind (assignments, definitions, imports,
    including those under ``if`` / ``try`` / ``with``; not what a ``__getattr__`` returns)."""
    names: set[str] = set()
    todo = list(ast.parse(path.read_bytes(), filename=str(path)).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update(a.asname or a.name.partition(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for sub in getattr(node, field, []):
                    todo.extend(sub.body if isinstance(sub, ast.ExceptHandler) else [sub])
    return frozenset(names)


def _attribute_chains(tree: ast.AST, names: set[str]) -> Iterator[list[str]]:
    """``[name, attr1, attr2, ...]`` for every use of one of ``names`` in ``tree``: the longest
    attribute chain it starts (``name.a.b`` gives ``[name, "a", "b"]``; a bare use ``[name]``)."""
    inner: set[int] = set()  # attributes and names that an attribute node is taken from
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            chain, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in names:
                yield [value.id, *reversed(chain)]
        elif isinstance(node, ast.Name) and node.id in names and id(node) not in inner:
            if isinstance(node.ctx, ast.Load):
                yield [node.id]


def import_closure(
    starts: Iterable[Path],
    roots: Roots,
    *,
    in_functions: bool = True,
    packages: bool = True,
    exclude: Iterable[str] = (),
    imports: Callable[[Path], tuple[set[str], set[str]]] | None = None,
) -> list[Path]:
    """The files of every module under ``roots`` reachable from the files ``starts``, sorted.

    A static graph (:func:`file_imports`; nothing is imported). ``in_functions``: follow imports
    inside functions too. ``packages``: also follow what an import runs besides the named
    module, namely the enclosing packages (``import a.b.c`` runs ``a`` and ``a.b``) and, for a
    package whose ``__init__`` loads names lazily (a module ``__getattr__``) and whose attributes
    are used, all of its modules. Modules in or under ``exclude`` are not followed.
    ``imports``: a function giving :func:`file_imports` of a file (a memo of it), else that.
    """
    exclude = tuple(exclude)
    roots = {name: Path(root).resolve() for name, root in roots.items()}
    seen: set[Path] = set()
    stack = [Path(p).resolve() for p in starts]
    while stack:
        f = stack.pop()
        if f in seen:
            continue
        seen.add(f)
        if imports is None:
            found, used = file_imports(f, roots, in_functions=in_functions)
        else:
            found, used = imports(f)
        if packages:
            found = {
                ".".join(n.split(".")[: i + 1]) for n in found for i in range(n.count(".") + 1)
            }
        for name in found:
            g = module_file(name, roots, exclude)
            if g is None:
                continue
            stack.append(g)
            lazy = packages and name in used and g.name == "__init__.py"
            if lazy and "__getattr__" in g.read_text(encoding="utf-8"):
                for h in sorted(g.parent.rglob("*.py")):
                    sub, _ = module_name(h, roots)
                    if sub is not None and not _excluded(sub, exclude):
                        stack.append(h)
    return sorted(seen)


_KERNEL_MARKS = re.compile(r"^(from numba import |import numba|@njit|@numba\.|@jit_)", re.M)


#: Modules a kernel source imports that hold no code or constant a kernel compiles in: this
#: module (the cache machinery: its locator and loader, imported by ``sim/_jit.py``). An edit
#: here changes how kernels are found and loaded, never their machine code.
_NOT_COMPILED_IN = (__name__,)


@lru_cache(maxsize=2)
def kernel_sources(memo: Path | None = None) -> tuple[Path, ...]:
    """The files a compiled kernel may depend on: every module of the package that imports
    ``numba`` or decorates a function with ``njit`` or a flavour of :mod:`fgrpo_theory.sim._jit`,
    and every package module those import when they are imported, transitively (helpers and
    module-level constants, which Numba compiles in; not the enclosing packages, whose code a
    kernel does not use; not :data:`_NOT_COMPILED_IN`).

    ``memo``: a JSON file that keeps each file's imports by its path and the SHA-256 of its
    text (read and updated here), so that a process whose kernel sources are unchanged does
    not parse them again (parsing the 13 files cost 0.06-0.1 s of every process that loads a
    kernel); the result is the same with or without it."""
    roots = {_PACKAGE_DIR.name: _PACKAGE_DIR}
    kernels = [p for p in _PACKAGE_DIR.rglob("*.py") if _KERNEL_MARKS.search(p.read_text("utf-8"))]
    kernels = [p for p in kernels if module_name(p, roots)[0] not in _NOT_COMPILED_IN]
    if memo is None:
        closure = import_closure(
            kernels, roots, in_functions=False, packages=False, exclude=_NOT_COMPILED_IN
        )
        return tuple(closure)
    known = _read_memo(memo)
    seen: dict[str, list[list[str]]] = {}
    # the reading of imports is this file's code: a memo written by another version is not used
    reader = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]

    def imports(f: Path) -> tuple[set[str], set[str]]:
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        key = f"{f.relative_to(_PACKAGE_DIR).as_posix()} {digest} {reader}"
        hit = known.get(key)
        if hit is None:
            found, used = file_imports(f, roots, in_functions=False)
            hit = [sorted(found), sorted(used)]
        seen[key] = hit
        return set(hit[0]), set(hit[1])

    closure = import_closure(
        kernels, roots, in_functions=False, packages=False, exclude=_NOT_COMPILED_IN,
        imports=imports,
    )  # fmt: skip
    if seen != known:
        _write_memo(memo, seen)
    return tuple(closure)


def _read_memo(path: Path) -> dict[str, list[list[str]]]:
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    ok = isinstance(data, dict) and all(
        isinstance(v, list) and len(v) == 2 and all(isinstance(x, list) for x in v)
        and all(isinstance(n, str) for x in v for n in x)
        for v in data.values()
    )  # fmt: skip
    return data if ok else {}


def _write_memo(path: Path, data: dict[str, list[list[str]]]) -> None:
    """Best effort, atomic (a concurrent reader sees the old memo or the new one)."""
    import json
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(tmp)


#: The memo of :func:`kernel_sources`, in the kernel cache folder.
_MEMO_NAME = "kernel-imports.json"


@lru_cache(maxsize=1)
def _kernels_digest() -> str:
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


def announce_compilation() -> None:
    """Print :data:`COMPILE_NOTICE` to stderr, once per process, when Numba starts compiling a
    kernel of this package (a cache miss; a kernel loaded from the cache says nothing).

    Numba broadcasts a ``"numba:compile"`` event only after its disk cache missed, so the line
    appears exactly when the user is about to wait. Kernels of other packages are ignored. If
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
            global _announced
            if _announced:
                return
            func = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
            module = getattr(func, "__module__", "") or ""
            if module.split(".")[0] != _PACKAGE_DIR.name:
                return
            _announced = True
            import sys

            where = _compile_cache_dir()
            where = "no folder (none is usable)" if where == NO_CACHE else where
            print(COMPILE_NOTICE.format(where=where), file=sys.stderr, flush=True)

        def on_end(self, ev):  # noqa: ANN001 - Numba's signature
            return None

    event.register("numba:compile", _Notice())
