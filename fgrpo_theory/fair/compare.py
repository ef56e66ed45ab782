"""One call for a matched comparison: arms, kernel equal-progress metrics, differences.

:func:`run_arms` expands a focal config into its arms (:mod:`.controls`) and simulates them with
the same seeds; :func:`run_comparison` returns the equal-progress metrics that the simulator's
kernel records (``SimConfig.thresholds``: the first step where Q_pos reaches each threshold, no
per-step logging) and is what ``fgrpo-theory simulate --controls m,h,progress`` calls;
:func:`paired_differences` turns its output into focal-minus-control differences with paired
bootstrap intervals (:mod:`.stats`) and :func:`summarize_comparison` into the CLI's summary.
The log-based :func:`~.progress.threshold_metrics` computes the same numbers from every-step
logs (the kernel's test oracle).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from .._validate import fail
from .controls import CONTROLS, arm_configs, check_controls, match_progress
from .progress import DEFAULT_THRESHOLDS, _none_for_missing, _quantiles, check_thresholds
from .stats import DEFAULT_SEEDS, paired_bootstrap_interval

__all__ = [
    "run_arms",
    "run_comparison",
    "paired_differences",
    "summarize_comparison",
    "subset_sizes",
]


def subset_sizes(cfg: Any) -> dict[str, int]:
    """Number of actions of each named subset of a config."""
    from ..sim.config import parse_index_set

    return {n: int(parse_index_set(s, cfg.K, f"subsets.{n}").size) for n, s in cfg.subsets.items()}


def _check_seeds(seeds: Any) -> int:
    if isinstance(seeds, bool) or not isinstance(seeds, int | np.integer) or seeds < 2:
        fail("seeds", seeds, "an integer >= 2 (a paired interval needs at least 2 seeds)")
    return int(seeds)


def _controls_of(cfg: Any, controls: Iterable[str] | str | None) -> tuple[str, ...]:
    """``controls`` if given, else the config's ``controls`` field, else every control."""
    if controls is None:
        controls = getattr(cfg, "controls", ()) or tuple(CONTROLS)
    return check_controls(controls)


