"""The public API of ``import fgrpo_theory as ft``: lazy, catalogued, and cheap to import.

Oracles: a fresh interpreter's ``sys.modules`` (what importing really loads), the defining modules
themselves (each catalogue entry must be the very object its module defines), and the package's
files (pyproject.toml's single version source, py.typed).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fgrpo_theory as ft

ROOT = Path(__file__).resolve().parents[1]

#: Modules that importing the package or calling a closed form must not load.
HEAVY = ("numba", "matplotlib", "fgrpo_theory.sim", "fgrpo_theory.cli", "typer", "rich",
         "torch", "trl", "verl", "transformers", "ray", "fgrpo_theory.integrations")  # fmt: skip


def _loaded_after(code: str) -> list[str]:
    """Names of the HEAVY modules in sys.modules after running ``code`` in a fresh interpreter."""
    probe = (
        f"import sys, json\n{code}\n"
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_is_cheap():
    assert _loaded_after("import fgrpo_theory") == []


def test_closed_form_access_is_cheap():
    code = (
        "import fgrpo_theory as ft\n"
        "p = ft.tail_miss_probability(8, 0.3, 0.015)\n"
        "assert abs(p - 0.8284229645280763) < 1e-15, p\n"
        "ft.peak_group_size(0.3, 0.015); ft.pass_at_k(10, 3, 2)"
    )
    assert _loaded_after(code) == []


def _catalogue_names() -> list[str]:
    """Names listed in the package docstring's catalogue, in order (``   name   -- text``)."""
    return re.findall(r"^ {3}(\w+) +-- ", ft.__doc__, flags=re.MULTILINE)


def test_catalogue_lists_exactly_the_public_names():
    names = _catalogue_names()
    assert len(names) == len(set(names)), "a name is catalogued twice"
    assert set(names) == set(ft.__all__) == set(ft._LAZY)
    assert ft.__all__ == sorted(ft.__all__)


def test_catalogue_survives_optimize_flag():
    """``python -OO`` strips docstrings; the lazy names are read from the catalogue all the same."""
    code = (
        "import fgrpo_theory as ft\n"
        "assert len(ft.__all__) > 50, ft.__all__\n"
        "assert ft.tail_miss_probability(8, 0.3, 0.015) == 0.8284229645280763"
    )
    subprocess.run(
        [sys.executable, "-OO", "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=True,
    )


def test_all_holds_no_internals():
    for name in ft.__all__:
        assert not name.startswith("_"), name
        assert name.isidentifier()
    for internal in (
        "GOLDEN_INT",
        "write_atomic",
        "check_array",
        "fail",
        "MAX_EXACT_INT",
        "run_one",
    ):
        assert internal not in ft.__all__


@pytest.mark.parametrize("name", sorted(ft._LAZY))
def test_catalogue_entry_resolves(name):
    """Each entry is the object its module defines. A module that does not exist yet on this
    branch (added by another branch) is skipped; a missing name in an existing module fails."""
    module_name = ft._LAZY[name]
    if importlib.util.find_spec(module_name) is None:
        pytest.skip(f"{module_name} is not on this branch")
    module = importlib.import_module(module_name)
    assert hasattr(module, name), f"{module_name} defines no {name}"
    assert getattr(ft, name) is getattr(module, name)
    if hasattr(module, "__all__"):
        assert name in module.__all__, f"{name} is not in {module_name}.__all__"
    doc = getattr(module, name).__doc__
    assert doc and doc.strip(), f"{module_name}.{name} has no docstring"


def test_dir_and_attribute_errors():
    listing = dir(ft)
    assert set(ft.__all__) <= set(listing)
    assert "__version__" in listing and "sim" in listing and "mass" in listing
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        ft.no_such_name  # noqa: B018
    assert ft.mass is importlib.import_module("fgrpo_theory.mass")


def test_single_version_source():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in meta["project"]
    assert "version" in meta["project"]["dynamic"]
    attr = meta["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "fgrpo_theory.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+([.-]?\w+)?", ft.__version__)


def test_py_typed_marker_exists():
    assert (ROOT / "fgrpo_theory" / "py.typed").is_file()


def test_star_import_gives_every_public_name():
    missing = sorted({m for m in ft._LAZY.values() if importlib.util.find_spec(m) is None})
    if missing:
        pytest.skip(f"not on this branch: {', '.join(missing)}")
    code = (
        "from fgrpo_theory import *\n"
        "import fgrpo_theory as ft\n"
        "assert all(name in globals() for name in ft.__all__)"
    )
    assert "numba" not in _loaded_after(code)


def test_integrations_package_and_plan_import_no_trainer():
    """The integrations' shared helpers and ``plan`` import neither torch nor a trainer."""
    code = "import fgrpo_theory.integrations.groups, fgrpo_theory.plan, fgrpo_theory.schemes"
    loaded = _loaded_after(code)
    assert not {"torch", "trl", "verl", "transformers", "ray"} & set(loaded), loaded
