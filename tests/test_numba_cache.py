"""Compiled kernels are cached in the user cache folder, never next to the package's source.

An installed wheel must not write into site-packages (issue 9). Checked in subprocesses, because
the cache folder is fixed when the kernels are decorated; nothing is compiled here (the locator
is chosen at decoration time), so the test is fast.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = (
    "import fgrpo_theory.sim.kernels as k, fgrpo_theory.population.kernel as p\n"
    "print(k._max._cache._cache_path)\n"
    "print(p.pop_run._cache._cache_path)\n"
)


def _paths(env_extra: dict[str, str]) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(env_extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True
    )
    return out.stdout.split()


def test_kernels_cache_in_the_user_cache_folder(tmp_path):
    paths = _paths({"FGRPO_THEORY_CACHE_DIR": str(tmp_path)})
    assert len(paths) == 2
    for p in paths:
        assert Path(p).is_relative_to(tmp_path / "numba"), p
        assert not Path(p).is_relative_to(ROOT / "fgrpo_theory"), p


def test_a_numba_cache_dir_set_by_the_user_wins(tmp_path):
    paths = _paths(
        {
            "FGRPO_THEORY_CACHE_DIR": str(tmp_path / "ours"),
            "NUMBA_CACHE_DIR": str(tmp_path / "theirs"),
        }
    )
    for p in paths:
        assert Path(p).is_relative_to(tmp_path / "theirs"), p


PROBE_KERNEL = """\
from numba import njit

from .sim.rng import next_uniform


@njit(cache=True)
def probe(state):
    return next_uniform(state)
