"""Running the Fig. 2 simulation sweeps for the experiments (via :mod:`fgrpo_theory.sim`).

Simulation results are cached per config by :func:`fgrpo_theory.sim.run_sweep` (resume) under
``<cache>/sim/<digest>/``, the digest covering the source of every library module the simulator
imports, so figures that share runs (Fig. 2 and the SGD-vs-Adam figure) compute them once and a
change to the simulator never serves stale runs (``run_sweep`` also checks each file's stored
config hash and simulator digest).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import fgrpo_theory.sim

__all__ = ["CONFIG_DIR", "run_configs", "summarize", "final_values", "regimes"]

#: The simulator's shipped presets (``fgrpo-theory simulate --preset NAME``): the paper-setting
#: sweeps the Fig. 2 figures run. A path, so that the figure cache keys on the file's contents.
CONFIG_DIR = Path(fgrpo_theory.sim.__file__).resolve().parent / "presets"

METRICS = ("q_pos", "m_ret", "mass_rare")

#: Reuse finished runs from the cache (``figures --force`` sets it to False for one figure).
RESUME = True


def run_configs(sweep: dict[str, Any]) -> pd.DataFrame:
    """Run (or resume from the cache) every config of a sweep mapping; long-format result."""
    from fgrpo_theory._trust import make_dir
    from fgrpo_theory.sim import run_sweep
    from fgrpo_theory.sim.sweep import check_out_dir

    from .cache import cache_dir, module_sources

    out = cache_dir() / "sim" / module_sources("fgrpo_theory.sim")[:16]
    try:  # the cache is best-effort: a folder that cannot be made costs one line, not the run
        why = make_dir(out, 0o755)  # never a missing home folder
        if why is not None:
            raise ValueError(why)
        check_out_dir(out, "cache")
    except (OSError, ValueError) as e:
        print(f"fgrpo-theory: the run cache is not used ({e})", file=sys.stderr)
        return run_sweep(sweep, progress=False)
    return run_sweep(sweep, out_dir=out, resume=RESUME, progress=False, best_effort=True)


def summarize(raw: pd.DataFrame, by: tuple[str, ...] = ("N", "gamma")) -> pd.DataFrame:
    """Mean and standard error over seeds of q_pos, m_ret, mass_rare per (by..., step): long table.

    Columns: ``*by, step, metric, mean, se, seeds`` (``se`` = sample std / sqrt(seeds), 0 for one
    seed).
    """
    keys = [*by, "step"]
    metrics = [m for m in METRICS if m in raw.columns]
    long = raw.melt(id_vars=keys, value_vars=metrics, var_name="metric", value_name="value")
    g = long.groupby([*keys, "metric"], sort=True)["value"]
    out = g.agg(mean="mean", sd="std", seeds="count").reset_index()
    out["se"] = np.where(out["seeds"] > 1, out["sd"] / np.sqrt(out["seeds"]), 0.0)
    out["se"] = out["se"].fillna(0.0)
    return out.drop(columns="sd")


def final_values(df: pd.DataFrame, metric: str, **where: Any) -> pd.DataFrame:
    """Rows of ``metric`` at each run's last logged step, filtered by column == value."""
    d = df[df["metric"] == metric]
    for k, v in where.items():
        d = d[d[k] == v]
    last = d["step"].max()
    return d[d["step"] == last].sort_values("N")


def regimes(
    n: np.ndarray, m_ret: np.ndarray, threshold: float = 0.5
) -> list[tuple[str, float, float]]:
    """The three regimes of Fig. 2(c) read off final M_ret against N.

    Rule: regime II is the band of grid points from the first to the last N whose final retained
    mass is below ``threshold``; regime I is every smaller N, regime III every larger N. Boundaries
    sit at the geometric midpoints between neighbouring grid values. Returns ``(label, lo, hi)``
    triples (only the regimes that contain grid points); an empty list if no N is below the
    threshold (no collapse: nothing to mark).
    """
    n = np.asarray(n, dtype=float)
    m = np.asarray(m_ret, dtype=float)
    order = np.argsort(n)
    n, m = n[order], m[order]
    low = np.flatnonzero(m < threshold)
    if low.size == 0:
        return []
    i0, i1 = int(low[0]), int(low[-1])

    def mid(i: int) -> float:
        return float(np.sqrt(n[i] * n[i + 1]))

    lo_edge = n[0] / 1.5
    hi_edge = n[-1] * 1.5
    out = []
    if i0 > 0:
        out.append(("I", lo_edge, mid(i0 - 1)))
    out.append(("II", mid(i0 - 1) if i0 > 0 else lo_edge, mid(i1) if i1 < n.size - 1 else hi_edge))
    if i1 < n.size - 1:
        out.append(("III", mid(i1), hi_edge))
    return out
