"""The static import graph of the project's sources: which files a file's code may run, read
with :mod:`ast` (nothing is imported).

Two closures are built on it. :func:`kernel_sources`, the files a compiled Numba kernel may
depend on (what the kernel cache's stamp digests, :mod:`fgrpo_theory._numba_cache`), reads only
what runs at import and the modules named. The code digest that keys the experiments' cached
and stored result tables (``fgrpo_theory_experiments.cache.import_closure``) reads the whole
file, imports inside functions included, and the packages an import runs.

Lazy packages and modules. A module that loads names on demand with a module ``__getattr__``
(PEP 562) may run any of its package's modules; :func:`import_closure` brings all of them only
where a file may read a name that ``__getattr__`` would produce (:func:`file_imports`).
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

__all__ = ["import_closure", "file_imports", "module_file", "module_name", "kernel_sources"]

_PACKAGE_DIR = Path(__file__).resolve().parent

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
    produced by a module ``__getattr__``: ``from P import x``, or ``P.x`` after ``import P`` or
    after ``from Q import P`` when ``Q.P`` is a module (attribute chains are followed through
    submodules: ``import a`` then ``a.b.f`` names ``a.b`` and uses it if ``f`` is not bound
    there), or ``P`` itself passed around. A module outside ``roots`` is used whenever it is
    imported.
    """
    mod, is_pkg = module_name(path, roots)
    package = (mod if is_pkg else mod.rpartition(".")[0]) if mod else ""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    found: set[str] = set()
    used: set[str] = set()
    bound: dict[str, str] = {}  # a name an import binds to a module -> that module
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
        for a in node.names:  # ``from Q import P`` with ``Q.P`` a module: ``P.x`` reads it
            if a.name != "*" and module_file(f"{base}.{a.name}", roots) is not None:
                bound[a.asname or a.name] = f"{base}.{a.name}"
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
    including those under ``if`` / ``try`` / ``with``; not what a ``__getattr__`` returns, nor
    an annotation without a value, ``x: int``, which binds nothing). Statements are read in
    source order and a top-level ``del x`` (also under ``if`` / ``try``: it may run) unbinds
    ``x`` unless a later statement binds it again."""
    return _bound_names_of(path.read_bytes())


@lru_cache(maxsize=256)
def _bound_names_of(source: bytes) -> frozenset[str]:
    """:func:`_bound_names` of a module's text, kept by that text: a closure asks for the same
    module many times (the kernel sources' closure parsed 217 times for 17 files, 0.55 s of a
    first ``simulate``'s start-up before this memo)."""
    names: set[str] = set()

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names.update(a.asname or a.name.partition(".")[0] for a in node.names)
            elif isinstance(node, ast.AnnAssign) and node.value is None:
                continue
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, ast.Delete):
                names.difference_update(
                    n.id
                    for t in node.targets
                    for n in ast.walk(t)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Del)
                )
            elif isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
                for field in ("body", "handlers", "orelse", "finalbody"):  # source order
                    for sub in getattr(node, field, []):
                        walk(sub.body if isinstance(sub, ast.ExceptHandler) else [sub])

    walk(ast.parse(source).body)
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
    module that loads names lazily (a module-level ``__getattr__``, PEP 562) and whose attributes
    are used, all the modules of its package: a package's ``__init__`` brings the package, a
    plain module the package it is in. Modules in or under ``exclude`` are not followed.
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
            if packages and name in used and "__getattr__" in _bound_names(g):
                for h in sorted(g.parent.rglob("*.py")):
                    sub, _ = module_name(h, roots)
                    if sub is not None and not _excluded(sub, exclude):
                        stack.append(h)
    return sorted(seen)


_KERNEL_MARKS = re.compile(r"^(from numba import |import numba|@njit|@numba\.|@jit_)", re.M)


#: Modules a kernel source imports that hold no code or constant a kernel compiles in: the cache
#: machinery (its locator and loader, imported by ``sim/_jit.py``) and this reader of imports. An
#: edit there changes how kernels are found and loaded, never their machine code.
_NOT_COMPILED_IN = (f"{_PACKAGE_DIR.name}._numba_cache", __name__)


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
