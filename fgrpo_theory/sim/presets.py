"""The paper's simulator configurations shipped as named presets (package data).

A preset is a TOML file in ``fgrpo_theory/sim/presets/`` with the same keys as a ``--config`` file
(list-valued fields form a sweep). It is read with :mod:`importlib.resources`, so it works from an
installed wheel. ``fgrpo-theory simulate --preset NAME`` runs one; options given on the command
line override it.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any

__all__ = ["preset_names", "load_preset"]

_PACKAGE = "fgrpo_theory.sim"  # the TOML files are in its data folder presets/


def _files():
    return resources.files(_PACKAGE).joinpath("presets")


def preset_names() -> list[str]:
    """Sorted names of the shipped presets (file names without ``.toml``)."""
    return sorted(p.name[:-5] for p in _files().iterdir() if p.name.endswith(".toml"))


def load_preset(name: str) -> dict[str, Any]:
    """The parsed TOML mapping of preset ``name`` (what ``load_sweep`` returns for a file)."""
    from .._validate import fail
    from .grid import _check_keys

    names = preset_names()
    if not isinstance(name, str) or name not in names:
        fail("preset", name, "one of " + ", ".join(names))
    data = tomllib.loads(_files().joinpath(f"{name}.toml").read_text(encoding="utf-8"))
    _check_keys(data, f"config key in preset {name}")
    return data
