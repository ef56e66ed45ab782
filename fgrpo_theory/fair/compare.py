"""One call for a matched comparison: arms, every-step logs, equal-progress metrics, differences.

:func:`run_arms` expands a focal config into its arms (:mod:`.controls`) and simulates them with
the same seeds, every step logged; :func:`run_comparison` adds the equal-progress metrics
(:mod:`.progress`) and is what ``fgrpo-theory simulate --controls m,h,progress`` calls;
:func:`paired_differences` turns its output into focal-minus-control differences with paired
bootstrap intervals (:mod:`.stats`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from .._validate import fail
from .controls import arm_configs, check_controls, match_progress
from .progress import DEFAULT_THRESHOLDS, check_thresholds, threshold_metrics
from .stats import DEFAULT_SEEDS, paired_bootstrap_interval

__all__ = ["run_arms", "run_comparison", "paired_differences", "subset_sizes"]


def subset_sizes(cfg: Any) -> dict[str, int]:
    """Number of actions of each named subset of a config."""
    from ..sim.config import parse_index_set

    return {n: int(parse_index_set(s, cfg.K, f"subsets.{n}").size) for n, s in cfg.subsets.items()}


def _check_seeds(seeds: Any) -> int:
    if isinstance(seeds, bool) or not isinstance(seeds, int | np.integer) or seeds < 2:
        fail("seeds", seeds, "an integer >= 2 (a paired interval needs at least 2 seeds)")
    return int(seeds)


def run_arms(
    cfg: Any,
    controls: Iterable[str] | str = ("m", "h", "progress"),
    *,
    seeds: int = DEFAULT_SEEDS,
    log_every: int = 1,
    q_tol: float = 2e-3,
    max_evals: int = 14,
    threads: int | None = None,
) -> pd.DataFrame:
    """Simulate the focal config and its controls; long per-step log with ``arm`` columns.

    Every arm runs ``seeds`` seeds from the config's base seed (seed s of every arm shares random
    numbers). Columns: those of :func:`fgrpo_theory.sim.simulate`, plus ``arm`` (one of
    :data:`~.controls.ARM_NAMES`) and ``lr_multiplier`` (the factor on the focal lr). The
    progress search is in ``df.attrs["progress_match"]`` (a dict) when requested.
    """
    from ..sim import simulate

    ctl = check_controls(controls)
    cfg = cfg.replace(seeds=_check_seeds(seeds), log_every=log_every, log_steps=None)
    frames = []
    focal = simulate(cfg, threads=threads)
    pm = None
    if "progress" in ctl:
        last = focal[focal["step"] == cfg.steps]
        pm = match_progress(
            cfg,
            q_tol=q_tol,
            max_evals=max_evals,
            focal_final=float(np.median(last["q_pos"].to_numpy())),
            simulate_fn=lambda c: simulate(c, threads=threads),
        )
    for arm, mult, c in arm_configs(cfg, ctl, progress=pm):
        df = focal if arm == "focal" else simulate(c, threads=threads)
        df = df.assign(arm=arm, lr_multiplier=mult)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    if pm is not None:
        out.attrs["progress_match"] = {
            "lr": pm.lr,
            "multiplier": pm.multiplier,
            "target": pm.target,
            "achieved": pm.achieved,
            "q_tol": pm.q_tol,
            "matched": pm.matched,
            "monotone": pm.monotone,
            "evaluations": [list(e) for e in pm.evaluations],
        }
    return out


def run_comparison(
    cfg: Any,
    controls: Iterable[str] | str = ("m", "h", "progress"),
    *,
    seeds: int = DEFAULT_SEEDS,
    thresholds: Iterable[float] = DEFAULT_THRESHOLDS,
    rare: Mapping[str, int] | None = None,
    q_tol: float = 2e-3,
    max_evals: int = 14,
    threads: int | None = None,
) -> pd.DataFrame:
    """Equal-progress metrics of a focal config against its matched controls.

    Runs :func:`run_arms` (every step logged) and returns :func:`~.progress.threshold_metrics`:
    one row per arm, seed and threshold, with ``arm``, ``lr``, ``lr_multiplier``, ``N``,
    ``seed_index``, ``threshold``, ``reached``, ``step``, ``q_pos``, ``m_ret``, the subset
    columns (``rare`` defaults to every subset of the config), plus ``final_q_pos`` and
    ``final_m_ret`` at the last step. ``df.attrs["progress_match"]`` holds the progress search.
    """
    t = check_thresholds(thresholds)
    if rare is None:
        rare = subset_sizes(cfg) or None
    log = run_arms(cfg, controls, seeds=seeds, q_tol=q_tol, max_evals=max_evals, threads=threads)
    res = threshold_metrics(log, t, rare=rare)
    last = log[log["step"] == log["step"].max()]
    fin = last[["arm", "seed_index", "q_pos", "m_ret"]].rename(
        columns={"q_pos": "final_q_pos", "m_ret": "final_m_ret"}
    )
    res = res.merge(fin, on=["arm", "seed_index"], how="left", validate="many_to_one")
    res.attrs.update(log.attrs)
    return res


def paired_differences(
    metrics: pd.DataFrame,
    *,
    metric: str = "m_ret",
    focal: str = "focal",
    statistic: str = "median",
    level: float = 0.95,
    n_boot: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """Focal-minus-control differences of ``metric`` at equal Q_pos, with paired intervals.

    For every control arm, N and threshold: seeds where *both* arms reached the threshold are
    paired by ``seed_index``; the output has ``estimate, lo, hi`` (paired bootstrap of
    ``statistic``), ``pairs`` and the medians of each arm. Groups with fewer than 2 pairs get
    ``pairs < 2`` and are left out (never NaN).
    """
    for col in ("arm", "seed_index", "threshold", "reached", metric):
        if col not in metrics.columns:
            fail("metrics", f"a table without column {col!r}", "the output of run_comparison")
    by = [c for c in ("N", "threshold") if c in metrics.columns]
    rows = []
    f_all = metrics[metrics["arm"] == focal]
    for arm in [a for a in metrics["arm"].unique() if a != focal]:
        c_all = metrics[metrics["arm"] == arm]
        for key, fg in f_all.groupby(by, sort=True):
            key = key if isinstance(key, tuple) else (key,)
            sel = np.ones(len(c_all), bool)
            for k, v in zip(by, key, strict=True):
                sel &= (c_all[k] == v).to_numpy()
            cg = c_all[sel]
            m = fg[fg["reached"]].merge(
                cg[cg["reached"]], on="seed_index", suffixes=("_f", "_c"), validate="one_to_one"
            )
            row = dict(zip(by, key, strict=True))
            row.update(control=arm, pairs=len(m), metric=metric)
            if len(m) >= 2:
                est, lo, hi = paired_bootstrap_interval(
                    m[f"{metric}_f"], m[f"{metric}_c"],
                    statistic=statistic, level=level, n_boot=n_boot, seed=seed,
                )  # fmt: skip
                row.update(
                    estimate=est,
                    lo=lo,
                    hi=hi,
                    focal_median=float(np.median(m[f"{metric}_f"])),
                    control_median=float(np.median(m[f"{metric}_c"])),
                )
                rows.append(row)
    return pd.DataFrame(rows)
