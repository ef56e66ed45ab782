"""Shared settings and table helpers of the sequence-rung experiments (``sequence_*.py``).

The settings were fixed on 2026-11-25 before any result (docs/sequence.md, "Experiments:
settings fixed before any result"). Nothing here imports torch at import time: the registry
imports every figure module, and the package must stay importable without the ``[torch]`` extra.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

__all__ = ["WORKERS", "pinned_kernels", "multi_base", "single_base", "smoke_base", "levels",
           "compared", "arm_summary"]  # fmt: skip

#: worker processes (the rows do not depend on it, so it is not a parameter)
WORKERS = 2


def pinned_kernels() -> None:
    """Refuse the full settings unless torch runs the CPU kernels they were stored with (pinned
    to AVX2: :mod:`fgrpo_theory.sequence._isa`), so that a table computed, cached or stored
    here is the one every x86-64 machine with AVX2 computes. A CPU without AVX2 and FMA is not
    pinned and not refused (its numbers are its own)."""
    import os

    from fgrpo_theory._validate import fail
    from fgrpo_theory.sequence import _isa

    if _isa.host_has_avx2() and not _isa.pinned():
        fail(_isa.ENV, os.environ.get(_isa.ENV, ""),
             "unset or 'avx2' and fgrpo_theory.sequence imported before torch for the sequence "
             f"experiments (torch runs {_isa.label()}, not the AVX2 kernels their tables were "
             "made with)")  # fmt: skip


def multi_base(steps: int = 40, N: int = 8, eval_prompts: int = 16):
    """The multi-solution base: the ``quick`` preset's task, model and SFT, B = 8, ``steps``,
    exact metrics on the first ``eval_prompts`` prompts of each split (:func:`pinned_kernels`
    first)."""
    from fgrpo_theory.sequence.run import preset

    pinned_kernels()

    return preset("quick", steps=steps, N=N, log_every=steps, eval_prompts=eval_prompts)


def single_base(steps: int = 40, N: int = 8, eval_prompts: int = 16):
    """The single-solution testbed: 1,024 train mazes, 1,000 SFT steps (docs/sequence.md;
    :func:`pinned_kernels` first)."""
    from fgrpo_theory.sequence.run import preset
    from fgrpo_theory.sequence.sft import SFTConfig
    from fgrpo_theory.sequence.task import GridTask

    pinned_kernels()

    cfg = preset("quick", steps=steps, N=N, log_every=steps, eval_prompts=eval_prompts)
    return replace(
        cfg,
        name="single-1024",
        task=GridTask(L=7, variant="single", max_walls=10, n_train=1024, n_test=64),
        sft=SFTConfig(teacher_beta=2.0, steps=1000, batch=64, lr=3e-3),
    )


def smoke_base(variant: str = "multi", N: int = 4):
    """The reduced configuration CI runs end to end (the ``smoke`` preset: L = 4, seconds)."""
    from fgrpo_theory.sequence.run import preset
    from fgrpo_theory.sequence.task import GridTask

    cfg = preset("smoke", N=N)
    if variant == "single":
        cfg = replace(cfg, task=GridTask(L=4, variant="single", max_walls=6, n_train=12,
                                         n_test=6, min_correct=3, rare_turns=2))  # fmt: skip
    return cfg


def levels(runs: pd.DataFrame, by: str, metrics, n_boot: int = 4_000) -> pd.DataFrame:
    """Median over draws x seeds of each metric per value of ``by`` and split, with its
    two-level bootstrap interval (draws, then seeds), every draw's median (``draw_medians``) and
    every run's value (``run_values``: every (draw, seed), draw-major)."""
    from fgrpo_theory.fair.twolevel import metric_grid, per_draw_differences, two_level_interval

    rows = []
    for (key, split), e in runs.groupby([by, "split"], sort=True):
        for m in metrics:
            g = metric_grid(e, m)
            if not np.isfinite(g).all() or g.shape[0] < 2:
                continue
            z = np.zeros_like(g)
            est, lo, hi = two_level_interval(g, z, n_boot=n_boot)
            rows.append({by: key, "split": split, "metric": m, "median": est, "lo": lo, "hi": hi,
                         "draw_medians": per_draw_differences(g, z), "run_values": g.ravel(),
                         "draws": g.shape[0], "seeds": g.shape[1]})  # fmt: skip
    return pd.DataFrame(rows)


def compared(runs: pd.DataFrame) -> pd.DataFrame:
    """The arms with their progress-matched controls (:func:`fgrpo_theory.sequence.study.
    match_controls`)."""
    from fgrpo_theory.sequence.study import match_controls

    return match_controls(runs)


def arm_summary(runs: pd.DataFrame, metrics, scale=None, n_boot: int = 4_000) -> pd.DataFrame:
    """Arm minus matched GRPO per arm and metric on held-out prompts, two-level intervals
    (:func:`fgrpo_theory.fair.twolevel.summarize_arms` on the matched table)."""
    from fgrpo_theory.fair.twolevel import summarize_arms

    return summarize_arms(compared(runs), metrics, split="test", scale=scale, n_boot=n_boot)