def run_arms(
    cfg: Any,
    controls: Iterable[str] | str | None = None,
    *,
    seeds: int = DEFAULT_SEEDS,
    log_every: int = 1,
    log_steps: Iterable[int] | None = None,
    thresholds: Iterable[float] | None = None,
    tables: bool = False,
    q_tol: float = 2e-3,
    max_evals: int = 14,
    threads: int | None = None,
) -> Any:
    """Simulate the focal config and its controls; per-step log with ``arm`` columns.

    Every arm runs ``seeds`` seeds from the config's base seed (seed s of every arm shares random
    numbers). Columns: those of :func:`fgrpo_theory.sim.simulate`, plus ``arm`` (one of
    :data:`~.controls.ARM_NAMES`) and ``lr_multiplier`` (the factor on the focal lr). Logged
    every ``log_every`` steps, or at ``log_steps`` (which must include the last step).
    ``controls`` defaults to the config's ``controls`` field, else every control.
    ``thresholds`` (default: the config's) are tracked by the kernel; with ``tables=True`` the
    result is :class:`fgrpo_theory.sim.runner.SimTables` ``(log, thresholds)``, both with the arm
    columns. The progress search is in ``.attrs["progress_match"]`` (a dict) when requested.
    No config is simulated twice: the search evaluates its points with the arms' logging and
    thresholds, and every simulation is memoized by its full config hash (the vanilla arm is the
    search's first point, the progress control its best one); ``.attrs["simulations"]`` counts
    the simulations run.
    """
    from ..sim import config_hash, simulate
    from .controls import _check_focal

    _check_focal(cfg)
    ctl = _controls_of(cfg, controls)
    seeds = _check_seeds(seeds)
    thr = cfg.thresholds if thresholds is None else tuple(check_thresholds(thresholds))
    if log_steps is not None:
        steps = sorted({int(s) for s in log_steps} | {cfg.steps})
        cfg = cfg.replace(seeds=seeds, log_steps=tuple(steps), controls=(), thresholds=thr)
    else:
        cfg = cfg.replace(
            seeds=seeds, log_every=log_every, log_steps=None, controls=(), thresholds=thr
        )
    arms = arm_configs(cfg, ctl, progress=None) if "progress" not in ctl else None
    memo: dict[str, Any] = {}  # every simulation of this comparison, by its full config hash

    def run(c: Any) -> Any:
        key = config_hash(c)
        if key not in memo:
            memo[key] = simulate(c, threads=threads, tables=True)
        return memo[key]

    def as_arm(c: Any) -> Any:
        """A search point with the arms' logging and thresholds (so the vanilla arm and the
        matched control reuse the search's runs instead of training again)."""
        return c.replace(log_every=cfg.log_every, log_steps=cfg.log_steps,
                         thresholds=cfg.thresholds)  # fmt: skip

    focal = run(cfg)
    pm = None
    if "progress" in ctl:
        last = focal.log[focal.log["step"] == cfg.steps]
        pm = match_progress(
            cfg,
            q_tol=q_tol,
            max_evals=max_evals,
            focal_final=float(np.median(last["q_pos"].to_numpy())),
            simulate_fn=lambda c: run(as_arm(c)).log,
        )
        arms = arm_configs(cfg, ctl, progress=pm)
    logs, thrs = [], []
    for arm, mult, c in arms:
        res = run(c)
        logs.append(res.log.assign(arm=arm, lr_multiplier=mult))
        thrs.append(res.thresholds.assign(arm=arm, lr_multiplier=mult))
    log = pd.concat(logs, ignore_index=True)
    table = pd.concat(thrs, ignore_index=True)
    log.attrs["simulations"] = table.attrs["simulations"] = len(memo)
    if pm is not None:
        info = {
            "lr": pm.lr,
            "multiplier": pm.multiplier,
            "target": pm.target,
            "achieved": pm.achieved,
            "q_tol": pm.q_tol,
            "matched": pm.matched,
            "monotone": pm.monotone,
            "evaluations": [list(e) for e in pm.evaluations],
        }
        log.attrs["progress_match"] = info
        table.attrs["progress_match"] = info
    if tables:
        from ..sim.runner import SimTables

        return SimTables(log, table)
    return log


def run_comparison(
    cfg: Any,
    controls: Iterable[str] | str | None = None,
    *,
    seeds: int = DEFAULT_SEEDS,
    thresholds: Iterable[float] | None = None,
    q_tol: float = 2e-3,
    max_evals: int = 14,
    threads: int | None = None,
) -> pd.DataFrame:
    """Equal-progress metrics of a focal config against its matched controls (theory.md section 11).

    Runs :func:`run_arms` with only steps 0 and the last logged and the thresholds tracked in
    the kernel (``thresholds`` default: the config's, else :data:`~.progress.DEFAULT_THRESHOLDS`;
    ``controls`` default: the config's, else every control). One row per arm, run and threshold:
    the columns of the simulator's threshold table (``threshold``, ``reached``, ``step``,
    ``q_pos``, ``m_ret``, ``entropy``, ``mass_<s>``, ``nll_<s>``, ``nll_rise_<s>`` for every
    subset; NaN where not reached, never imputed; config columns), plus ``arm``,
    ``lr_multiplier``, ``final_q_pos`` and ``final_m_ret`` (at the last step).
    ``df.attrs["progress_match"]`` holds the progress search.
    """
    from .controls import _check_focal

    _check_focal(cfg)
    if thresholds is None:
        thresholds = cfg.thresholds or DEFAULT_THRESHOLDS
    t = tuple(check_thresholds(thresholds))
    res = run_arms(
        cfg, controls, seeds=seeds, log_steps=(0,), thresholds=t, tables=True, q_tol=q_tol,
        max_evals=max_evals, threads=threads,
    )  # fmt: skip
    log, table = res.log, res.thresholds
    last = log[log["step"] == log["steps"]]
    fin = last[["arm", "run", "q_pos", "m_ret"]].rename(
        columns={"q_pos": "final_q_pos", "m_ret": "final_m_ret"}
    )
    out = table.merge(fin, on=["arm", "run"], how="left", validate="many_to_one")
    out.attrs.update(table.attrs)
    return out


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
    if not isinstance(metrics, pd.DataFrame):
        fail("metrics", type(metrics).__name__, "the DataFrame that run_comparison returns")
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


