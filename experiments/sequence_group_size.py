"""Group size on the sequence rung: GRPO at N = 2..32, fixed B (the paper's Table 10 analogue).

Settings fixed before any result (docs/sequence.md, 2026-11-25): the multi-solution grid-route
task (L = 7) and its SFT model, GRPO at N = 2, 4, 8, 16, 32 with B = 8 prompts per step, 40
steps, AdamW lr 3e-4 (fixed, so rollouts per step grow with N as in Table 10), 8 task draws x 2
seeds = 16 runs per N (1 seed at first; 2 by the project's rule of at least 16 runs, decided for
the rule, not from results). Outcomes at the last step, exact (prefix-tree walk) on 16 held-out
and 16 train prompts of each draw: pass@1, pass@16, pass@256, the rare correct mass tau and
coverage@256.
Figure: one panel per metric (held-out prompts), the median over draws x seeds against N with
its 95 % two-level bootstrap interval (draws, then seeds), every run (draw x seed) a small dot,
the SFT start (step 0) as a dashed line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import footnote
from ._sequence import WORKERS, levels, multi_base, smoke_base

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "STORED", "Params", "PARAMS", "compute", "plot",
           "summary", "paired"]  # fmt: skip

TITLE = "Sequence rung: GRPO group-size sweep at fixed B (Table 10 analogue)"
IN_PAPER = False
COST_SECONDS = 1200  # 8 draws x 2 seeds: twice the 1-seed estimate (1 seed took 180 s on 27 Nov)
STORED = True

METRICS = ("pass_at_1", "pass_at_16", "pass_at_256", "tau", "coverage_at_256", "rare_nll_rise")
_LABELS = {"pass_at_1": "pass@1", "pass_at_16": "pass@16", "pass_at_256": "pass@256",
           "tau": "rare correct mass tau", "coverage_at_256": "rare coverage@256",
           "rare_nll_rise": "rare-NLL rise from step 0 (nats)"}  # fmt: skip


@dataclass(frozen=True)
class Params:
    Ns: tuple[int, ...] = (2, 4, 8, 16, 32)
    draws: tuple[int, ...] = tuple(range(8))
    seeds: int = 2
    steps: int = 40
    B: int = 8


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Last-step metrics per (draw, seed, N, split), plus the step-0 rows (``role = "start"``)."""
    from fgrpo_theory.sequence.study import SeqArm, map_draws

    base = smoke_base() if fast else multi_base(params.steps)
    Ns = params.Ns[:2] if fast else params.Ns
    arms = [SeqArm(f"N={n}", "grpo", 1.0, n, "grpo", str(n)) for n in Ns]
    runs, _ = map_draws(base, params.draws[:2] if fast else params.draws, arms,
                        seeds=1 if fast else params.seeds, ladder=(),
                        workers=1 if fast else WORKERS)  # fmt: skip
    return runs


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Median and two-level interval per N, split and metric; N = 0 is the SFT start."""
    runs = df[df.role == "arm"]
    start = df[df.role == "start"].assign(seed_index=0, N=0)
    return levels(pd.concat([start, runs]), "N", METRICS)


def paired(df: pd.DataFrame, pairs=((8, 2), (32, 8), (32, 2)), split: str = "test"):
    """N = a minus N = b per metric (same draws and seeds): difference of medians, its 95 %
    two-level paired interval, the draws with a positive difference of medians and the runs
    (draw x seed) with a positive difference."""
    from fgrpo_theory.fair.twolevel import metric_grid, per_draw_differences, two_level_interval

    runs = df[(df.role == "arm") & (df.split == split)]
    rows = []
    for a, b in pairs:
        A, B = runs[runs.N == a], runs[runs.N == b]
        if not (len(A) and len(B)):
            continue
        for m in METRICS:
            ga, gb = metric_grid(A, m), metric_grid(B, m)
            est, lo, hi = two_level_interval(ga, gb)
            dd = per_draw_differences(ga, gb)
            rows.append(dict(a=a, b=b, metric=m, median=est, lo=lo, hi=hi,
                             draws_up=int((dd > 0).sum()), draws=len(dd),
                             runs_up=int((ga > gb).sum()), runs=ga.size))  # fmt: skip
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    from fgrpo_theory.plotting import color_cycle, new_figure

    s = summary(df)
    s = s[s.split == "test"]
    c = color_cycle(2)
    fig = new_figure(7.0, 4.2)
    axes = fig.subplots(2, 3).ravel()
    for ax, m in zip(axes, METRICS, strict=True):
        e = s[(s.metric == m) & (s.N > 0)].sort_values("N")
        st = s[(s.metric == m) & (s.N == 0)]
        x = e.N.to_numpy(float)
        for xi, rv in zip(x, e.run_values, strict=True):
            ax.plot(np.full(len(rv), xi) * 1.06, rv, ".", ms=3, color=c[1], alpha=0.5, mec="none")
        ax.errorbar(x, e["median"], yerr=[e["median"] - e.lo, e.hi - e["median"]], fmt="o-",
                    ms=3.5, color=c[0], capsize=2, lw=1)  # fmt: skip
        if len(st):
            ax.axhline(float(st["median"].iloc[0]), color="0.4", ls="--", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, [str(int(v)) for v in x])
        ax.set_xlabel("group size N")
        ax.set_ylabel(_LABELS[m])
    axes[0].plot([], [], "--", color="0.4", label="SFT start (step 0)")
    axes[0].plot([], [], ".", color=c[1], label="each run (draw x seed)")
    axes[0].legend(fontsize=5.5)
    runs = df[df.role == "arm"]
    footnote(fig, (
        f"Sequence rung, held-out prompts: GRPO at fixed B = {params.B}, {params.steps} steps, "
        f"AdamW lr 3e-4, multi-solution grid routes (L = 7, rare = >= 3 turns), "
        f"{runs.population_seed.nunique()} task draws x {runs.seed_index.nunique()} seed(s) = "
        f"{runs.groupby(['population_seed', 'seed_index']).ngroups} runs per N; median over "
        "draws x seeds with its 95% two-level bootstrap interval (draws, then seeds), dots = runs "
        "(draw x seed); exact metrics by the prefix-tree walk on 16 held-out "
        "prompts per draw."), width=150)  # fmt: skip
    return fig
