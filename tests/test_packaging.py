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


#: Folders that hold package data (no Python code): setuptools sees an importable name and warns
#: ("Package ... is absent from the packages configuration") unless they are declared.
DATA_PACKAGES = {
    "fgrpo_theory.sim.presets": ROOT / "fgrpo_theory" / "sim" / "presets",
    "fgrpo_theory_experiments.data_published": ROOT / "experiments" / "data_published",
}


def test_every_library_package_is_listed():
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "fgrpo_theory").rglob("__init__.py")
    }
    listed = set(_setuptools()["packages"])
    assert on_disk | {"fgrpo_theory_experiments"} | set(DATA_PACKAGES) == listed


def test_every_data_folder_is_a_declared_package_with_its_files():
    """Any folder under a package holding non-Python files is declared, with a glob for them."""
    st = _setuptools()
    found = set()
    for pkg_root, name in ((ROOT / "fgrpo_theory", "fgrpo_theory"), (ROOT / "experiments", None)):
        for d in pkg_root.rglob("*"):
            if not d.is_dir() or d.name.startswith((".", "_")) or (d / "__init__.py").exists():
                continue
            if not any(f.is_file() for f in d.iterdir()):
                continue
            rel = d.relative_to(pkg_root).parts
            found.add(".".join([name or "fgrpo_theory_experiments", *rel]))
    assert found == set(DATA_PACKAGES)
    for pkg, folder in DATA_PACKAGES.items():
        assert folder.is_dir(), folder
        globs = st["package-data"][pkg]
        files = {f.name for f in folder.iterdir() if f.is_file()}
        matched = {f.name for g in globs for f in folder.glob(g)}
        assert files == matched, f"{pkg}: files not shipped: {sorted(files - matched)}"


def test_presets_module_wins_over_its_data_folder():
    """Declaring the data folder fgrpo_theory/sim/presets/ must not shadow sim/presets.py."""
    from fgrpo_theory.sim import presets

    assert Path(presets.__file__).name == "presets.py"
    assert "fig2-logprob-adam" in presets.preset_names()


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