def summarize_comparison(
    metrics: pd.DataFrame,
    *,
    metric: str = "m_ret",
    focal: str = "focal",
    level: float = 0.95,
    n_boot: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per arm: median and IQR of the final Q_pos and M_ret and of ``metric`` at each threshold,
    with the paired focal-minus-arm difference of medians and its bootstrap interval there.

    ``metrics`` is the output of :func:`run_comparison`. One row per arm and quantity
    (``quantity`` = ``final_q_pos``, ``final_m_ret`` or ``<metric>@<threshold>``): ``arm``,
    ``lr``, ``lr_multiplier``, ``seeds`` (runs with a value: those that reached the threshold),
    ``median``, ``q25``, ``q75``, and for threshold rows of control arms ``pairs``,
    ``focal_minus_arm``, ``lo``, ``hi`` (:func:`paired_differences`; ``None`` with fewer than 2
    pairs). Missing values are ``None`` (JSON null), never NaN.
    """
    for col in ("arm", "lr", "lr_multiplier", "final_q_pos", "final_m_ret", "threshold"):
        if col not in metrics.columns:
            fail("metrics", f"a table without column {col!r}", "the output of run_comparison")
    diff = paired_differences(
        metrics, metric=metric, focal=focal, level=level, n_boot=n_boot, seed=seed
    )
    arms = list(dict.fromkeys(metrics["arm"]))
    thresholds = sorted(metrics["threshold"].unique())
    f_hit = metrics[(metrics["arm"] == focal) & metrics["reached"].to_numpy(bool)]
    rows = []
    for arm in arms:
        a = metrics[metrics["arm"] == arm]
        base = {
            "arm": arm,
            "lr": float(a["lr"].iloc[0]),
            "lr_multiplier": float(a["lr_multiplier"].iloc[0]),
        }
        once = a[a["threshold"] == thresholds[0]]  # one row per run
        for q in ("final_q_pos", "final_m_ret"):
            x = once[q].to_numpy(float)
            med, q25, q75 = _quantiles(x)
            rows.append({**base, "quantity": q, "seeds": x.size, "median": med, "q25": q25,
                         "q75": q75})  # fmt: skip
        for t in thresholds:
            g = a[(a["threshold"] == t) & a["reached"].to_numpy(bool)]
            x = g[metric].to_numpy(float)
            med, q25, q75 = _quantiles(x)
            row = {**base, "quantity": f"{metric}@{t:g}", "seeds": x.size, "median": med,
                   "q25": q25, "q75": q75}  # fmt: skip
            if arm != focal:
                d = diff[(diff["control"] == arm) & (diff["threshold"] == t)] if len(diff) else diff
                fset = set(f_hit.loc[f_hit["threshold"] == t, "seed_index"])
                row["pairs"] = len(fset & set(g["seed_index"]))
                if len(d):
                    r = d.iloc[0]
                    row.update(focal_minus_arm=r["estimate"], lo=r["lo"], hi=r["hi"])
            rows.append(row)
    out = pd.DataFrame(rows)
    for c in ("pairs", "focal_minus_arm", "lo", "hi"):
        if c not in out.columns:
            out[c] = None
    out = _none_for_missing(out)
    out["pairs"] = pd.Series(
        [None if v is None or pd.isna(v) else int(v) for v in out["pairs"]], dtype=object
    )
    return out
