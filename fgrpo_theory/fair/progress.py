"""Equal-progress metrics from per-step simulator logs (theory.md section 11).

Compare arms where they have made the same progress, not at the same step: for each run and each
threshold t in (0, 1), the first logged step at which the correct mass Q_pos reaches t, and the
retained positive mass M_ret (P-26), every subset mass and the rare NLL rise there. Drawn over a
grid of thresholds this is the M_ret-against-Q_pos curve of the run (first passage).

This is the *log-based* implementation: it reads the long DataFrame of
:func:`fgrpo_theory.sim.simulate`. It is exact when the run was logged at every step
(``log_every = 1``); with a coarser log it returns the first *logged* step. The simulator's kernel
records the same metrics after every step without any per-step log (``SimConfig.thresholds``,
``simulate(cfg, tables=True).thresholds``), which :func:`~.compare.run_comparison` uses; this
module's :func:`threshold_metrics` is its test oracle.

Rare NLL: the rise from step 0 of the mean ``-log p`` over a named subset S.
The simulator logs it exactly for any subset (``nll_<S>``, ``nll_rise_<S>``: ``logsumexp(z) -
mean_{k in S} z_k``, whose oracle is :func:`mean_nll_from_logits`). From the subset masses alone
(what :func:`threshold_metrics` reads):

- for a single-action subset, ``-log p = -log m_S`` and the rise ``-log(m_S(t) / m_S(0))`` is
  exact (column ``nll_rise_<S>``);
- for a larger subset the mean of ``-log p`` is not a function of ``m_S``; this module reports
  ``nll_of_mean_rise_<S> = -log(m_S(t) / m_S(0))``, the rise of ``-log`` of the subset's *mean*
  probability (a different quantity; by Jensen it is at most the mean NLL at each step, but the
  rises are not ordered).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .._validate import fail

__all__ = [
    "DEFAULT_THRESHOLDS",
    "check_thresholds",
    "rare_nll_rise",
    "mean_nll_from_logits",
    "threshold_metrics",
    "progress_curve",
    "summarize_thresholds",
]

#: Q_pos thresholds of the equal-progress comparison. 0.98 is the independent review's threshold;
#: 0.9 and 0.95 are reached by focal gamma = 1 within 1,000 steps at N = 128 (its
#: final Q_pos there is about 0.92, README table), so every Fig. 2 companion N has a reachable one.
DEFAULT_THRESHOLDS = (0.9, 0.95, 0.98)

#: Columns identifying one run in a (possibly concatenated) simulator log.
RUN_KEYS = ("arm", "N", "gamma", "lr", "config_hash", "run")


def check_thresholds(thresholds: Any) -> np.ndarray:
    """Sorted unique thresholds, each in (0, 1); one-line ValueError otherwise."""
    if isinstance(thresholds, int | float | np.floating):
        thresholds = [thresholds]
    try:
        t = np.asarray(list(thresholds), dtype=float)
    except (TypeError, ValueError):
        fail("thresholds", thresholds, "a list of numbers in (0, 1)")
    if t.size == 0:
        fail("thresholds", "[]", "a non-empty list of numbers in (0, 1)")
    bad = ~((t > 0.0) & (t < 1.0))
    if bad.any():
        fail("thresholds", float(t[bad][0]), "in (0, 1)")
    return np.unique(t)


def rare_nll_rise(mass: Any, mass0: Any, size: int) -> np.ndarray:
    """Rise of ``-log`` of the mean probability of a subset of ``size`` actions since step 0.

    ``-log(mass / mass0)``; equal to the rise of the mean NLL exactly when ``size == 1``.
    Refuses an empty subset (``size < 1``) and non-positive masses.
    """
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
        fail("rare subset size", size, "a non-empty subset (size >= 1)")
    m = np.asarray(mass, dtype=float)
    m0 = np.asarray(mass0, dtype=float)
    if not ((m > 0).all() and (m0 > 0).all()):
        fail("mass", "a value <= 0", "positive subset masses (the softmax never reaches 0)")
    return -np.log(m / m0)


def mean_nll_from_logits(logits: Any, subset: Any) -> float:
    """Mean ``-log p_k`` over ``subset`` (indices) of ``softmax(logits)``: the exact rare NLL.

    ``logsumexp(z) - mean_{k in S} z_k``: what a kernel logging ``sum_{k in S} z_k`` per subset
    provides. Used as the oracle of the metric.
    """
    from scipy.special import logsumexp

    z = np.asarray(logits, dtype=float)
    idx = np.asarray(subset, dtype=np.int64).ravel()
    if idx.size == 0:
        fail("subset", "[]", "a non-empty rare subset")
    if (idx < 0).any() or (idx >= z.size).any():
        fail("subset", int(idx[(idx < 0) | (idx >= z.size)][0]), f"indices in [0, {z.size - 1}]")
    return float(logsumexp(z) - z[idx].mean())


def _run_keys(log: pd.DataFrame) -> list[str]:
    return [k for k in RUN_KEYS if k in log.columns]


def _check_log(log: pd.DataFrame, rare: Mapping[str, int]) -> None:
    if not isinstance(log, pd.DataFrame):
        fail("log", type(log).__name__, "a simulator DataFrame")
    for col in ("step", "q_pos", "m_ret"):
        if col not in log.columns:
            fail("log", f"a table without column {col!r}", "a simulator log (step, q_pos, m_ret)")
    if "run" not in log.columns:
        fail("log", "a table without column 'run'", "a simulator log with a run column")
    if len(log) == 0:
        fail("log", "an empty table", "a simulator log with rows")
    for name, size in rare.items():
        if f"mass_{name}" not in log.columns:
            fail("rare", name, "a subset the simulator logged (column mass_<name>)")
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
            fail(f"rare.{name}", size, "the size of a non-empty subset (>= 1)")


def _as_rare(rare: Mapping[str, int] | None) -> dict[str, int]:
    if rare is None:
        return {}
    if not isinstance(rare, Mapping):
        fail("rare", rare, "a mapping of subset name to its size, e.g. {'one': 1}")
    if len(rare) == 0:
        fail("rare", "{}", "a non-empty mapping (or None)")
    return dict(rare)


def threshold_metrics(
    log: pd.DataFrame,
    thresholds: Iterable[float] = DEFAULT_THRESHOLDS,
    *,
    rare: Mapping[str, int] | None = None,
    keep: Sequence[str] = ("arm", "N", "gamma", "lr", "lr_multiplier", "seed_index"),
) -> pd.DataFrame:
    """Metrics at the first logged step where each run's Q_pos reaches each threshold.

    Parameters
    ----------
    log : DataFrame
        Long output of :func:`fgrpo_theory.sim.simulate` (possibly several configs/arms
        concatenated; a run is identified by ``arm, N, gamma, lr, config_hash, run`` as present).
        Exact first-passage steps need ``log_every = 1``.
    thresholds : iterable of float
        Each in (0, 1).
    rare : mapping of str to int, optional
        Logged subsets to report, name -> number of actions (``{"one": 1, "rare": 9999}``).
        Adds ``mass_<name>`` and, for size 1, ``nll_rise_<name>`` (exact); for larger subsets
        ``nll_of_mean_rise_<name>`` (see the module docstring).
    keep : sequence of str
        Per-run columns copied into the output when present.

    Returns
    -------
    DataFrame
        One row per run and threshold: the kept columns, ``threshold``, ``reached`` (bool),
        ``step`` (first logged step with ``q_pos >= threshold``; ``-1`` if never),
        ``q_pos``, ``m_ret`` and the rare columns at that step. Runs that never reach the
        threshold carry ``reached = False`` and the values of their *last* logged step (never
        NaN); filter on ``reached`` before comparing.
    """
    t = check_thresholds(thresholds)
    rare_d = _as_rare(rare)
    _check_log(log, rare_d)
    keys = _run_keys(log)
    cols = ["step", "q_pos", "m_ret", *[f"mass_{n}" for n in rare_d]]
    d = log.sort_values([*keys, "step"], kind="stable")
    rows = []
    for _, g in d.groupby(keys, sort=True):
        q = g["q_pos"].to_numpy()
        vals = {c: g[c].to_numpy() for c in cols}
        base = {k: g[k].iloc[0] for k in keep if k in g.columns}
        base.update({k: g[k].iloc[0] for k in keys if k not in base})
        # first index with q >= t (q need not be monotone in step): running max
        qmax = np.maximum.accumulate(q)
        first = np.searchsorted(qmax, t, side="left")
        for ti, fi in zip(t, first, strict=True):
            reached = bool(fi < q.size)
            i = int(fi) if reached else q.size - 1
            row = dict(base)
            row["threshold"] = float(ti)
            row["reached"] = reached
            row["step"] = int(vals["step"][i]) if reached else -1
            row["q_pos"] = float(q[i])
            row["m_ret"] = float(vals["m_ret"][i])
            for n, size in rare_d.items():
                m = vals[f"mass_{n}"]
                row[f"mass_{n}"] = float(m[i])
                kind = "nll_rise" if size == 1 else "nll_of_mean_rise"
                row[f"{kind}_{n}"] = float(rare_nll_rise(m[i], m[0], int(size)))
            rows.append(row)
    out = pd.DataFrame(rows)
    return out.drop(columns=[k for k in ("run", "config_hash") if k not in keep], errors="ignore")


def progress_curve(
    log: pd.DataFrame,
    grid: Iterable[float] | None = None,
    *,
    rare: Mapping[str, int] | None = None,
) -> pd.DataFrame:
    """The M_ret-against-Q_pos curve of each run: :func:`threshold_metrics` over a Q_pos grid.

    Default grid: 0.64 to 0.998 in 180 steps of 0.002 (the Fig. 2 start is Q_pos ~ 0.63).
    Points a run never reaches have ``reached = False``.
    """
    if grid is None:
        grid = np.round(np.arange(0.640, 0.9981, 0.002), 6)
    return threshold_metrics(log, grid, rare=rare)


def _quantiles(x: np.ndarray) -> tuple[Any, Any, Any]:
    """(median, q25, q75) of ``x``, or Nones for an empty sample (never NaN)."""
    if x.size == 0:
        return None, None, None
    q25, q50, q75 = np.percentile(x, [25, 50, 75])
    return float(q50), float(q25), float(q75)


def summarize_thresholds(table: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Median (and IQR for M_ret) over the runs that reach each threshold.

    ``table`` is a threshold table (``simulate(cfg, tables=True).thresholds`` or
    :func:`run_comparison`); ``by`` are extra grouping columns (e.g. ``arm`` or config columns).
    One row per group and threshold: ``runs``, ``reached`` (count), then over the reaching runs
    the medians of ``step``, ``q_pos``, ``m_ret`` (with ``m_ret_q25``, ``m_ret_q75``) and of every
    ``nll_rise_<subset>``. Groups no run reaches carry ``None`` (never NaN, never imputed).
    """
    for col in ("threshold", "reached", "step", "q_pos", "m_ret"):
        if col not in table.columns:
            fail("table", f"a table without column {col!r}", "a threshold table")
    by = [c for c in by if c in table.columns]
    rises = [c for c in table.columns if c.startswith("nll_rise_")]
    rows = []
    for key, g in table.groupby([*by, "threshold"], sort=False):
        key = key if isinstance(key, tuple) else (key,)
        hit = g[g["reached"].to_numpy(bool)]
        row: dict[str, Any] = dict(zip([*by, "threshold"], key, strict=True))
        row["runs"] = len(g)
        row["reached"] = len(hit)
        row["step"] = _quantiles(hit["step"].to_numpy(float))[0]
        row["q_pos"] = _quantiles(hit["q_pos"].to_numpy(float))[0]
        row["m_ret"], row["m_ret_q25"], row["m_ret_q75"] = _quantiles(hit["m_ret"].to_numpy(float))
        for c in rises:
            row[c] = _quantiles(hit[c].to_numpy(float))[0]
        rows.append(row)
    return _none_for_missing(pd.DataFrame(rows))


def _none_for_missing(df: pd.DataFrame) -> pd.DataFrame:
    """Columns with missing values as objects holding ``None`` (JSON null), never NaN."""
    for c in df.columns:
        if df[c].isna().any():
            df[c] = pd.Series([None if pd.isna(v) else v for v in df[c]], dtype=object)
    return df
