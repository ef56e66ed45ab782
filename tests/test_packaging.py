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
    "fgrpo_theory_experiments.stored": ROOT / "experiments" / "stored",
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


def test_stored_module_wins_over_its_data_folder():
    """Declaring the data folder experiments/stored/ must not shadow experiments/stored.py."""
    from fgrpo_theory.cli._experiments import experiments_package

    experiments_package()
    from fgrpo_theory_experiments import stored

    assert Path(stored.__file__).name == "stored.py"


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


def test_no_module_outside_the_cli_imports_the_cli():
    """The library never imports the CLI (the console script's shim lives in the CLI layer):
    every import in every module of the package outside ``fgrpo_theory/cli``, at any depth
    (function bodies included), read statically with :mod:`ast`."""
    import ast
    from pathlib import Path

    pkg = Path(__file__).resolve().parents[1] / "fgrpo_theory"
    offenders = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg.parent)
        if rel.parts[1] == "cli":
            continue
        parts = list(rel.with_suffix("").parts)
        package = parts[:-1]  # a module's package; an __init__'s is its own folder as well
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    mod = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    mod = node.module or ""
                names = [mod] + [f"{mod}.{a.name}" for a in node.names]
            for name in names:
                if name == "fgrpo_theory.cli" or name.startswith("fgrpo_theory.cli."):
                    offenders.append(f"{rel}:{node.lineno}: {name}")
        text = path.read_text(encoding="utf-8")
        if "import_module(" in text and "fgrpo_theory.cli" in text:
            offenders.append(f"{rel}: a dynamic import naming fgrpo_theory.cli")
    assert offenders == []


def test_the_console_script_is_the_cli_layers_shim():
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["fgrpo-theory"] == "fgrpo_theory.cli._entry:script"
    assert not (root / "fgrpo_theory" / "_entry.py").exists()
