"""Population analyses: the group-size sweep, matched focal controls, batch-gradient SNR.

The sweep (the experiment the package exists for): GRPO at several N, F-GRPO at one N for
some gammas, and the vanilla control at ``lr x c`` with ``c`` the effective learning-rate
multiplier of focal weighting on the population (theory.md section 13), every arm over the same
seeds (common random numbers pair them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from .._validate import fail
from ..advantages import effective_lr_multiplier
from .config import PopulationConfig, population_config_hash
from .generate import Population, generate_population
from .runner import advantage_tables, algorithm_record, simulate_population

__all__ = ["batch_gradient_snr", "group_size_sweep"]


def batch_gradient_snr(
    cfg: PopulationConfig, n_draws: int = 200, population: Population | None = None
) -> dict[str, float]:
    """Signal-to-noise ratio |E[g]|^2 / E[|g|^2] of the batch gradient at the start state.

    Monte Carlo over ``n_draws`` batches (B prompts, N rollouts each) of the log-prob surrogate
    gradient, for the shared logits theta (``snr_theta``) and for all per-prompt logits phi
    (``snr_phi``); |E[g]|^2 is estimated without bias, (n |mean|^2 - mean|g|^2) / (n - 1).
    """
    from ..sim.keys import run_keys
    from . import kernel as kn

    if n_draws < 2:
        fail("n_draws", n_draws, ">= 2")
    from ..sim.records import dense_scheme

    if dense_scheme(cfg.training_scheme()):
        fail("scheme", cfg.scheme, "a table scheme (the gradient SNR reads per-X tables)")
    pop = generate_population(cfg) if population is None else population
    a_c, a_w, zero_sum = advantage_tables(cfg)
    K = pop.theta0.shape[0]
    gsum = np.zeros((1 + pop.n_train, K))
    sq = np.zeros(2)
    kn.batch_gradients(
        pop.theta0, pop.phi0, pop.correct, pop.rare, pop.rare.any(axis=1), pop.n_train, cfg.B,
        a_c, a_w, run_keys(cfg.seed, 1)[0], algorithm_record(cfg, zero_sum, dynamic=False),
        n_draws, gsum, sq,
    )  # fmt: skip
    n = n_draws
    out = {}
    for name, g, s in (("theta", gsum[:1], sq[0]), ("phi", gsum[1:], sq[1])):
        m2 = float(((g / n) ** 2).sum())
        e2 = s / n
        out[f"snr_{name}"] = (n * m2 - e2) / (n - 1) / e2 if e2 > 0 else float("nan")
    return out


ARM_COLUMNS = ["arm", "N", "gamma", "lr_factor"]


def _last_row_config(cfg: PopulationConfig) -> PopulationConfig:
    """``cfg`` logging only step 0, the step before its last logged one, and its last step.

    Its last-step rows are ``cfg``'s bit for bit: the kernel's random streams do not depend on
    what is logged, the metrics are of the state at that step, the rises are from step 0, and
    the per-interval counters (``groups``, ``active_frac``, ``tail_miss_rate``, ``resamples``)
    cover the same last interval. Only ``log_every`` (and so ``config_hash``) differs. With
    more than three logged steps the one before the last, ``prev``, is above ``steps / 2``, so
    ``log_every = prev`` logs exactly ``0, prev, steps``.
    """
    sched = cfg.log_schedule()
    if len(sched) <= 3:
        return cfg
    return cfg.replace(log_every=int(sched[-2]))


def group_size_sweep(
    base: PopulationConfig,
    Ns: Sequence[int] = (2, 4, 8, 16, 32),
    focal_N: int = 8,
    gammas: Sequence[float] = (0.5, 1.0),
    progress: Callable[[str], None] | None = None,
    progress_match: bool = True,
) -> pd.DataFrame:
    """Last-step rows (bucket "all" and difficulty buckets) of every arm of the sweep.

    Arms: ``grpo`` at each N; ``focal`` at ``focal_N`` for each gamma; ``control`` = vanilla at
    ``focal_N`` with both learning rates times
    :func:`fgrpo_theory.advantages.effective_lr_multiplier` of that gamma on the train prompts'
    mu_0 (step-size matched, a priori); with ``progress_match``, ``control-progress`` = vanilla
    at the factor whose median final train pass@1 equals the focal run's
    (:func:`~fgrpo_theory.population.match_progress_population`; under Adam, which normalizes a
    constant loss factor away, this is the matched control). Columns: the runner's tidy columns
    plus ``arm``, ``lr_factor`` and, for ``control-progress``, ``match_error`` (achieved minus
    target median pass@1). Each run logs only the steps its last rows need
    (:func:`_last_row_config`: the rows ``base``'s own logging gives, from fewer metric passes;
    ``config_hash`` is that of the config run), and no config is trained twice: the progress
    search's points are kept, so its matched point is the ``control-progress`` arm's run.
    """
    from .matching import match_progress_population

    pop = generate_population(base)
    mu_train = pop.mu0[: pop.n_train]
    arms: list[tuple[str, int, float, float]] = [("grpo", int(n), 0.0, 1.0) for n in Ns]
    for g in gammas:
        arms.append(("focal", focal_N, float(g), 1.0))
        c = float(effective_lr_multiplier(mu_train, focal_N, g, advantage=base.advantage))
        arms.append(("control", focal_N, float(g), c))
        if progress_match:
            arms.append(("control-progress", focal_N, float(g), np.nan))
    frames = []
    focal_runs: dict[float, pd.DataFrame] = {}
    vanilla = None  # the grpo arm at focal_N: the progress search's first point (c = 1)
    runs: dict[str, pd.DataFrame] = {}  # every run of the sweep and its searches, by config

    def run(cfg: PopulationConfig, threads: int | None = None) -> pd.DataFrame:
        cfg = _last_row_config(cfg)
        h = population_config_hash(cfg)
        if h not in runs:
            runs[h] = simulate_population(cfg, population=pop, threads=threads)
        return runs[h]

    for arm, n, g, c in arms:
        err = np.nan
        if arm == "control-progress":
            focal_cfg = base.replace(N=n, gamma=g)
            m = match_progress_population(
                focal_cfg, population=pop, focal=focal_runs[g], vanilla=vanilla,
                simulate_fn=lambda cfg: run(cfg, threads=1),  # (threads as final_metrics)
            )  # fmt: skip
            c, err = m.multiplier, m.error
        cfg = base.replace(
            N=n,
            gamma=g if arm == "focal" else 0.0,
            lr_shared=base.lr_shared * c,
            lr_prompt=base.lr_prompt * c,
        )
        df = run(cfg)
        if arm == "focal":
            focal_runs[g] = df
        if arm == "grpo" and n == focal_N:
            vanilla = df
        df = df[df["step"] == cfg.steps].copy()
        df["arm"] = arm
        df["lr_factor"] = c
        df["gamma_arm"] = g
        df["match_error"] = err
        frames.append(df)
        if progress is not None:
            progress(f"{base.name} {arm} N={n} gamma={g}")
    return pd.concat(frames, ignore_index=True)
