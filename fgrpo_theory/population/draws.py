"""Population experiments over draws of the declared distribution: two-level results.

A population result is a statement about the *distribution* a population is drawn from, not about
one draw: the experiment trains S seeds on each of D draws (``population_seed`` = s0, s0 + 1, ...,
every other field of the config kept), matches every control *per draw*, and summarizes with
medians over draws x seeds, two-level paired bootstrap intervals
(:func:`fgrpo_theory.fair.two_level_interval`: draws, then seeds, the same indices for both arms),
the per-draw medians, and a flag where seed outcomes are bimodal (Sarle's coefficient > 5/9: a
progress match is then ill-conditioned).

- :func:`map_draws` runs a per-draw function on every draw (in worker processes if asked; each
  draw is deterministic, so the result does not depend on the number of workers);
- :func:`compare_arms` trains arms (config changes, e.g. a scheme, a learning-rate factor, N at
  fixed B x N) on one draw and matches each against the reference config progress-matched on
  train pass@1 (:func:`fgrpo_theory.fair.match_factor` over a factor on both learning rates,
  started from a fixed grid of the reference, so a match does not depend on the other arms);
- :func:`summarize_arms` and :func:`variance_components` read the tidy result.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._validate import check_integer, fail
from ..fair.twolevel import ARM_METRICS, summarize_arms, variance_components  # re-exported
from .config import PopulationConfig
from .generate import generate_population

__all__ = [
    "DEFAULT_DRAWS",
    "DEFAULT_SEEDS_PER_DRAW",
    "LR_GRID",
    "Arm",
    "arm",
    "population_seeds",
    "map_configs",
    "map_draws",
    "compare_arms",
    "compare_arms_on_draws",
    "compare_arms_task",
    "summarize_arms",
    "variance_components",
]

#: Draws and seeds per draw of a population experiment (D >= 16, S >= 4; the measured
#: variance split that supports them is in docs/populations.md).
DEFAULT_DRAWS = 16
DEFAULT_SEEDS_PER_DRAW = 4
#: Learning-rate factors of the reference evaluated (lazily, and only as needed) to bracket a
#: progress target; every search starts from the log-linear interpolation on this grid.
LR_GRID = (1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0, 2.0, 4.0)
#: Metrics kept per seed (last step, both splits).
METRICS = ARM_METRICS


@dataclass(frozen=True)
class Arm:
    """One arm: config field changes against the reference and a factor on both learning rates.

    ``family`` groups the arms of one remedy (e.g. the three coefficients of ``focal``) and
    ``coef`` is the coefficient's label in that family.
    """

    name: str
    changes: tuple[tuple[str, Any], ...] = ()
    lr_factor: float = 1.0
    family: str = ""
    coef: str = ""

    def config(self, base: PopulationConfig) -> PopulationConfig:
        f = float(self.lr_factor)
        return base.replace(
            **dict(self.changes), lr_shared=base.lr_shared * f, lr_prompt=base.lr_prompt * f
        )


def arm(name: str, *, lr_factor: float = 1.0, family: str = "", coef: str = "", **changes) -> Arm:
    """An :class:`Arm` from keyword changes (``arm("focal 1", scheme="focal:gamma=1")``)."""
    return Arm(name, tuple(sorted(changes.items())), float(lr_factor), family or name, coef)


def population_seeds(first: int = 0, count: int = DEFAULT_DRAWS) -> tuple[int, ...]:
    """``first, first + 1, ..., first + count - 1`` (count >= 2: an interval needs two draws)."""
    first = check_integer("population_seeds", first, 0, 2**62)
    count = check_integer("draws", count, 2, 100_000)
    return tuple(range(first, first + count))


def _check_seeds(seeds: Sequence[int]) -> tuple[int, ...]:
    if isinstance(seeds, str | bytes) or not isinstance(seeds, Sequence):
        fail("population_seeds", seeds, "a list of integers >= 0")
    out = tuple(check_integer("population_seeds", s, 0, 2**62) for s in seeds)
    if len(out) < 2 or len(set(out)) != len(out):
        fail("population_seeds", list(seeds), "at least 2 distinct population seeds")
    return out


def _call(args: tuple) -> pd.DataFrame:
    func, cfg, kw = args
    return func(cfg, **kw)


def map_configs(
    func: Callable[..., pd.DataFrame],
    configs: Sequence[PopulationConfig],
    *,
    workers: int = 1,
    **kw: Any,
) -> list[pd.DataFrame]:
    """``[func(cfg, **kw) for cfg in configs]``, in ``workers`` processes if > 1 (``func`` must
    be a top-level function; tasks are handed out one at a time, results kept in order). With
    more tasks than workers the first task runs alone: on an empty kernel cache it compiles the
    kernels once and caches them, and the other workers load them instead of each compiling the
    same kernels at the same time (measured: 28 s of CPU per worker for the population kernel);
    with a warm cache that costs one task's time on one worker."""
    workers = check_integer("workers", workers, 1, 256)
    tasks = [(func, c, kw) for c in configs]
    if workers == 1 or len(tasks) <= 1:
        return [_call(t) for t in tasks]
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    ctx = mp.get_context("spawn")  # no fork of a process that may hold Numba threads
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx) as ex:
        if len(tasks) <= workers:  # every task starts at once: nothing to wait for
            return list(ex.map(_call, tasks))
        first = ex.submit(_call, tasks[0]).result()
        return [first, *ex.map(_call, tasks[1:])]


