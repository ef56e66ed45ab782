"""Progress-matched vanilla control on a population (theory.md section 11 on a dataset).

Under Adam a constant factor on the loss is normalized away, so the a-priori control of
:func:`fgrpo_theory.advantages.effective_lr_multiplier` (vanilla at lr x c) is no longer matched:
it slows vanilla down while focal weighting does not slow Adam. The fair control then is the
progress-matched one: vanilla at the learning-rate factor c whose median final train pass@1 over
the seeds equals the focal run's (root finding over log c, the search of
:func:`fgrpo_theory.fair.match_factor`). Progress is the median over seeds of the final mean
pass@1 over the train prompts: what training optimizes, the analogue of Q_pos on one prompt.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from .._validate import fail
from ..fair.controls import ProgressMatch, match_factor
from .config import PopulationConfig
from .generate import Population, generate_population
from .runner import final_metrics

__all__ = ["PROGRESS_METRIC", "final_median", "match_progress_population"]

#: What "progress" means on a population: mean pass@1 over the train prompts (what training
#: optimizes; the analogue of Q_pos on one prompt).
PROGRESS_METRIC = ("pass_at_1", "train")


def final_median(df: pd.DataFrame, metric: str = "pass_at_1", split: str = "train") -> float:
    """Median over seeds of ``metric`` at the last logged step (bucket "all", ``split``)."""
    d = df[(df["step"] == df["step"].max()) & (df["split"] == split) & (df["bucket"] == "all")]
    if len(d) == 0:
        fail("split", split, "a split present in the table (train or test)")
    return float(np.median(d[metric].to_numpy()))


def match_progress_population(
    cfg: PopulationConfig,
    *,
    tol: float = 5e-4,
    max_evals: int = 14,
    population: Population | None = None,
    focal: pd.DataFrame | None = None,
    vanilla: pd.DataFrame | None = None,
    threads: int | None = 1,
    simulate_fn: Callable[[PopulationConfig], pd.DataFrame] | None = None,
) -> ProgressMatch:
    """Learning-rate factor c of the vanilla control whose final train pass@1 equals focal's.

    ``cfg`` is the focal config (gamma > 0). Each evaluation trains vanilla (gamma = 0) with both
    learning rates times c over the config's seeds and takes the median final train pass@1
    (:func:`~.runner.final_metrics`: the last step's metrics without the tidy table, the same
    numbers); ``tol`` (default 5e-4, 0.05 points: below the seed-to-seed spread of final pass@1
    at 16 seeds on the default population, and above float noise) bounds the achieved mismatch.
    ``focal``: the focal run's table if already computed; ``vanilla``: likewise vanilla's at
    c = 1 (``cfg`` with gamma 0), the search's first point, which is then not simulated again
    (both are read as given: tables of those configs, any logging). ``threads``: Numba threads
    of each point (default 1, as :func:`~.runner.final_metrics`: the sweeps run searches in
    pools of worker processes; None: all), the same numbers for any value. ``simulate_fn``:
    each point's table from ``simulate_fn(config)`` instead (a tidy table of that config, any
    logging, read with :func:`final_median`; the same numbers), so a caller that keeps the
    tables reuses the matched point's run instead of training it again; ``population`` and
    ``threads`` are then the caller's to apply (they are not read).
    The result's ``lr`` and ``multiplier`` are both the factor c (the population has two
    learning rates).
    """
    if not isinstance(cfg, PopulationConfig):
        fail("cfg", cfg, "a PopulationConfig")
    if cfg.gamma == 0:
        fail("gamma", cfg.gamma, "> 0 (a vanilla config has no focal run to match)")
    pop = population
    if pop is None and simulate_fn is None:  # (simulate_fn's tables need none here)
        pop = generate_population(cfg)
    train, metric = PROGRESS_METRIC[1], PROGRESS_METRIC[0]

    def median_final(c: PopulationConfig) -> float:
        if simulate_fn is not None:
            return final_median(simulate_fn(c), metric, train)
        return float(np.median(final_metrics(c, population=pop, threads=threads)[train][metric]))

    target = median_final(cfg) if focal is None else final_median(focal, *PROGRESS_METRIC)
    known = {} if vanilla is None else {1.0: final_median(vanilla, *PROGRESS_METRIC)}

    def progress(c: float) -> float:
        if c in known:
            return known[c]
        return median_final(cfg.replace(gamma=0.0, lr_shared=cfg.lr_shared * c,
                                        lr_prompt=cfg.lr_prompt * c))  # fmt: skip

    return match_factor(progress, target, start=1.0, tol=tol, max_evals=max_evals)
