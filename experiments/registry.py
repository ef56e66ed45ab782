"""Registry of the experiments behind every figure, and the runner used by ``fgrpo-theory figures``.

Each experiment is a module ``experiments/<name>.py`` with

- ``PARAMS``: its declared parameters (a frozen dataclass instance);
- ``compute(params, fast=False) -> pandas.DataFrame``: a tidy table computed by the library
  (experiments hold no formulas of their own); ``fast=True`` reduces seeds, steps or grid sizes;
- ``plot(df, params) -> matplotlib.figure.Figure``: draws from that table only.

:func:`run` caches the table (:mod:`experiments.cache`), draws it in the paper style and writes
``<out>/<name>.pdf`` and ``.png`` with byte-identical output on reruns. Fast-mode figures carry a
"FAST PREVIEW" banner.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from fgrpo_theory._validate import fail

__all__ = ["Experiment", "EXPERIMENTS", "names", "get", "RunResult", "run"]


@dataclass(frozen=True)
class Experiment:
    """One figure: its name (file stem), a one-line title, whether it is in the paper."""

    name: str
    title: str
    in_paper: bool

    @property
    def module_name(self) -> str:
        return f"experiments.{self.name}"

    def load(self) -> ModuleType:
        """Import the experiment's module."""
        return importlib.import_module(self.module_name)


#: Every experiment, in the order ``figures all`` runs them (cheap ones first).
EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment("fig1a_tail_miss", "Fig. 1a: tail-miss probability against N (Lemma 3.1)", True),
    Experiment(
        "fig1bc_pass_at_k", "Fig. 1b,c: published pass@256 vs pass@1, AIME 2025 and IFEval", True
    ),
    Experiment("fig3_tail_miss_panels", "Fig. 3: tail-miss panels with starred peaks", True),
    Experiment("fig4_focal_magnitudes", "Fig. 4: focal-weighted advantage magnitudes", True),
    Experiment("fig5_tail_miss_long", "Fig. 5: tail miss up to N = 2^17 (Fig. 2 setting)", True),
    Experiment("val_lemma31_monte_carlo", "Lemma 3.1 against Monte Carlo over (mu, rho, N)", False),
    Experiment(
        "val_prop32_first_order",
        "Prop. 3.2 / P-17: first order vs exact update vs Monte Carlo",
        False,
    ),
    Experiment("map_peak_group_size", "Map of N* and peak tail-miss over (mu, rho)", False),
    Experiment("drift_threshold", "Expected-drift threshold of correct actions (section 6)", False),
    Experiment(
        "group_size_sweep_published",
        "Published group-size sweep beside the closed-form tail miss",
        False,
    ),
    Experiment(
        "fig2_simulation", "Fig. 2: categorical simulation (log-prob surrogate, Adam)", True
    ),
    Experiment("fig2_linear_adamw", "Fig. 2 as the text reads (linear surrogate, AdamW)", True),
    Experiment("fig2_sgd_vs_adam", "Fig. 2 under SGD beside Adam, gamma 0 and 1", False),
)

_BY_NAME = {e.name: e for e in EXPERIMENTS}


def names() -> list[str]:
    """Names of all experiments, in run order."""
    return [e.name for e in EXPERIMENTS]


def get(name: str) -> Experiment:
    """Look an experiment up by name (``ValueError`` listing the valid names otherwise)."""
    if name not in _BY_NAME:
        fail("figure name", name, "one of " + ", ".join(names()))
    return _BY_NAME[name]


@dataclass(frozen=True)
class RunResult:
    """What :func:`run` did for one figure."""

    name: str
    paths: tuple[Path, ...]
    cache_hit: bool
    seconds: float
    rows: int


def run(
    name: str,
    out_dir: str | Path = "figures",
    formats: tuple[str, ...] | str = ("pdf", "png"),
    *,
    fast: bool = False,
    force: bool = False,
    dpi: int = 300,
) -> RunResult:
    """Compute (or load from cache) one experiment's table, draw it and save the figure files.

    Parameters
    ----------
    name : str
        Experiment name (see :func:`names`).
    out_dir : str or Path
        Output folder; files are ``<out_dir>/<name>.<fmt>``.
    formats : tuple of str or str
        Figure formats (``"pdf"``, ``"png"``, ``"svg"``), or a comma-separated string.
    fast : bool
        Reduced settings (fewer seeds, steps or grid points); the figure is marked FAST PREVIEW.
    force : bool
        Recompute even if a cached table exists (simulations included).
    dpi : int
        Raster resolution (>= 200).
    """
    from fgrpo_theory.plotting import mark_fast_preview, paper_style, save_figure

    from . import _sim
    from .cache import cached, experiment_sources, library_sources, source_digest

    exp = get(name)
    mod = exp.load()
    params = mod.PARAMS
    code = source_digest(library_sources() + experiment_sources(name))
    t0 = time.perf_counter()
    _sim.RESUME = not force  # --force also reruns cached simulations
    try:
        df, hit = cached(
            name, params, lambda: mod.compute(params, fast=fast), fast=fast, force=force, code=code
        )
    finally:
        _sim.RESUME = True
    with paper_style():
        fig = mod.plot(df, params)
        if fast:
            mark_fast_preview(fig)
        paths = save_figure(fig, Path(out_dir) / name, formats, dpi=dpi)
    return RunResult(name, tuple(paths), hit, time.perf_counter() - t0, len(df))
