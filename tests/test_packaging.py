"""Packaging: the package list in pyproject.toml matches the tree, and experiments/ is installed
under the project-specific name ``fgrpo_theory_experiments`` (never a top-level ``experiments``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "setuptools"
    ]


def test_every_library_package_is_listed():
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "fgrpo_theory").rglob("__init__.py")
    }
    listed = set(_setuptools()["packages"])
    assert on_disk | {"fgrpo_theory_experiments"} == listed


def test_experiments_install_under_a_project_specific_name():
    st = _setuptools()
    assert "experiments" not in st["packages"]
    assert st["package-dir"]["fgrpo_theory_experiments"] == "experiments"
    assert all(not p.startswith("experiments") for p in st["packages"])


def test_mpmath_is_a_runtime_dependency():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "dependencies"
    ]
    assert any(d.startswith("mpmath") for d in deps)
