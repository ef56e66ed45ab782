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

import numpy as np
import pandas as pd

from .._validate import fail
from ..fair.controls import ProgressMatch, match_factor
from .config import PopulationConfig
from .generate import Population, generate_population
from .runner import simulate_population

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
) -> ProgressMatch:
    """Learning-rate factor c of the vanilla control whose final train pass@1 equals focal's.

    ``cfg`` is the focal config (gamma > 0). Each evaluation trains vanilla (gamma = 0) with both
    learning rates times c over the config's seeds and takes the median final train pass@1;
    ``tol`` (default 5e-4, 0.05 points: below the seed-to-seed spread of final pass@1 at 16
    seeds on the default population, and above float noise) bounds the achieved mismatch.
    ``focal``: the focal run's table if already computed. The result's ``lr`` and
    ``multiplier`` are both the factor c (the population has two learning rates).
    """
    if not isinstance(cfg, PopulationConfig):
        fail("cfg", cfg, "a PopulationConfig")
    if cfg.gamma == 0:
        fail("gamma", cfg.gamma, "> 0 (a vanilla config has no focal run to match)")
    pop = generate_population(cfg) if population is None else population
    last = cfg.replace(log_every=cfg.steps)
    if focal is None:
        focal = simulate_population(last, population=pop)
    target = final_median(focal, *PROGRESS_METRIC)

    def progress(c: float) -> float:
        run = last.replace(gamma=0.0, lr_shared=cfg.lr_shared * c, lr_prompt=cfg.lr_prompt * c)
        return final_median(simulate_population(run, population=pop), *PROGRESS_METRIC)

    return match_factor(progress, target, start=1.0, tol=tol, max_evals=max_evals)