"""
RUN_PROBE = (
    "import numpy as np\n"
    "from fgrpo_theory._probe_kernel import probe\n"
    "print(repr(probe(np.array([7], dtype=np.uint64))), sum(probe.stats.cache_hits.values()))\n"
)


def _run_probe(pkg_root: Path, cache: Path) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["FGRPO_THEORY_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = str(pkg_root)
    out = subprocess.run(
        [sys.executable, "-c", RUN_PROBE],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=pkg_root,  # "-c" puts the working folder first on sys.path
    )
    value, hits = out.stdout.split()
    return float(value), int(hits)


def _package_copy(tmp_path: Path) -> Path:
    """A copy of the package with the probe kernel added; returns the folder holding it."""
    root = tmp_path / "src"
    shutil.copytree(
        ROOT / "fgrpo_theory", root / "fgrpo_theory", ignore=shutil.ignore_patterns("__pycache__")
    )
    (root / "fgrpo_theory" / "_probe_kernel.py").write_text(PROBE_KERNEL)
    return root


def test_an_edit_to_a_helper_in_another_file_recompiles_the_kernel(tmp_path):
    """A kernel compiles in a helper of another kernel file (the shared primitives); editing the
    helper's file must recompile the kernel, not serve the cached old machine code. (With Numba's
    own stamp, the file of the kernel alone, the edited run returns the old value from the cache.)
    """
    root = _package_copy(tmp_path)
    cache = tmp_path / "cache"
    first, _ = _run_probe(root, cache)
    again, hits = _run_probe(root, cache)
    assert again == first and hits == 1  # unchanged sources: served from the cache
    from fgrpo_theory.sim.rng import next_uniform

    defined_in = Path(next_uniform.py_func.__code__.co_filename).resolve()
    helper = root / defined_in.relative_to(ROOT)  # the helper's file, in the copy
    text = helper.read_text()
    assert "INV53 = 1.0 / 9007199254740992.0" in text
    helper.write_text(text.replace("INV53 = 1.0 /", "INV53 = 0.5 /"))
    edited, hits = _run_probe(root, cache)
    assert hits == 0
    assert edited == first / 2


def test_an_edit_to_a_constant_a_kernel_imports_recompiles_it(tmp_path):
    """Numba freezes module-level globals into the machine code: the random stream's multiplier
    comes from sim/keys.py (no Numba there), so the stamp must cover the modules the kernel
    sources import. (Found by review: with the kernel sources alone, the edited run was served
    the old constant from the cache while the Python mirror of the stream used the new one.)"""
    root = _package_copy(tmp_path)
    cache = tmp_path / "cache"
    first, _ = _run_probe(root, cache)
    keys = root / "fgrpo_theory" / "sim" / "keys.py"
    text = keys.read_text()
    assert "M1_INT = 0xBF58476D1CE4E5B9" in text
    keys.write_text(text.replace("M1_INT = 0xBF58476D1CE4E5B9", "M1_INT = 0xBF58476D1CE4E5B7"))
    edited, hits = _run_probe(root, cache)
    assert hits == 0
    assert edited != first


def test_kernel_sources_follow_imports():
    from fgrpo_theory._imports import _PACKAGE_DIR, kernel_sources

    names = {str(p.relative_to(_PACKAGE_DIR)) for p in kernel_sources()}
    assert {"sim/kernels.py", "sim/keys.py", "sim/records.py", "population/kernel.py"} <= names
    assert "cli/simulate.py" not in names and "sim/runner.py" not in names


def _hand_package(tmp_path: Path) -> Path:
    """A tiny package ``pkg`` whose imports are read off by hand in the test below."""
    files = {
        "__init__.py": "",
        "a.py": (
            "from __future__ import annotations\n"
            "import os\n"
            "from . import b\n"  # a module imported from the package
            "from .sub.c import VALUE\n"  # relative, two levels: pkg.sub.c (and runs pkg.sub)
            "import pkg.d\n"  # absolute package import
            "class K:\n"
            "    from .g import H\n"  # a class body runs at import
            "def f():\n"
            "    from . import e\n"  # runs only when f is called
            "    from . import skipped\n"
        ),
        "b.py": "X = 1\n",
        "d.py": "",
        "e.py": "from .sub.lazy import name\n",  # an attribute of a lazy package
        "f.py": "",
        "g.py": "H = 2\n",
        "skipped.py": "from . import f\n",
        "sub/__init__.py": "",
        "sub/c.py": "VALUE = 3\n",
        "sub/lazy/__init__.py": "def __getattr__(name):\n    raise AttributeError(name)\n",
        "sub/lazy/m.py": "",
        "sub/lazy/n.py": "",
    }
    for name, text in files.items():
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text(text)
    return tmp_path / "pkg"


def test_import_closure_by_hand(tmp_path):
    from fgrpo_theory._imports import file_imports, import_closure, module_file

    pkg = _hand_package(tmp_path)
    roots = {"pkg": pkg}

    def closure(**kw):
        files = import_closure([pkg / "a.py"], roots, **kw)
        return {str(p.relative_to(pkg.resolve())) for p in files}

    found, used = file_imports(pkg / "a.py", roots, in_functions=False)
    assert found == {"__future__", "__future__.annotations", "os", "pkg", "pkg.b", "pkg.sub.c",
                     "pkg.sub.c.VALUE", "pkg.d", "pkg.g", "pkg.g.H"}  # fmt: skip
    # used: only what may come from a module __getattr__ (outside modules always count); every
    # name a.py takes is a submodule (b) or bound in its module's file (VALUE, H), and pkg is
    # never used as a value
    assert used == {"__future__", "os"}
    assert module_file("pkg.sub.c.VALUE", roots) is None  # a name, not a module
    assert module_file("pkg.sub", roots) == pkg / "sub" / "__init__.py"
    assert module_file("pkg.sub.c", roots, exclude=("pkg.sub",)) is None

    # module level, named modules only (the Numba stamp): not pkg/sub/__init__, not e, skipped
    kernel_like = {"a.py", "__init__.py", "b.py", "sub/c.py", "d.py", "g.py"}
    assert closure(in_functions=False, packages=False) == kernel_like
    # the whole file, with the packages an import runs (the figure cache): e is imported in f,
    # it uses the lazy package pkg.sub.lazy, which brings all its modules; skipped brings f
    whole = kernel_like | {"sub/__init__.py", "e.py", "skipped.py", "f.py"}
    lazy = {"sub/lazy/__init__.py", "sub/lazy/m.py", "sub/lazy/n.py"}
    assert closure() == whole | lazy
    assert closure(exclude=("pkg.skipped",)) == (whole | lazy) - {"skipped.py", "f.py"}
    assert closure(packages=False) == (whole | {"sub/lazy/__init__.py"}) - {"sub/__init__.py"}


@pytest.mark.parametrize(
    ("source", "lazy"),
    [
        ("from .sub.lazy import m\n", False),  # a submodule of the lazy package
        ("from .sub.lazy import VERSION\n", False),  # bound in its __init__
        ("from .sub.lazy import name\n", True),  # could come from __getattr__
        ("from .sub.lazy import *\n", True),
        ("import pkg.sub.lazy\nx = pkg.sub.lazy.m.Y\n", False),  # a chain through submodules
        ("import pkg.sub.lazy as L\nx = L.__file__, L.VERSION\n", False),  # module attributes
        ("import pkg.sub.lazy as L\nx = L.thing\n", True),
        ("import pkg.sub.lazy as L\nprint(L)\n", True),  # the module passed around
        ("import pkg\nx = pkg.sub.lazy.thing\n", True),
        ("import pkg.sub.lazy\n", False),  # imported, never read
        # the lazy package imported as a name of its parent, then read like ``import ... as``
        ("from .sub import lazy\nx = lazy.thing\n", True),
        ("from pkg.sub import lazy as L\nx = L.thing\n", True),
        ("from .sub import lazy\nprint(lazy)\n", True),
        ("from .sub import lazy\nx = lazy.VERSION, lazy.__file__\n", False),
        ("from .sub import lazy\nx = lazy.m.Y\n", False),
        # an annotation without a value binds nothing: the name comes from __getattr__
        ("from .sub.lazy import ANNOTATED\n", True),
        ("from .sub.lazy import TYPED\n", False),  # annotated and assigned: bound
        # a top-level ``del`` unbinds: the name comes from __getattr__ unless bound again after
        ("from .sub.lazy import DELETED\n", True),
        ("from .sub.lazy import DELETED_IN_IF\n", True),
        ("from .sub.lazy import REBOUND\n", False),
        ("import pkg.sub.lazy as L\nx = L.DELETED\n", True),
    ],
)
def test_lazy_package_is_followed_only_where_a_lazy_name_may_be_read(tmp_path, source, lazy):
    """import_closure brings every module of a lazy package (one with a module __getattr__) only
    when the file may read a name that __getattr__ would produce; a submodule it names, a name
    the package's __init__ binds or a module attribute set by the import system bring only
    themselves. The oracle is the hand-read rule for each one-line source."""
    from fgrpo_theory._imports import import_closure

    pkg = tmp_path / "pkg"
    files = {
        "__init__.py": "",
        "a.py": source,
        "sub/__init__.py": "",
        "sub/lazy/__init__.py": (
            "VERSION = 1\nANNOTATED: int\nTYPED: int = 2\ndef __getattr__(name):\n    return name\n"
            "DELETED = REBOUND = DELETED_IN_IF = 3\ndel DELETED, REBOUND\nREBOUND = 4\n"
            "if VERSION:\n    del DELETED_IN_IF\n"
        ),
        "sub/lazy/m.py": "Y = 2\n",
        "sub/lazy/n.py": "",
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    got = {str(p.relative_to(pkg.resolve())) for p in import_closure([pkg / "a.py"], {"pkg": pkg})}
    assert ("sub/lazy/n.py" in got) is lazy
    assert "sub/lazy/__init__.py" in got
    if "import m" in source or ".m." in source:
        assert "sub/lazy/m.py" in got


@pytest.mark.parametrize(
    ("source", "lazy"),
    [
        ("from .tools import x\n", True),  # could come from tools' module __getattr__
        ("from .tools import KNOWN\n", False),  # bound in tools.py
        ("import pkg.tools as T\ny = T.x\n", True),
        ("from . import tools\ny = tools.x\n", True),
        ("from . import tools\ny = tools.KNOWN\n", False),
        ("from .other import thing\n", False),  # other's __getattr__ is a class's, not its own
    ],
)
def test_a_plain_module_with_a_module_getattr_is_lazy_too(tmp_path, source, lazy):
    """A module that is no package but loads names with a module ``__getattr__`` (PEP 562) may
    run any module of its package (here ``importlib`` with a name known only at run time):
    import_closure brings them all where a file may read a name that ``__getattr__`` would
    produce, as for a lazy package. The oracle is the hand-read rule for each source."""
    from fgrpo_theory._imports import import_closure

    pkg = tmp_path / "pkg"
    files = {
        "__init__.py": "",
        "a.py": source,
        "tools.py": (
            "import importlib\nKNOWN = 1\n"
            "def __getattr__(name):\n    return importlib.import_module('pkg.impl.' + name)\n"
        ),
        "other.py": "class C:\n    def __getattr__(self, name):\n        return name\n",
        "impl/__init__.py": "",
        "impl/x.py": "",
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    got = {str(p.relative_to(pkg.resolve())) for p in import_closure([pkg / "a.py"], {"pkg": pkg})}
    assert ("impl/x.py" in got) is lazy
    assert "tools.py" in got or "other.py" in got


# The first compilation says so on stderr (one line), a cached kernel says nothing.
PROBE_COMPILE = (
    "import numpy as np\n"
    "from numba import njit\n"
    "from fgrpo_theory.sim.kcore import _max\n"
    "@njit\n"
    "def other(x):\n"  # another package's kernel: never announced
    "    return x + 1.0\n"
    "other(1.0)\n"
    "from fgrpo_theory._libm_loops import exp_into\n"  # ours, but compiles in well under 1 s
    "exp_into(np.zeros(3), np.empty(3))\n"
    "import sys; print('after other', file=sys.stderr, flush=True)\n"
    "print(_max(np.arange(5.0)))\n"
    "print(_max(np.arange(7.0)))\n"
)


def _run_compile_probe(cache: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["FGRPO_THEORY_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", PROBE_COMPILE], capture_output=True, text=True, env=env, check=True
    )


def test_first_compilation_prints_one_line_and_a_cached_run_none(tmp_path):
    from fgrpo_theory._numba_cache import COMPILE_NOTICE

    first = _run_compile_probe(tmp_path)
    assert first.stdout.split() == ["4.0", "6.0"]
    lines = first.stderr.splitlines()
    notice = COMPILE_NOTICE.format(where=tmp_path / "numba")
    # printed once, when our kernel compiles, not for another package's njit function nor for
    # the libm loop
    assert lines == ["after other", notice], first.stderr
    second = _run_compile_probe(tmp_path)
    assert second.stdout.split() == ["4.0", "6.0"]
    assert second.stderr.splitlines() == ["after other"], second.stderr


FULL_DISK = (
    "import errno\n"
    "import numba.core.caching as caching\n"
    "def full(self, filepath):\n"
    "    raise OSError(errno.ENOSPC, 'No space left on device')\n"
    "caching.IndexDataCacheFile._open_for_write = full\n"
)


def _run_probe_raw(pkg_root: Path, cache: Path, prelude: str = "") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["FGRPO_THEORY_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = str(pkg_root)
    return subprocess.run(
        [sys.executable, "-c", prelude + RUN_PROBE],
        capture_output=True,
        text=True,
        env=env,
        cwd=pkg_root,
    )


def _cache_lines(stderr: str) -> list[str]:
    from fgrpo_theory._numba_cache import COMPILE_NOTICE

    head = COMPILE_NOTICE.partition("{")[0]
    return [line for line in stderr.splitlines() if not line.startswith(head)]


def test_a_full_cache_disk_costs_one_line_naming_the_folder_never_the_run(tmp_path):
    """Issue 26: Numba's saver raises ENOSPC from its file writes (as on a full disk); before the
    fix the run ended in Numba's traceback (exit 1). Now it goes on with the same result and one
    line naming the folder, and nothing is left in the cache."""
    root = _package_copy(tmp_path)
    expected, _ = _run_probe(root, tmp_path / "good")
    cache = tmp_path / "full"
    out = _run_probe_raw(root, cache, FULL_DISK)
    assert out.returncode == 0, out.stderr
    value, hits = out.stdout.split()
    assert float(value) == expected and int(hits) == 0
    lines = _cache_lines(out.stderr)
    assert len(lines) == 1, out.stderr
    assert str(cache / "numba") in lines[0] and "No space left on device" in lines[0]
    # no kernel file; the memo of the kernel sources' imports (small, written whole or not at
    # all, not by Numba's saver that this test makes fail) may be there
    left = [p for p in cache.rglob("*") if p.is_file() and p.name != "kernel-imports.json"]
    assert not left


def _mount_full_tmpfs(where: Path) -> bool:
    where.mkdir()
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)])
    if done.returncode != 0:
        return False
    try:
        with open(where / "fill", "wb") as f:  # fill the disk to the last block
            while True:
                f.write(b"\0" * 4096)
                f.flush()
    except OSError:
        pass
    return True


def test_a_really_full_disk_costs_one_line_never_the_run(tmp_path):
    """The same on a real full file system (a 64 KiB tmpfs filled to the last block): needs root
    and mount, else skipped."""
    import pytest

    disk = tmp_path / "disk"
    try:
        if not _mount_full_tmpfs(disk):
            pytest.skip("needs root and a tmpfs mount")
        root = _package_copy(tmp_path)
        expected, _ = _run_probe(root, tmp_path / "good")
        (disk / "cache").mkdir(mode=0o700)
        out = _run_probe_raw(root, disk / "cache")
        assert out.returncode == 0, out.stderr
        assert float(out.stdout.split()[0]) == expected
        lines = _cache_lines(out.stderr)
        assert len(lines) == 1 and str(disk / "cache" / "numba") in lines[0], out.stderr
    finally:
        if os.path.ismount(disk):
            subprocess.run(["umount", str(disk)], check=True)


def test_a_run_without_a_usable_cache_folder_names_and_removes_its_temporary_one(tmp_path):
    """A missing home folder (never created): the kernels are cached in a private temporary
    folder for the run. The compile notice named the unusable folder under the missing home,
    and every such run left its temporary folder behind."""
    root = _package_copy(tmp_path)
    env = {k: v for k, v in os.environ.items()}
    for k in ("NUMBA_CACHE_DIR", "FGRPO_THEORY_CACHE_DIR", "XDG_CACHE_HOME"):
        env.pop(k, None)
    env.update(HOME=str(tmp_path / "no-home"), PYTHONPATH=str(root), TMPDIR=str(tmp_path / "t"))
    (tmp_path / "t").mkdir()
    out = subprocess.run(
        [sys.executable, "-c", RUN_PROBE], capture_output=True, text=True, env=env, cwd=root
    )
    assert out.returncode == 0, out.stderr
    from fgrpo_theory._numba_cache import COMPILE_NOTICE

    head = COMPILE_NOTICE.partition("{")[0]
    notice = [line for line in out.stderr.splitlines() if line.startswith(head)]
    assert len(notice) == 1 and str(tmp_path / "t" / "fgrpo-theory-numba-") in notice[0]
    assert "no-home" not in notice[0]
    assert not (tmp_path / "no-home").exists()
    assert list((tmp_path / "t").iterdir()) == []  # the temporary cache folder is gone


def test_kernel_sources_are_the_same_with_a_memo_fresh_stale_or_broken(tmp_path):
    """The memo of each file's imports (kept in the kernel cache folder so that a warm process
    does not parse the kernel sources) never changes the answer: absent, written, reused, with
    an entry for an edited file (keyed by the file's text, so unused) or unreadable."""
    import json

    from fgrpo_theory._imports import kernel_sources

    plain = kernel_sources()
    memo = tmp_path / "kernel-imports.json"
    assert kernel_sources(memo) == plain  # written
    data = json.loads(memo.read_text())
    assert len(data) == len(plain) and all(len(v) == 2 for v in data.values())
    kernel_sources.cache_clear()
    assert kernel_sources(memo) == plain  # reused
    # a stale entry (another text of kernels.py) claiming no imports is not used
    key = next(k for k in data if k.startswith("sim/kernels.py "))
    data[key.split()[0] + " " + "0" * 64 + " " + key.split()[2]] = [[], []]
    del data[key]
    memo.write_text(json.dumps(data))
    kernel_sources.cache_clear()
    assert kernel_sources(memo) == plain
    # an entry for this very text written by another version of the import reader: not used
    path, digest, _reader = key.split()
    memo.write_text(json.dumps({**data, f"{path} {digest} {'0' * 16}": [[], []]}))
    kernel_sources.cache_clear()
    assert kernel_sources(memo) == plain
    memo.write_text("{not json")
    kernel_sources.cache_clear()
    assert kernel_sources(memo) == plain
    memo.write_text(json.dumps({"sim/kernels.py x": "wrong shape"}))
    kernel_sources.cache_clear()
    assert kernel_sources(memo) == plain
    # the cache machinery and the import reader compile nothing in: an edit to them recompiles
    # no kernel
    assert not {"_numba_cache.py", "_imports.py"} & {p.name for p in plain}


#: The fallback temporary folder cannot be created, nor written (a full /tmp): every way Python
#: makes a temporary folder or file raises ENOSPC.
FULL_TMP = (
    "import errno, tempfile\n"
    "def full(*a, **k):\n"
    "    raise OSError(errno.ENOSPC, 'No space left on device')\n"
    "tempfile.mkdtemp = tempfile.TemporaryFile = tempfile.mkstemp = full\n"
)


def _no_usable_cache_folder(tmp_path: Path, prelude: str) -> subprocess.CompletedProcess:
    """The probe kernel run with no usable cache folder (a missing home) and ``prelude`` run
    first, with TMPDIR in ``tmp_path / 't'``."""
    root = _package_copy(tmp_path)
    env = {k: v for k, v in os.environ.items()}
    for k in ("NUMBA_CACHE_DIR", "FGRPO_THEORY_CACHE_DIR", "XDG_CACHE_HOME"):
        env.pop(k, None)
    env.update(HOME=str(tmp_path / "no-home"), PYTHONPATH=str(root), TMPDIR=str(tmp_path / "t"))
    (tmp_path / "t").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-c", prelude + RUN_PROBE],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )


def test_a_full_tmp_on_the_fallback_path_costs_one_line_never_the_run(tmp_path):
    """Issue 26, the last case: the wanted and default cache folders are unusable (a missing
    home) and the fallback, a temporary folder, cannot be created either (a full /tmp, injected
    as ENOSPC from tempfile). Before the fix: a traceback from the cache locator (exit 1). Now
    the kernel runs uncached with the same result, and one line names both folders and why."""
    root_value, _ = _run_probe(_package_copy(tmp_path / "ref"), tmp_path / "good")
    out = _no_usable_cache_folder(tmp_path, FULL_TMP)
    assert out.returncode == 0, out.stderr
    value, hits = out.stdout.split()
    assert float(value) == root_value and int(hits) == 0
    lines = _cache_lines(out.stderr)
    assert len(lines) == 1, out.stderr
    assert str(tmp_path / "no-home") in lines[0] and "No space left on device" in lines[0]
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "no-home").exists()
    assert list((tmp_path / "t").iterdir()) == []
    # nothing was written next to the package's sources either (Numba's in-tree fallback)
    assert not list((tmp_path / "src").rglob("*.nbi"))


