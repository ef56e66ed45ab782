"""Populations of prompts with shared and per-prompt logits (theory.md section 13).

>>> from fgrpo_theory.population import PopulationConfig, simulate_population
>>> cfg = PopulationConfig(P=32, P_test=32, K=16, B=8, steps=20, seeds=2)
>>> df = simulate_population(cfg)  # doctest: +SKIP

Importing this package compiles nothing; the Numba kernel is loaded on the first simulation.
"""

from __future__ import annotations

from .config import (
    PopulationConfig,
    expand_population_grid,
    load_population_config,
    load_population_sweep,
    population_config_hash,
)
from .generate import Population, generate_population
from .matching import match_progress_population
from .runner import final_metrics, simulate_population
from .sweep import run_population_sweep

__all__ = [
    "PopulationConfig",
    "Population",
    "expand_population_grid",
    "load_population_sweep",
    "run_population_sweep",
    "generate_population",
    "load_population_config",
    "population_config_hash",
    "simulate_population",
    "match_progress_population",
    "final_metrics",
]
