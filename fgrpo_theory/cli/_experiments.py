"""Find the experiments package (installed as ``fgrpo_theory_experiments``).

The repository keeps the folder ``experiments/`` at its top; the wheel installs it under the
project-specific import name :data:`PACKAGE` (``[tool.setuptools] package-dir`` in
pyproject.toml), so a user's own ``experiments/`` folder never shadows it and it never overwrites
another distribution's ``experiments``. In a source checkout used without installing
(``PYTHONPATH=$PWD``), :func:`experiments_package` loads ``experiments/`` under that same name.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["PACKAGE", "experiments_package"]

#: Import name of the experiments package.
PACKAGE = "fgrpo_theory_experiments"


def experiments_package() -> ModuleType:
    """Import :data:`PACKAGE`; in an uninstalled checkout, load ``<repo>/experiments/`` as it."""
    if PACKAGE in sys.modules:
        return sys.modules[PACKAGE]
    try:
        return importlib.import_module(PACKAGE)
    except ModuleNotFoundError as e:
        if e.name != PACKAGE:
            raise
    src = Path(__file__).resolve().parents[2] / "experiments" / "__init__.py"
    if not src.is_file():
        raise ModuleNotFoundError(f"no module named {PACKAGE!r} (reinstall fgrpo-theory)")
    spec = importlib.util.spec_from_file_location(
        PACKAGE, src, submodule_search_locations=[str(src.parent)]
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[PACKAGE]
        raise
    return mod