def test_a_really_full_tmp_on_the_fallback_path_never_ends_the_run(tmp_path):
    """The same with a real full file system as the temporary folder (a 64 KiB tmpfs filled to
    the last block; needs root and mount, else skipped): the run goes on with the same result,
    its lines name the folders, no traceback, nothing left behind."""
    import pytest

    disk = tmp_path / "disk"
    try:
        if not _mount_full_tmpfs(disk):
            pytest.skip("needs root and a tmpfs mount")
        root_value, _ = _run_probe(_package_copy(tmp_path / "ref"), tmp_path / "good")
        # Python's tempfile skips a TMPDIR it cannot write a test file in; this is the folder
        # it would use
        out = _no_usable_cache_folder(
            tmp_path, f"import tempfile; tempfile.tempdir = {str(disk)!r}\n"
        )
        assert out.returncode == 0, out.stderr
        assert float(out.stdout.split()[0]) == root_value
        lines = _cache_lines(out.stderr)
        assert 1 <= len(lines) <= 2 and all(str(disk) in line for line in lines), out.stderr
        assert "Traceback" not in out.stderr
        assert sorted(p.name for p in disk.iterdir()) == ["fill"]
    finally:
        if os.path.ismount(disk):
            subprocess.run(["umount", str(disk)], check=True)


def test_kernel_sources_parse_each_text_at_most_twice(monkeypatch):
    """A first process (no memo) parses each kernel source at most twice: once for its imports
    and once for the names it binds (asked for many times; it parsed 217 times for 17 files,
    0.55 s of a cold first ``simulate``). The answer is the same as with a memo."""
    import ast
    from collections import Counter

    from fgrpo_theory import _imports

    expected = _imports.kernel_sources()
    _imports.kernel_sources.cache_clear()
    memo = getattr(_imports, "_bound_names_of", None)
    if memo is not None:
        memo.cache_clear()
    parsed: Counter[bytes] = Counter()
    parse = ast.parse

    def counting(source, *args, **kwargs):  # noqa: ANN001, ANN202 - ast.parse's signature
        parsed[source if isinstance(source, bytes) else str(source).encode()] += 1
        return parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting)
    try:
        found = _imports.kernel_sources()
    finally:
        monkeypatch.undo()
        _imports.kernel_sources.cache_clear()
    assert found == expected
    assert len(parsed) >= len(expected) and max(parsed.values()) <= 2