def map_draws(
    func: Callable[..., pd.DataFrame],
    base: PopulationConfig,
    population_seeds: Sequence[int],
    *,
    workers: int = 1,
    **kw: Any,
) -> pd.DataFrame:
    """``func(base.replace(population_seed=s), **kw)`` for every seed ``s``, concatenated in seed
    order with a ``population_seed`` column. ``workers`` > 1 runs draws in that many processes
    (``func`` must be a top-level function); the rows are the same for any ``workers``."""
    if not isinstance(base, PopulationConfig):
        fail("config", base, "a PopulationConfig")
    seeds = _check_seeds(population_seeds)
    frames = map_configs(
        func, [base.replace(population_seed=s) for s in seeds], workers=workers, **kw
    )
    out = [df.assign(population_seed=s) for s, df in zip(seeds, frames, strict=True)]
    return pd.concat(out, ignore_index=True)


@dataclass
class _Runs:
    """The final metrics of every config trained on one draw, memoized by the full config hash
    (:func:`~.config.population_config_hash`): an arm that coincides with a point of the
    progress search (GRPO itself at factor 1, a low-lr arm on the grid) is trained once.
    ``trained`` counts the simulations actually run."""

    pop: Any
    runs: dict[str, dict] = field(default_factory=dict)
    trained: int = 0

    def get(self, cfg: PopulationConfig, *, overflow_ok: bool = False) -> dict:
        from .config import population_config_hash
        from .runner import final_metrics

        key = population_config_hash(cfg)
        if key not in self.runs:
            self.trained += 1
            try:
                self.runs[key] = final_metrics(cfg, population=self.pop)
            except ValueError:  # the logits overflow at this step size: no metrics
                if not overflow_ok:
                    raise
                self.runs[key] = {}
        m = self.runs[key]
        if not m and not overflow_ok:  # memoized from a search point that overflowed
            final_metrics(cfg, population=self.pop)  # raises the same ValueError
        return m


@dataclass
class _Progress:
    """Progress of the reference at a learning-rate factor on one draw (runs memoized)."""

    base: PopulationConfig
    memo: _Runs

    def config(self, c: float) -> PopulationConfig:
        return self.base.replace(
            lr_shared=self.base.lr_shared * c, lr_prompt=self.base.lr_prompt * c
        )

    def metrics(self, c: float) -> dict:
        # an overflow at this step size gives no progress value ({}), not an error
        return self.memo.get(self.config(c), overflow_ok=True)

    def __call__(self, c: float) -> float:
        m = self.metrics(c)
        # an overflowing step size counts as "more than any target" (it is past the useful range)
        return float(np.median(m["train"]["pass_at_1"])) if m else math.inf


def _start(prog: _Progress, target: float) -> tuple[float, float]:
    """Bracket ``target`` on :data:`LR_GRID` (walking from 1) and interpolate log c; the start
    of the search and the bracketing factor (the grid's step where no bracket exists)."""
    grid = list(LR_GRID)
    i = grid.index(1.0)
    q = prog(grid[i])
    step = -1 if q > target else 1
    while 0 <= i + step < len(grid):
        j = i + step
        qj = prog(grid[j])
        if (qj > target) != (q > target):
            lo, hi = sorted(((grid[i], q), (grid[j], qj)))
            if not math.isfinite(hi[1]) or not math.isfinite(lo[1]):
                return (lo[0] if math.isfinite(lo[1]) else hi[0]), 1.25
            w = (target - lo[1]) / (hi[1] - lo[1]) if hi[1] != lo[1] else 0.5
            return math.exp(math.log(lo[0]) + w * (math.log(hi[0]) - math.log(lo[0]))), 1.25
        i, q = j, qj
    return grid[i], 2.0


