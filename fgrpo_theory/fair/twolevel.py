"""Two-level uncertainty of a population result: population draws, then training seeds.

A population experiment draws D populations from its declared distribution (population seeds)
and trains S seeds on each. A statement about the *distribution* (not about one draw) must carry
both sources of variation: one draw can sit far in the tail (a default draw once ranked near the
3rd percentile of its own distribution). :func:`two_level_interval` resamples draws with
replacement, then seeds with replacement inside each resampled draw, applying the same indices
to both arms (the arms of a draw share its population and, seed by seed, the random streams), and
returns the percentile interval of ``statistic(a) - statistic(b)`` over the pooled cells.
:func:`per_draw_differences` gives every draw's own estimate (what a figure shows), and
:func:`bimodality_coefficient` flags seed outcomes that split into two clusters (a progress match
is then ill-conditioned: a control's lr moves the fraction of seeds in each cluster).
:func:`metric_grid` reads the draws x seeds array of a metric off a table of runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validate import fail
from .stats import STATISTICS

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "two_level_interval",
    "per_draw_differences",
    "bimodality_coefficient",
    "BIMODAL_THRESHOLD",
    "summarize_arms",
    "variance_components",
    "metric_grid",
]

#: Sarle's bimodality coefficient of a uniform distribution; larger values suggest bimodality.
BIMODAL_THRESHOLD = 5.0 / 9.0

#: Largest bootstrap (n_boot x draws x seeds) materialized at once.
_MAX_BOOT_CELLS = 50_000_000


def _grid(name: str, x: Any) -> np.ndarray:
    if isinstance(x, str | bytes):
        fail(name, x, "a 2-D array of values, draws x seeds")
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        fail(name, repr(x)[:40], "a 2-D array of numbers, draws x seeds")
    if a.ndim != 2:
        fail(name, f"an array of shape {a.shape}", "a 2-D array of values, draws x seeds")
    if a.shape[0] < 2 or a.shape[1] < 1:
        fail(name, f"shape {a.shape}", "at least 2 population draws and 1 seed per draw")
    if not np.isfinite(a).all():
        fail(name, "a non-finite value", "finite values (no NaN or inf)")
    return a


def _check(a: Any, b: Any, statistic: str) -> tuple[np.ndarray, np.ndarray, Any]:
    x = _grid("a", a)
    y = _grid("b", b)
    if x.shape != y.shape:
        fail("b", f"shape {y.shape}", f"the shape of a {x.shape}: draws and seeds are paired")
    if statistic not in STATISTICS:
        fail("statistic", statistic, "one of " + ", ".join(STATISTICS))
    return x, y, (np.median if statistic == "median" else np.mean)


def per_draw_differences(a: Any, b: Any, *, statistic: str = "median") -> np.ndarray:
    """``statistic(a[d]) - statistic(b[d])`` over each draw's seeds, one value per draw."""
    x, y, fn = _check(a, b, statistic)
    return fn(x, axis=1) - fn(y, axis=1)


