"""The softmax-policy simulator (vanilla and focal GRPO, DAPO, CISPO; SGD, Adam, AdamW).

Importing this package does not compile anything: the Numba kernels are imported and compiled
(or loaded from the on-disk cache) on the first call to :func:`simulate`.

>>> from fgrpo_theory.sim import SimConfig, simulate
>>> df = simulate(SimConfig(K=6, N=8, steps=50, seeds=4))  # doctest: +SKIP
"""

from __future__ import annotations

from .config import SimConfig
from .grid import config_hash, expand_grid, load_config, load_sweep
from .runner import SimTables, run_one, simulate
from .sweep import run_sweep

__all__ = [
    "SimConfig",
    "SimTables",
    "config_hash",
    "expand_grid",
    "load_config",
    "load_sweep",
    "simulate",
    "run_one",
    "run_sweep",
]