def compare_arms(
    base: PopulationConfig,
    arms: Sequence[Arm],
    *,
    match: bool = True,
    tol: float = 5e-4,
    max_evals: int = 8,
    label: str = "",
    verbose: bool = False,
) -> pd.DataFrame:
    """Every arm on the draw of ``base`` and its progress-matched reference control.

    The reference is ``base`` itself (for the arena: GRPO). For each arm: its seeds' last-step
    metrics (``role = "arm"``); with ``match``, the reference at the learning-rate factor c whose
    median final train pass@1 over the seeds equals the arm's (``role = "control"``,
    :func:`fgrpo_theory.fair.match_factor` from the interpolation on :data:`LR_GRID`, bracketing
    step 1.25, ``tol`` on the median, ``max_evals`` evaluations). Columns: ``arm``, ``family``,
    ``coef``, ``role``, ``seed_index``, ``split``, :data:`METRICS`, ``lr_factor``, ``target``,
    ``achieved``, ``match_error``, ``matched``, ``monotone``, ``evaluations``.
    Every config is trained once on the draw (memoized by its full hash: GRPO's own arm is the
    search's point at factor 1); ``.attrs["simulations"]`` counts the runs.
    """
    from ..fair.controls import match_factor

    pop = generate_population(base)
    memo = _Runs(pop)
    prog = _Progress(base, memo)
    rows = []

    def emit(a: Arm, role: str, m: dict, c: float, info: dict) -> None:
        for split, vals in m.items():
            d = {k: vals[k] for k in METRICS if k in vals}
            d.update(arm=a.name, family=a.family, coef=a.coef, role=role, split=split,
                     seed_index=np.arange(len(vals["pass_at_1"])), lr_factor=c, **info)  # fmt: skip
            rows.append(pd.DataFrame(d))

    for i, a in enumerate(arms):
        if verbose:
            print(f"[{label}] draw {base.population_seed}: {a.name} ({i + 1}/{len(arms)})",
                  file=sys.stderr, flush=True)  # fmt: skip
        m = memo.get(a.config(base))
        target = float(np.median(m["train"]["pass_at_1"]))
        none = dict(target=target, achieved=np.nan, match_error=np.nan, matched=False,
                    monotone=True, evaluations=0)  # fmt: skip
        emit(a, "arm", m, a.lr_factor, none)
        if not match:
            continue
        c0, step = _start(prog, target)
        res = match_factor(prog, target, start=c0, tol=tol, max_evals=max_evals, factor=step)
        info = dict(target=target, achieved=res.achieved, match_error=res.error,
                    matched=bool(res.matched), monotone=bool(res.monotone),
                    evaluations=len(res.evaluations))  # fmt: skip
        ctl = prog.metrics(res.lr)
        if not ctl:
            ctl = memo.get(base)  # unreachable: overflow at every point
        emit(a, "control", ctl, res.lr, info)
    out = pd.concat(rows, ignore_index=True)
    out.attrs["simulations"] = memo.trained
    return out


def compare_arms_task(task: tuple, kw: dict) -> pd.DataFrame:
    """``compare_arms(config, arms, label=label, **kw)`` for ``task = (config, arms, label)``
    (a top-level function for :func:`map_configs` over several settings and draws)."""
    cfg, arms, label = task
    return compare_arms(cfg, arms, label=label, **kw)


def compare_arms_on_draws(
    base: PopulationConfig,
    arms: Sequence[Arm],
    population_seeds: Sequence[int],
    *,
    workers: int = 1,
    **kw: Any,
) -> pd.DataFrame:
    """:func:`compare_arms` on every draw (:func:`map_draws`); rows carry ``population_seed``."""
    names = [a.name for a in arms]
    if len(set(names)) != len(names):
        fail("arms", names, "distinct arm names")
    return map_draws(compare_arms, base, population_seeds, workers=workers, arms=tuple(arms), **kw)
