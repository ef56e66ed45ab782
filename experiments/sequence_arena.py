"""The arena's main arms on the sequence rung at N = 8, each against progress-matched GRPO.

Settings fixed before any result (docs/sequence.md, 2026-11-25): the multi-solution grid-route
task (L = 7) and its SFT model; N = 8, B = 8, 40 steps, AdamW lr 3e-4; arms GRPO, focal gamma
0.5 and 1, MaxRL, W-REINFORCE (lambda 0.1), PKPO (k = 4), unlikeliness reward (penalty 0.25) (the
tabular arena's middle coefficients); 8 task draws x 2 seeds = 16 runs per arm (1 seed at first;
2 by the project's rule of at least 16 runs against a progress-matched control, decided for the
rule, not from results). Each arm is compared with GRPO at
the learning-rate factor whose median final train pass@1 equals the arm's on the same draw
(:func:`fgrpo_theory.sequence.study.match_controls`, on the ladder 0.25, 0.5, 1, 2). Added on
2026-11-25 (docs/sequence.md, "Amendment: the regularizer arms"), with coefficients fixed before
they were run: entropy bonus 0.01 and k3 KL to the SFT model 0.01 (the population arena's middle
coefficients; per-token terms with token-mean aggregation, TRL's convention) and differential
smoothing at gamma_p = gamma_n = 0.05 / 7 (its code's default 0.05 on the per-token mean
log-probability; this loop passes the sequence sum over L = 7 moves).
Figure: one panel per held-out metric, one line per arm (sorted by pass@256), arm minus matched
GRPO: every run's difference, arm minus its matched GRPO on the same draw and seed (dots), and the
pooled difference of medians with its 95 % two-level paired interval (bar).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import footnote
from ._sequence import WORKERS, arm_summary, multi_base, smoke_base

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "STORED", "Params", "PARAMS", "compute", "plot",
           "summary", "MISSING"]  # fmt: skip

TITLE = "Sequence rung: the arena's arms at N = 8 vs progress-matched GRPO"
IN_PAPER = False
COST_SECONDS = 1800  # 8 draws x 2 seeds: twice the 1-seed estimate (1 seed took 371 s on 27 Nov)
STORED = True

#: (name, scheme spec, family, coefficient label)
ARMS = (
    ("grpo", "grpo", "grpo", ""),
    ("focal 0.5", "grpo+focal:gamma=0.5", "focal", "0.5"),
    ("focal 1", "grpo+focal:gamma=1", "focal", "1"),
    ("maxrl", "maxrl", "maxrl", ""),
    ("w-reinforce 0.1", "w-reinforce:lambda=0.1", "w-reinforce", "0.1"),
    ("pkpo 4", "pkpo:k=4", "pkpo", "4"),
    ("unlikeliness 0.25", "unlikeliness:penalty=0.25", "unlikeliness", "0.25"),
    ("entropy 0.01", "grpo+entropy:coef=0.01", "entropy", "0.01"),
    ("kl 0.01", "grpo+kl:coef=0.01,estimator=k3", "kl", "0.01"),
    ("ds x1", "ds:gamma_p=0.00714,gamma_n=0.00714", "ds", "x1"),
)
#: the arms the fast (CI) configuration runs: GRPO, focal, and one of each term the loop adds
#: beyond advantages (entropy, KL with its reference model, a likelihood-aware scheme)
FAST_ARMS = ("grpo", "focal 0.5", "focal 1", "entropy 0.01", "kl 0.01", "ds x1")
#: arms of the tabular arena not in the sequence arena, and why
MISSING: dict[str, str] = {}
METRICS = ("pass_at_1", "pass_at_16", "pass_at_256", "coverage_at_256", "rare_nll_rise",
           "entropy")  # fmt: skip
SCALE = {"pass_at_1": 100.0, "pass_at_16": 100.0, "pass_at_256": 100.0, "coverage_at_256": 100.0}
_LABELS = {"pass_at_1": "pass@1 (points)", "pass_at_16": "pass@16 (points)",
           "pass_at_256": "pass@256 (points)", "coverage_at_256": "rare coverage@256 (points)",
           "rare_nll_rise": "rare-NLL rise (nats)", "entropy": "entropy (nats)"}  # fmt: skip


@dataclass(frozen=True)
class Params:
    draws: tuple[int, ...] = tuple(range(8))
    seeds: int = 2
    steps: int = 40
    N: int = 8
    ladder: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0)


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Last-step metrics per (draw, seed, arm or ladder rung, split) and the step-0 rows."""
    from fgrpo_theory.sequence.study import SeqArm, map_draws

    base = smoke_base(N=params.N) if fast else multi_base(params.steps, params.N)
    chosen = [a for a in ARMS if a[0] in FAST_ARMS] if fast else ARMS
    arms = [SeqArm(n, s, 1.0, 0, f, c) for n, s, f, c in chosen]
    runs, _ = map_draws(base, params.draws[:2] if fast else params.draws, arms,
                        seeds=1 if fast else params.seeds, ladder=params.ladder,
                        workers=1 if fast else WORKERS)  # fmt: skip
    return runs


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Arm minus matched GRPO per arm and metric (held-out prompts), sorted by pass@256."""
    s = arm_summary(df, METRICS, scale=SCALE)
    order = s[s.metric == "pass_at_256"].sort_values("median", ascending=False)["arm"]
    return s.set_index("arm").loc[list(order)].reset_index()


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    from fgrpo_theory.plotting import color_cycle, new_figure

    s = summary(df)
    order = list(dict.fromkeys(s["arm"]))[::-1]
    y = {a: i for i, a in enumerate(order)}
    up, down, flat = color_cycle(3)
    fig = new_figure(7.0, 0.22 * len(order) * 2 + 1.6)
    axes = fig.subplots(2, 3, sharey=True).ravel()
    for ax, m in zip(axes, METRICS, strict=True):
        for _, r in s[s.metric == m].iterrows():
            col = up if r.lo > 0 else (down if r.hi < 0 else flat)
            yy = y[r.arm]
            # runs just below their arm's bar, so that the bar does not hide them
            ax.plot(r.run_diffs, np.full(len(r.run_diffs), yy - 0.22), ".", ms=3, color=col,
                    alpha=0.5, mec="none")  # fmt: skip
            ax.errorbar([r["median"]], [yy], xerr=[[r["median"] - r.lo], [r.hi - r["median"]]],
                        fmt="o", ms=3, color=col, capsize=1.5, lw=0.8)  # fmt: skip
        ax.axvline(0.0, color="0.5", lw=0.6)
        ax.set_yticks(range(len(order)), order, fontsize=6)
        ax.set_xlabel(f"arm - matched GRPO: {_LABELS[m]}", fontsize=6)
    runs = df[df.role == "arm"]
    ladder = ", ".join(f"{f:g}" for f in params.ladder)
    n_runs = runs.groupby(["population_seed", "seed_index"]).ngroups
    footnote(fig, (
        f"Sequence rung, held-out prompts at equal train pass@1: each arm minus GRPO "
        f"progress-matched on each of {runs.population_seed.nunique()} task draws x "
        f"{runs.seed_index.nunique()} seed(s) = {n_runs} runs per arm (ladder lr x {ladder}, "
        f"interpolated); N = {params.N}, B = 8, {params.steps} steps, AdamW lr 3e-4, "
        "multi-solution grid routes (L = 7). Dots = runs (draw x seed), arm minus matched GRPO on "
        "the same draw and seed; bar = pooled difference of medians with its 95% two-level paired "
        "interval; blue = interval above 0, orange = below 0, green = across 0."
        + (f" Not run: {', '.join(MISSING)}." if MISSING else "")), width=150)  # fmt: skip
    return fig