def two_level_interval(
    a: Any,
    b: Any,
    *,
    statistic: str = "median",
    level: float = 0.95,
    n_boot: int = 4_000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Two-level paired percentile-bootstrap interval of ``statistic(a) - statistic(b)``.

    Parameters
    ----------
    a, b : array_like, shape (D, S)
        Values of two arms on D >= 2 population draws x S >= 1 seeds; ``a[d, s]`` and
        ``b[d, s]`` are the same draw and seed.
    statistic : {"median", "mean"}
        Applied to the pooled D x S cells of each arm.
    level : float
        Two-sided coverage in (0, 1).
    n_boot : int
        Replicates, >= 100.
    seed : int
        Seed of the resampling (NumPy PCG64): the same seed gives the same interval.

    Returns
    -------
    (estimate, lo, hi) : tuple of float
        The pooled estimate and the percentile interval. Each replicate draws D draw indices
        with replacement, then S seed indices with replacement inside each drawn draw, and
        applies them to both arms.
    """
    x, y, fn = _check(a, b, statistic)
    if isinstance(level, bool) or not (isinstance(level, int | float) and 0.0 < level < 1.0):
        fail("level", level, "in (0, 1)")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int | np.integer) or n_boot < 100:
        fail("n_boot", n_boot, "an integer >= 100")
    D, S = x.shape
    if n_boot * D * S > _MAX_BOOT_CELLS:
        fail("n_boot", n_boot, f"<= {_MAX_BOOT_CELLS // (D * S)} for {D} x {S} cells")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        fail("seed", seed, "an integer >= 0")
    est = float(fn(x) - fn(y))
    rng = np.random.default_rng(int(seed))
    draws = rng.integers(0, D, size=(int(n_boot), D))
    seeds = rng.integers(0, S, size=(int(n_boot), D, S))
    xa = x[draws[:, :, None], seeds].reshape(int(n_boot), D * S)
    ya = y[draws[:, :, None], seeds].reshape(int(n_boot), D * S)
    reps = fn(xa, axis=1) - fn(ya, axis=1)
    alpha = (1.0 - float(level)) / 2.0
    lo, hi = np.quantile(reps, [alpha, 1.0 - alpha])
    return est, float(lo), float(hi)


def bimodality_coefficient(x: Any) -> float:
    """Sarle's bimodality coefficient (g^2 + 1) / (k + 3 (n - 1)^2 / ((n - 2)(n - 3))) of a
    sample (g the sample skewness, k the sample excess kurtosis, both bias-corrected; SAS
    convention). Values above :data:`BIMODAL_THRESHOLD` = 5/9 (the uniform's) suggest two
    clusters. Needs n >= 4 finite values; a sample with no spread returns 0."""
    try:
        v = np.asarray(x, dtype=float).ravel()
    except (TypeError, ValueError):
        fail("x", repr(x)[:40], "an array of numbers")
    n = v.size
    if n < 4:
        fail("x", f"{n} value(s)", "at least 4 values")
    if not np.isfinite(v).all():
        fail("x", "a non-finite value", "finite values (no NaN or inf)")
    d = v - v.mean()
    m2 = float(np.mean(d * d))
    if m2 <= 1e-300:
        return 0.0
    m3 = float(np.mean(d**3))
    m4 = float(np.mean(d**4))
    g1 = m3 / m2**1.5
    g2 = m4 / m2**2 - 3.0
    G1 = g1 * np.sqrt(n * (n - 1)) / (n - 2)
    G2 = (n - 1) / ((n - 2) * (n - 3)) * ((n + 1) * g2 + 6)
    return float((G1 * G1 + 1.0) / (G2 + 3.0 * (n - 1) ** 2 / ((n - 2) * (n - 3))))


def metric_grid(runs: pd.DataFrame, metric: str) -> np.ndarray:
    """The ``[draws, seeds]`` array of column ``metric`` of a table of runs (one row per
    population draw ``population_seed`` and training seed ``seed_index``): row i is the i-th
    draw in ascending ``population_seed``, its seeds in ascending ``seed_index``; the input of
    :func:`two_level_interval`, :func:`per_draw_differences` and :func:`variance_components`.
    Every draw must have the same number of runs."""
    n = runs.groupby("population_seed").size()
    if n.nunique() > 1:
        fail("runs", f"draws with {n.min()} to {n.max()} runs",
             "a table with the same number of runs (seeds) for every population_seed")  # fmt: skip
    d = runs.sort_values(["population_seed", "seed_index"])
    D = d["population_seed"].nunique()
    return d[metric].to_numpy(float).reshape(D, -1)


def _bimodal(x: np.ndarray) -> bool:
    return x.size >= 4 and bimodality_coefficient(x) > BIMODAL_THRESHOLD


#: Metrics :func:`summarize_arms` reads by default (the population model's last-step columns).
ARM_METRICS = (
    "pass_at_1",
    "pass_at_16",
    "pass_at_256",
    "coverage_at_256",
    "rare_nll_rise",
    "entropy",
)


def summarize_arms(
    df: pd.DataFrame,
    metrics: Sequence[str] = ARM_METRICS,
    *,
    split: str = "test",
    scale: dict[str, float] | None = None,
    n_boot: int = 4_000,
) -> pd.DataFrame:
    """Arm minus its matched control per arm and metric, over draws x seeds.

    Columns: ``arm``, ``family``, ``coef``, ``metric``, ``arm_median``, ``control_median``,
    ``median`` (difference of the pooled medians), ``lo``, ``hi`` (95 % two-level paired
    bootstrap), ``draw_diffs`` (per-draw difference of medians, draw order), ``run_diffs`` (arm
    minus control of every run, i.e. every (draw, seed) pair, draw-major: seed 0..S-1 of the
    first draw, then the next draw), ``draws_up`` (draws with a positive difference), ``draws``,
    ``seeds``, ``bimodal_draws`` (draws whose arm or control train pass@1 over seeds has Sarle's
    coefficient > 5/9), ``bimodal_pooled`` (the same test on every seed's deviation from its
    draw's median, both arms), and the largest absolute ``match_error``. ``scale`` multiplies a
    metric (100 for pass@k in points).
    """
    import pandas as pd

    scale = {} if scale is None else scale
    rows = []
    for name in dict.fromkeys(df["arm"]):
        e = df[df["arm"] == name]
        a_tr = e[(e.role == "arm") & (e.split == "train")]
        c_tr = e[(e.role == "control") & (e.split == "train")]
        if len(c_tr) == 0:
            continue
        ga, gc = metric_grid(a_tr, "pass_at_1"), metric_grid(c_tr, "pass_at_1")
        bim = sum(_bimodal(ga[i]) or _bimodal(gc[i]) for i in range(len(ga)))
        resid = np.concatenate([(ga - np.median(ga, 1, keepdims=True)).ravel(),
                                (gc - np.median(gc, 1, keepdims=True)).ravel()])  # fmt: skip
        pooled = _bimodal(resid)
        err = float(np.nanmax(np.abs(c_tr["match_error"].to_numpy(float))))
        unmatched = int((~c_tr.groupby("population_seed")["matched"].first()).sum())
        for m in metrics:
            s = float(scale.get(m, 1.0))
            A = metric_grid(e[(e.role == "arm") & (e.split == split)], m) * s
            C = metric_grid(e[(e.role == "control") & (e.split == split)], m) * s
            if not (np.isfinite(A).all() and np.isfinite(C).all()):
                continue
            est, lo, hi = two_level_interval(A, C, n_boot=n_boot)
            dd = per_draw_differences(A, C)
            rows.append(dict(arm=name, family=e.family.iloc[0], coef=e.coef.iloc[0], metric=m,
                             arm_median=float(np.median(A)), control_median=float(np.median(C)),
                             median=est, lo=lo, hi=hi, draw_diffs=dd, run_diffs=(A - C).ravel(),
                             draws_up=int((dd > 0).sum()), draws=A.shape[0], seeds=A.shape[1],
                             bimodal_draws=int(bim),
                             bimodal_pooled=bool(pooled), max_match_error=err,
                             unmatched_draws=unmatched))  # fmt: skip
    return pd.DataFrame(rows)


def variance_components(a: Any, b: Any | None = None) -> dict[str, float]:
    """Between-draw and within-draw variance of a [draws, seeds] grid (of ``a - b`` if given).

    One-way random-effects ANOVA (method of moments): ``within`` = mean over draws of the seed
    variance, ``between`` = max(0, var of draw means - within / S); ``var_mean_D_S`` = between
    / D + within / (D S), the variance of the grand mean; ``share_between`` = between / (between
    + within / S) (the share of a draw mean's variance due to the draw).
    """
    x = np.asarray(a, dtype=float) - (0.0 if b is None else np.asarray(b, dtype=float))
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        fail("a", f"shape {x.shape}", "a [draws >= 2, seeds >= 2] grid")
    D, S = x.shape
    within = float(x.var(axis=1, ddof=1).mean())
    between = max(0.0, float(x.mean(axis=1).var(ddof=1)) - within / S)
    tot = between + within / S
    return dict(draws=D, seeds=S, between=between, within=within,
                var_mean_D_S=between / D + within / (D * S),
                share_between=between / tot if tot > 0 else float("nan"))  # fmt: skip
